//! Which store a command runs on: an embedded file (`--db PATH`) or a
//! PostgreSQL database shared by several nodes (`--store postgres://…`), and
//! opening it for writing.

use std::path::{Path, PathBuf};
use world_store::postgres::{PgOptions, PgStore};
use world_store::{OnFatal, OpenError, RecoveryReport, Store, StoreOptions, WorldStore};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    Embedded(PathBuf),
    Postgres(String),
}

/// A store opened for writing, and what opening it found.
pub struct Opened {
    pub store: Box<dyn WorldStore>,
    pub recovery: RecoveryReport,
    /// Log frames replayed at open (the embedded engine after an unclean stop).
    pub replayed_frames: u64,
    pub torn_bytes: u64,
}

impl StoreSpec {
    /// The engine's name, as metrics label it.
    pub fn engine(&self) -> &'static str {
        match self {
            StoreSpec::Embedded(_) => "embedded",
            StoreSpec::Postgres(_) => "postgres",
        }
    }

    /// From a verb's `--db` and `--store` (clap makes them exclusive).
    pub fn from_args(db: Option<PathBuf>, store: Option<String>) -> Result<StoreSpec, String> {
        match (db, store) {
            (Some(db), None) => Ok(StoreSpec::Embedded(db)),
            (None, Some(url)) if world_store::postgres::is_url(&url) => Ok(StoreSpec::Postgres(url)),
            (None, Some(url)) => Err(format!(
                "--store {}: not a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE); a file is --db PATH",
                world_store::postgres::redacted(&url)
            )),
            _ => Err("give the store: --db PATH (one file) or --store postgres://… (shared by several nodes)".into()),
        }
    }

    /// How the store is named in messages: the file, or the URL without its password.
    pub fn label(&self) -> String {
        match self {
            StoreSpec::Embedded(path) => path.display().to_string(),
            StoreSpec::Postgres(url) => world_store::postgres::redacted(url),
        }
    }

    /// The format an embedded store will be upgraded from when opened for
    /// writing (`world_store::pending_upgrade`); PostgreSQL's schema is
    /// made and upgraded by `worldd store init`.
    pub fn pending_upgrade(&self) -> Option<u64> {
        match self {
            StoreSpec::Embedded(path) => world_store::pending_upgrade(path),
            StoreSpec::Postgres(_) => None,
        }
    }

    /// Opens the store for writing: the embedded engine takes the file's
    /// writer lock and recovers; a PostgreSQL node registers with a lease and
    /// resolves what lapsed nodes left in flight.
    pub fn open(&self, now: u64, on_fatal: Option<OnFatal>, cache_bytes: Option<usize>) -> Result<Opened, OpenError> {
        match self {
            StoreSpec::Embedded(path) => {
                let opts = StoreOptions { on_fatal, cache_bytes, ..StoreOptions::default() };
                let (store, recovery) = Store::open_with(path, now, opts)?;
                let replayed = store.replayed();
                let (replayed_frames, torn_bytes) = (replayed.frames_applied, replayed.scan.torn_bytes);
                Ok(Opened { store: Box::new(store), recovery, replayed_frames, torn_bytes })
            }
            StoreSpec::Postgres(url) => {
                let (store, recovery) = PgStore::open(url, now, PgOptions { on_fatal, ..PgOptions::default() })?;
                Ok(Opened { store: Box::new(store), recovery, replayed_frames: 0, torn_bytes: 0 })
            }
        }
    }
}

impl StoreSpec {
    /// A snapshot for reading only: no writer lock is taken and no node
    /// registers; nothing is written.
    pub fn read_only_snapshot(&self) -> Result<world_store::Snapshot, String> {
        match self {
            StoreSpec::Embedded(db) => {
                let store = world_store::ReadOnlyStore::open(db).map_err(|e| e.to_string())?;
                world_store::Reads::snapshot(&store).map_err(|e| e.to_string())
            }
            StoreSpec::Postgres(url) => world_store::postgres::read_only(url).map_err(|e| e.to_string()),
        }
    }
}

/// Writes the export of `snap` to `out` whole or not at all (`write_private`).
/// Returns the records written.
pub fn export_to_file(snap: &world_store::Snapshot, out: &Path, with_sessions: bool) -> Result<u64, String> {
    write_private(out, |file| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        let n =
            world_store::export::export(snap, &mut w, with_sessions, crate::clock::now()).map_err(|e| e.to_string())?;
        w.into_inner().map_err(|e| e.to_string())?;
        Ok(n)
    })
}

/// Writes a file whole or not at all, readable by its owner alone: `fill`
/// writes a new `<out>.partial` (made with `O_EXCL | O_NOFOLLOW` at mode
/// 0600, so no link planted there is followed), which is synced and renamed
/// over `out`. A symbolic link at `out`, or a file of another user, is refused
/// before anything is written.
pub fn write_private<T>(out: &Path, fill: impl FnOnce(&mut std::fs::File) -> Result<T, String>) -> Result<T, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => return Err(format!("{} is a symbolic link: refused", out.display())),
        Ok(m) if m.uid() != nix::unistd::geteuid().as_raw() => {
            return Err(format!("{} belongs to another user (uid {}): refused", out.display(), m.uid()));
        }
        Ok(m) if !m.is_file() => return Err(format!("{} is not a regular file: refused", out.display())),
        _ => {}
    }
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    // A `.partial` left by a write cut short (or planted) is unlinked, never followed.
    let _ = std::fs::remove_file(&tmp);
    let result = (|| -> Result<T, String> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        let value = fill(&mut file)?;
        file.sync_all().map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, out).map_err(|e| format!("rename to {}: {e}", out.display()))?;
        Ok(value)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_a_file_or_a_postgres_url_and_its_password_never_shows() {
        assert_eq!(StoreSpec::from_args(Some("w.db".into()), None), Ok(StoreSpec::Embedded("w.db".into())));
        let url = "postgres://world:s3cret@db.internal:5432/world";
        let spec = StoreSpec::from_args(None, Some(url.into())).unwrap();
        assert_eq!(spec.label(), "postgres://world@db.internal:5432/world");
        let err = StoreSpec::from_args(None, Some("mysql://u:pw@h/d".into())).unwrap_err();
        assert!(err.contains("not a PostgreSQL URL") && !err.contains("pw"), "{err}");
        let err = StoreSpec::from_args(None, Some("host=h password=s3cret".into())).unwrap_err();
        assert!(err.contains("not a PostgreSQL URL") && !err.contains("s3cret"), "{err}");
        assert!(StoreSpec::from_args(None, None).is_err());
    }
}
