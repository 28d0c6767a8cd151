//! Bytes written to disk, counted two ways, for the benches that report them.
//!
//! `/proc/<pid>/io` `write_bytes` is what a process caused to be written,
//! counted when a page-cache folio turns dirty: a whole folio, however little
//! of it changed. The block device's own counter (`/sys/dev/block/M:m/stat`,
//! sectors written) is what reached the disk, journal and metadata included,
//! from every process on the machine: on a quiet machine, the truth.

#![allow(dead_code)] // each bench uses its own part

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Bytes written to disk so far, by one process and by the device under a path.
#[derive(Debug, Clone, Copy, Default)]
pub struct Written {
    pub process: u64,
    pub device: Option<u64>,
}

impl Written {
    /// `pid` is a process id, or `self`; `path` lies on the device to count.
    pub fn now(pid: &str, path: &Path) -> Written {
        Written { process: process_written(pid), device: device_written(path) }
    }

    pub fn since(self, before: Written) -> Written {
        Written {
            process: self.process.saturating_sub(before.process),
            device: self.device.zip(before.device).map(|(a, b)| a.saturating_sub(b)),
        }
    }

    /// `process / device` KiB per item, the device part `—` where unknown.
    pub fn per(self, items: usize) -> String {
        let kib = |b: u64| b as f64 / 1024.0 / items.max(1) as f64;
        match self.device {
            Some(d) => format!("{:.1} / {:.1}", kib(self.process), kib(d)),
            None => format!("{:.1} / —", kib(self.process)),
        }
    }
}

impl std::ops::Add for Written {
    type Output = Written;
    fn add(self, other: Written) -> Written {
        Written { process: self.process + other.process, device: self.device.zip(other.device).map(|(a, b)| a + b) }
    }
}

fn process_written(pid: &str) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines().find_map(|l| l.strip_prefix("write_bytes: ")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Sectors written to the block device holding `path`, in bytes; `None` where
/// the path is on no block device (tmpfs, overlay).
fn device_written(path: &Path) -> Option<u64> {
    let dev = std::fs::metadata(path).ok()?.dev();
    // Linux's dev_t layout (glibc's gnu_dev_major / gnu_dev_minor).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}
