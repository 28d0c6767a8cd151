//! The export stream's format: `MAGIC`, then frames of
//! `[u32 LE body length][blake3(body), 32 bytes][body]` where the body is one
//! CBOR `Record`. The first record is a `Header`, the last an `End` carrying
//! the record count, so a truncated stream is told from a complete one. Both
//! engines write and read their records through it.

use crate::error::{ReadError, WriteError};
use crate::ops::record::Record;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"WORLDEX1";
pub const EXPORT_FORMAT: u64 = 1;
/// Largest frame body (an object payload plus its metadata).
pub const FRAME_BODY_MAX: usize = crate::ops::OBJECT_PAYLOAD_MAX + (1 << 20);

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
}

/// A stream that does not check out, with the byte offset of the bad frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("export stream is damaged at byte offset {offset}: {detail}")]
pub struct FrameError {
    pub offset: u64,
    pub detail: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("import target {0} already exists; import only into a new store")]
    Exists(PathBuf),
    #[error("import target {0} already holds a world; import only into an empty store")]
    Occupied(String),
    #[error("cannot import: {0}")]
    Store(String),
    #[error("record at byte offset {offset} refused: {source}")]
    Refused { offset: u64, source: WriteError },
}

fn frame(out: &mut impl Write, record: &Record) -> std::io::Result<()> {
    let mut body = Vec::with_capacity(256);
    ciborium::into_writer(record, &mut body).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(|_| std::io::Error::other("frame too large"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(blake3::hash(&body).as_bytes())?;
    out.write_all(&body)
}

/// A stream of exactly these records (for tests and tools): `MAGIC` + frames.
pub fn encode_records(records: &[Record]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for r in records {
        // Writing into memory cannot fail.
        frame(&mut out, r).expect("framing into memory");
    }
    out
}

/// A whole stream: `MAGIC`, the Header, what `scan` puts, the End. Returns
/// the number of records.
pub(crate) fn write(
    out: &mut impl Write,
    with_sessions: bool,
    now: u64,
    scan: impl FnOnce(&mut dyn FnMut(Record) -> Result<(), ExportError>) -> Result<(), ExportError>,
) -> Result<u64, ExportError> {
    out.write_all(MAGIC)?;
    let mut n = 0u64;
    let mut put = |r: Record| -> Result<(), ExportError> {
        n += 1;
        frame(&mut WriteAdapter(&mut *out), &r).map_err(ExportError::Io)
    };
    put(Record::Header { format: EXPORT_FORMAT, created_at: now, with_sessions })?;
    scan(&mut put)?;
    let records = n + 1;
    frame(out, &Record::End { records })?;
    out.flush()?;
    Ok(records)
}

struct WriteAdapter<'a>(&'a mut dyn Write);

impl Write for WriteAdapter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Reads every frame, checking checksums, order (Header first, End last with
/// the right count) and that nothing follows End. `f` sees each record with
/// its byte offset.
pub fn read_frames(
    input: &mut impl Read,
    mut f: impl FnMut(u64, Record) -> Result<(), FrameError>,
) -> Result<u64, FrameError> {
    let mut magic = [0u8; 8];
    read_exact_at(input, &mut magic, 0)?;
    if &magic != MAGIC {
        return Err(FrameError { offset: 0, detail: "not a World export (bad magic)".into() });
    }
    let mut offset = MAGIC.len() as u64;
    let mut count = 0u64;
    loop {
        let at = offset;
        let mut head = [0u8; 36];
        match read_exact_at(input, &mut head[..4], at) {
            Err(e) if count > 0 || e.detail.contains("ends") => {
                return Err(FrameError {
                    offset: at,
                    detail: "the stream ends before its End record (truncated)".into(),
                });
            }
            other => other?,
        }
        read_exact_at(input, &mut head[4..], at)?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > FRAME_BODY_MAX {
            return Err(FrameError { offset: at, detail: format!("frame length {len} exceeds {FRAME_BODY_MAX}") });
        }
        let mut body = vec![0u8; len];
        read_exact_at(input, &mut body, at)?;
        if blake3::hash(&body).as_bytes() != &head[4..36] {
            return Err(FrameError { offset: at, detail: "frame checksum mismatch".into() });
        }
        let record: Record = ciborium::from_reader(body.as_slice())
            .map_err(|e| FrameError { offset: at, detail: format!("frame does not decode: {e}") })?;
        offset += 36 + len as u64;
        count += 1;
        match (&record, count) {
            (Record::Header { format, .. }, 1) if *format == EXPORT_FORMAT => {}
            (Record::Header { format, .. }, 1) => {
                return Err(FrameError {
                    offset: at,
                    detail: format!("export format {format} is not {EXPORT_FORMAT}"),
                });
            }
            (_, 1) => return Err(FrameError { offset: at, detail: "the first record is not a Header".into() }),
            (Record::Header { .. }, _) => return Err(FrameError { offset: at, detail: "a second Header".into() }),
            (Record::End { records }, _) => {
                if *records != count {
                    return Err(FrameError {
                        offset: at,
                        detail: format!("End says {records} records, the stream has {count}"),
                    });
                }
                let mut extra = [0u8; 1];
                if input.read(&mut extra).map_err(|e| FrameError { offset, detail: e.to_string() })? != 0 {
                    return Err(FrameError { offset, detail: "bytes follow the End record".into() });
                }
                f(at, record)?;
                return Ok(count);
            }
            _ => {}
        }
        f(at, record)?;
    }
}

fn read_exact_at(input: &mut impl Read, buf: &mut [u8], offset: u64) -> Result<(), FrameError> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => return Err(FrameError { offset, detail: "the stream ends inside a frame (truncated)".into() }),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError { offset, detail: e.to_string() }),
        }
    }
    Ok(())
}

/// Whether `path` starts like an export stream.
pub fn is_export(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == MAGIC
}
