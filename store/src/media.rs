//! Where the store's bytes live: the redb file, the write-ahead log and the
//! payload file, behind two small interfaces so that tests can put faults (a
//! failing write, sync or resize; a full disk; a power loss) exactly where
//! they want them.

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Bound;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of every file of a store: its owner's alone. A store holds every
/// episode's files, arguments and results (and, in an export, its sessions).
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Opens a file of the store (read and write), creating it at
/// `PRIVATE_FILE_MODE`, and takes group and other bits off one an older
/// daemon created with looser ones.
pub fn open_private(path: &Path, create: bool, truncate: bool) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(truncate)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    tighten(&file)?;
    Ok(file)
}

/// Takes group and other bits off an open file.
pub fn tighten(file: &File) -> io::Result<()> {
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// A file of the store beside its database (the write-ahead log, the
/// payload file): positioned reads and writes, a data sync, a resize.
#[allow(clippy::len_without_is_empty)] // a file length, as redb's StorageBackend has it
pub trait WalIo: Debug + Send + Sync {
    fn len(&self) -> io::Result<u64>;
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()>;
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    fn sync_data(&self) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Asks the device to start writing `len` bytes at `offset` back, so
    /// that the `sync_data` after it waits less; a hint, which promises
    /// nothing and may do nothing.
    fn start_writeback(&self, _offset: u64, _len: u64) {}
}

/// Opens the store's two files. Opened again when the database must be
/// reopened after an I/O error.
pub trait Media: Send + Sync {
    /// The database file.
    fn database(&self) -> io::Result<Box<dyn StorageBackend>>;
    /// Whether there is no database yet (no file, or an empty one).
    fn database_is_new(&self) -> io::Result<bool>;
    /// An empty file beside the database, where a new one is built whole
    /// before it takes the database's place: a store whose creation was cut
    /// short is no store at all, never a file that cannot be opened.
    fn new_database(&self) -> io::Result<Box<dyn StorageBackend>>;
    /// Puts the file `new_database` built in the database's place, durably.
    fn install_new_database(&self) -> io::Result<()>;
    fn wal(&self) -> io::Result<Box<dyn WalIo>>;
    /// The payload file, created empty when missing.
    fn payloads(&self) -> io::Result<Box<dyn WalIo>>;
    /// Sets aside (`true`) or gives back (`false`) the reserve that lets a
    /// checkpoint and recovery finish on a full disk. `Ok(false)` when the
    /// space is not there.
    fn reserve(&self, keep: bool) -> io::Result<bool>;
}

/// A boxed backend, as redb takes one.
#[derive(Debug)]
pub struct Backend(pub Box<dyn StorageBackend>);

type BResult<T> = Result<T, BackendError>;

impl StorageBackend for Backend {
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write(offset, data)
    }
    fn close(&self) -> io::Result<()> {
        self.0.close()
    }
    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> BResult<bool> {
        self.0.try_lock_range(start, end)
    }
    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> BResult<bool> {
        self.0.try_lock_shared_range(start, end)
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> BResult<()> {
        self.0.lock_range(start, end)
    }
    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> BResult<()> {
        self.0.lock_shared_range(start, end)
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> BResult<()> {
        self.0.unlock_range(start, end)
    }
    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> BResult<bool> {
        self.0.query_lock_range(start, end)
    }
}

/// The path of the writer lock beside a store.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".writer.lock");
    PathBuf::from(s)
}

/// The path of the write-ahead log beside a store.
pub fn wal_path(db: &Path) -> PathBuf {
    beside(db, ".wal")
}

/// The path of the payload file beside a store.
pub fn payloads_path(db: &Path) -> PathBuf {
    beside(db, ".payloads")
}

/// The payload file beside a store, for reading only (`verify`, `export`,
/// read-only handles); a store without one yet reads as holding no payloads.
pub(crate) fn read_payloads(db: &Path) -> io::Result<std::sync::Arc<dyn WalIo>> {
    let path = payloads_path(db);
    match File::open(&path) {
        Ok(file) => Ok(std::sync::Arc::new(WalFile { file, path })),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(std::sync::Arc::new(NoFile)),
        Err(e) => Err(e),
    }
}

/// A file that is not there: empty, and refusing writes.
#[derive(Debug)]
pub(crate) struct NoFile;

/// The file that is not there.
pub(crate) static NO_FILE: NoFile = NoFile;

impl WalIo for NoFile {
    fn len(&self) -> io::Result<u64> {
        Ok(0)
    }
    fn read_at(&self, offset: u64, _: &mut [u8]) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("no payload file to read at {offset}")))
    }
    fn write_at(&self, _: u64, _: &[u8]) -> io::Result<()> {
        Err(io::Error::other("the payload file is read only here"))
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn set_len(&self, _: u64) -> io::Result<()> {
        Err(io::Error::other("the payload file is read only here"))
    }
}

/// Where a new database is built before it is put in place.
fn new_path(db: &Path) -> PathBuf {
    beside(db, ".new")
}

/// The path of the space reserve beside a store.
pub fn reserve_path(db: &Path) -> PathBuf {
    beside(db, ".reserve")
}

fn beside(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Space kept preallocated beside the store (`<db>.reserve`). On a full disk it
/// is given back, so that the checkpoint that empties the write-ahead log and
/// the recovery at the next open can always complete; it is set aside again
/// once space returns, and writes resume then.
pub const RESERVE_BYTES: u64 = 8 << 20;

/// The store's files on a local filesystem.
#[derive(Debug)]
pub struct FileMedia {
    pub path: PathBuf,
}

impl Media for FileMedia {
    fn database(&self) -> io::Result<Box<dyn StorageBackend>> {
        let file = open_private(&self.path, false, false)?;
        page_at_a_time(&file);
        let backend = FileBackend::new(file).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Box::new(backend))
    }

    fn database_is_new(&self) -> io::Result<bool> {
        match std::fs::metadata(&self.path) {
            Ok(m) => Ok(m.len() == 0),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(e),
        }
    }

    fn new_database(&self) -> io::Result<Box<dyn StorageBackend>> {
        let file = open_private(&new_path(&self.path), true, true)?;
        page_at_a_time(&file);
        let backend = FileBackend::new(file).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Box::new(backend))
    }

    fn install_new_database(&self) -> io::Result<()> {
        std::fs::rename(new_path(&self.path), &self.path)?;
        let dir = self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        File::open(dir)?.sync_all()
    }

    fn wal(&self) -> io::Result<Box<dyn WalIo>> {
        let path = wal_path(&self.path);
        let file = open_private(&path, true, false)?;
        page_at_a_time(&file);
        Ok(Box::new(WalFile { file, path }))
    }

    fn payloads(&self) -> io::Result<Box<dyn WalIo>> {
        let path = payloads_path(&self.path);
        let file = open_private(&path, true, false)?;
        page_at_a_time(&file);
        Ok(Box::new(WalFile { file, path }))
    }

    fn reserve(&self, keep: bool) -> io::Result<bool> {
        let path = reserve_path(&self.path);
        if !keep {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(true),
            };
        }
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == RESERVE_BYTES) {
            return Ok(true);
        }
        // Space has returned only if the reserve fits twice: once as headroom
        // (written, then given back), once kept. Otherwise the store would
        // resume, fill the same few bytes and stop again, over and over.
        let probe = beside(&self.path, ".reserve.probe");
        if !fill(&probe, RESERVE_BYTES)? {
            return Ok(false);
        }
        std::fs::remove_file(&probe)?;
        fill(&path, RESERVE_BYTES)
    }
}

/// Asks the kernel to read the file only a page at a time, and drops what it
/// has cached of it. Readahead fills the page cache with large folios (up to
/// 2 MiB), and the kernel counts a whole folio as written each time one 4 KiB
/// page of it is dirtied: measured here, an 800-byte log append then showed
/// as 134 KiB in `/proc/<pid>/io` (what iotop and every I/O accounting read)
/// while the disk received 5 KiB. The store gains nothing from readahead:
/// redb reads one B-tree page at a time and keeps its own cache, and the log
/// is read once, at open. Advice only, so a filesystem that ignores it (or
/// refuses it) changes nothing but the accounting.
fn page_at_a_time(file: &File) {
    use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
    let _ = posix_fadvise(file, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED);
    let _ = posix_fadvise(file, 0, 0, PosixFadviseAdvice::POSIX_FADV_RANDOM);
}

/// Writes `len` zero bytes to `path` and syncs them; `Ok(false)` (and no file)
/// when they do not fit. Written, not only sized: a sparse file holds no space.
fn fill(path: &Path, len: u64) -> io::Result<bool> {
    let write = || -> io::Result<()> {
        let file = open_private(path, true, true)?;
        let chunk = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < len {
            let n = chunk.len().min((len - at) as usize);
            file.write_all_at(&chunk[..n], at)?;
            at += n as u64;
        }
        file.sync_data()
    };
    match write() {
        Ok(()) => Ok(true),
        Err(e) if is_out_of_space(&e) => {
            let _ = std::fs::remove_file(path);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

#[derive(Debug)]
struct WalFile {
    file: File,
    path: PathBuf,
}

impl WalIo for WalFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(out, offset)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data().map_err(|e| io::Error::new(e.kind(), format!("fdatasync {}: {e}", self.path.display())))
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn start_writeback(&self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else { return };
        // SAFETY: a plain system call on a descriptor this file owns, with
        // no memory handed over. A failure only means no early start: the
        // sync that follows writes whatever is left.
        let _ = unsafe { libc::sync_file_range(self.file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
    }
}

/// Bytes per write of `write_zeros`: one page.
const ZEROS_PER_WRITE: usize = 4096;

/// Writes zeros from `*at` up to `to`, a page per write (a larger write
/// fills the page cache with large folios, see `page_at_a_time`), moving
/// `*at` past each write that landed: how the log and the payload file make
/// room ahead of their ends.
pub(crate) fn write_zeros(io: &dyn WalIo, at: &mut u64, to: u64) -> io::Result<()> {
    let chunk = [0u8; ZEROS_PER_WRITE];
    while *at < to {
        let n = chunk.len().min((to - *at) as usize);
        io.write_at(*at, &chunk[..n])?;
        *at += n as u64;
    }
    Ok(())
}

/// A full disk or an exhausted quota: writes may succeed again later.
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}
