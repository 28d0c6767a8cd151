//! Where a verb finds its store and its daemon when it is not told: the
//! flags first (`--db`, `--store`, `--addr`), then the environment
//! (`WORLD_DB`, `WORLD_STORE`, `WORLD_ADDR`, set once for a shell), then what
//! `worldd quickstart` left in `./world-quickstart`: its store and the
//! address its daemon bound (`<store>.addr`, written by every daemon at
//! start). So every command World prints (`worldd approve ap-…`, `worldd
//! episodes`, `worldd cancel …`) works as printed from the directory where
//! quickstart ran.

use crate::serve::addr_path;
use crate::stores::StoreSpec;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where `worldd quickstart` keeps its files, relative to where it ran.
pub const QUICKSTART_DIR: &str = "world-quickstart";
/// The store file a verb works on, for a shell.
pub const ENV_DB: &str = "WORLD_DB";
/// The PostgreSQL store a verb works on, for a shell.
pub const ENV_STORE: &str = "WORLD_STORE";
/// The daemon a client verb reads from, for a shell.
pub const ENV_ADDR: &str = "WORLD_ADDR";
/// The most an address file may hold: one URL.
const ADDR_FILE_MAX: u64 = 256;

/// What to give when nothing was found: said by every refusal of this module.
pub const HOW_TO_NAME: &str = "run it from the directory where `worldd quickstart` ran (it finds \
    ./world-quickstart), or name the store with --db PATH or --store URL (or set WORLD_DB=PATH or WORLD_STORE=URL)";

/// A variable of the environment, when set and not empty.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// What quickstart made in the current directory: its store file, or, for
/// one serving a PostgreSQL store, its node's local path (`Err`: the store
/// is in the database, which only its URL names).
fn quickstart_local() -> Option<Result<PathBuf, PathBuf>> {
    let dir = Path::new(".").join(QUICKSTART_DIR);
    let db = dir.join("world.db");
    if db.is_file() {
        return Some(Ok(db));
    }
    let node = dir.join("node");
    addr_path(&node).exists().then_some(Err(node))
}

/// The store a store verb works on: `--db` / `--store`, else `WORLD_DB` /
/// `WORLD_STORE`, else quickstart's in `./world-quickstart`.
pub fn store(db: Option<PathBuf>, store: Option<String>) -> Result<StoreSpec, String> {
    if db.is_some() || store.is_some() {
        return StoreSpec::from_args(db, store);
    }
    match (env(ENV_DB), env(ENV_STORE)) {
        (Some(_), Some(_)) => {
            Err(format!("both {ENV_DB} and {ENV_STORE} are set: unset one, or give --db PATH or --store URL"))
        }
        (Some(db), None) => Ok(StoreSpec::Embedded(PathBuf::from(db))),
        (None, Some(url)) => StoreSpec::from_args(None, Some(url)).map_err(|e| format!("{ENV_STORE}: {e}")),
        (None, None) => match quickstart_local() {
            Some(Ok(db)) => Ok(StoreSpec::Embedded(db)),
            Some(Err(_)) => Err(format!(
                "./{QUICKSTART_DIR} serves a PostgreSQL store: name it with --store URL (or set {ENV_STORE}=URL)"
            )),
            None => Err(format!("no store named and none in ./{QUICKSTART_DIR}: {HOW_TO_NAME}")),
        },
    }
}

/// A running daemon, as a client verb found it.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// `http://HOST:PORT`.
    pub addr: String,
    /// How the address was named, for messages: `--addr`, `WORLD_ADDR`, the file it was read from, or the default.
    pub named_by: String,
    /// The daemon's store (or node's local path), whose operator token reads for it.
    pub local: Option<PathBuf>,
}

/// The daemon a client verb reads from: `--addr`, else `WORLD_ADDR`, else
/// the address the daemon of `--db` / `WORLD_DB` (or of quickstart's store
/// in `./world-quickstart`) recorded, else the default. A store found in
/// `./world-quickstart` is used only with the address recorded beside it,
/// so its operator token never goes to a daemon named otherwise.
pub fn daemon(addr: Option<String>, db: Option<PathBuf>) -> Result<Daemon, String> {
    let db = db.or_else(|| env(ENV_DB).map(PathBuf::from));
    if let Some(addr) = addr {
        return Ok(Daemon { addr, named_by: "--addr".into(), local: db });
    }
    if let Some(addr) = env(ENV_ADDR) {
        return Ok(Daemon { addr, named_by: ENV_ADDR.into(), local: db });
    }
    let local = db.or_else(|| quickstart_local().map(|found| found.unwrap_or_else(|node| node)));
    if let Some(local) = &local {
        let file = addr_path(local);
        if let Some(addr) = read_addr(&file)? {
            return Ok(Daemon { addr, named_by: file.display().to_string(), local: Some(local.clone()) });
        }
    }
    Ok(Daemon { addr: crate::limits::DEFAULT_ADDR.into(), named_by: "the default".into(), local })
}

/// The address a daemon recorded in `file`, if there is the file: a
/// loopback `http://HOST:PORT`, or a refusal naming the file.
fn read_addr(file: &Path) -> Result<Option<String>, String> {
    let mut text = String::new();
    match std::fs::File::open(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", file.display())),
        Ok(f) => f.take(ADDR_FILE_MAX).read_to_string(&mut text).map_err(|e| format!("{}: {e}", file.display()))?,
    };
    let addr = text.trim();
    match addr.strip_prefix("http://").map(crate::serve::loopback_addr) {
        Some(Ok(_)) => Ok(Some(addr.to_string())),
        _ => Err(format!(
            "{} does not hold a daemon's loopback address (http://HOST:PORT); name the daemon with --addr URL",
            file.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::write_addr;

    #[test]
    fn an_address_file_holds_one_loopback_url_or_is_refused_naming_itself() {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("world.db");
        assert_eq!(read_addr(&addr_path(&local)).unwrap(), None);
        let file = write_addr(&local, &"127.0.0.1:7650".parse().unwrap()).unwrap();
        assert_eq!(file, dir.path().join("world.db.addr"));
        assert_eq!(read_addr(&file).unwrap().as_deref(), Some("http://127.0.0.1:7650"));
        for bad in ["http://10.0.0.1:80", "ftp://127.0.0.1:1", "", "garbage"] {
            std::fs::write(&file, bad).unwrap();
            let e = read_addr(&file).unwrap_err();
            assert!(e.contains("world.db.addr does not hold") && e.contains("--addr"), "{e}");
        }
    }
}
