//! The embedded engine's side of the export: its records, table by table,
//! and an import into a new file.

use super::stream::{ExportError, FrameError, ImportError, read_frames};
use crate::error::ReadError;
use crate::media::{FileMedia, Media, WalIo, lock_path, payloads_path, wal_path};
use crate::model::*;
use crate::ops::record::Record;
use crate::ops::{self, W};
use crate::read::RedbSnapshot;
use crate::refs::Ref;
use crate::rows;
use crate::tables::*;
use crate::view::View;
use redb::{ReadableTable, TableDefinition};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Records applied per import transaction.
pub const IMPORT_BATCH: usize = 4096;

fn each<K: redb::Key + 'static, V: redb::Value + 'static>(
    snap: &RedbSnapshot,
    def: TableDefinition<K, V>,
    mut f: impl FnMut(K::SelfType<'_>, V::SelfType<'_>) -> Result<(), ExportError>,
) -> Result<(), ExportError> {
    let Some(t) = crate::read::open(snap.txn(), def)? else { return Ok(()) };
    for item in t.iter().map_err(|e| ReadError::Storage(e.to_string()))? {
        let (k, v) = item.map_err(|e| ReadError::Storage(e.to_string()))?;
        f(k.value(), v.value())?;
    }
    Ok(())
}

fn row<T: serde::de::DeserializeOwned>(
    table: &'static str,
    key: &dyn std::fmt::Display,
    bytes: &[u8],
) -> Result<T, ExportError> {
    rows::decode(table, key, bytes).map_err(|c| ExportError::Read(c.into()))
}

/// The embedded engine's records, table by table in key order.
pub(crate) fn records(
    snap: &RedbSnapshot,
    with_sessions: bool,
    put: &mut dyn FnMut(Record) -> Result<(), ExportError>,
) -> Result<(), ExportError> {
    // Objects and worlds in ref order, as every engine streams them.
    snap.each_place(PLACE_OBJECT, |hash, seq| {
        let meta = snap.object_row(seq)?.map(ObjectRow::meta).ok_or_else(|| {
            ReadError::Corrupt(rows::Corruption {
                table: "object_rows",
                key: hash.to_string(),
                detail: format!("object {seq} has no row"),
            })
        })?;
        let payload = snap.payload(&hash)?.ok_or_else(|| {
            ReadError::Corrupt(rows::Corruption {
                table: "payloads",
                key: hash.to_string(),
                detail: "object has no payload".into(),
            })
        })?;
        put(Record::Object { hash, meta, payload })
    })?;
    each(snap, LOG, |k, v| put(Record::Entry(row("log", &k, v)?)))?;
    snap.each_place(PLACE_WORLD, |r, revision| {
        let world = snap.world_row(revision)?.ok_or_else(|| {
            ReadError::Corrupt(rows::Corruption {
                table: "world_rows",
                key: r.to_string(),
                detail: format!("world {revision} has no row"),
            })
        })?;
        put(Record::World(world))
    })?;
    each(snap, HEADS, |k, v| put(Record::Head { name: k.to_string(), head: Ref(v) }))?;
    each(snap, REGISTRY_ENTRIES, |k, v| {
        put(Record::RegistryEntry { registry: k.0.to_string(), id: k.1.to_string(), transition_fn: Ref(v) })
    })?;
    each(snap, INTENTS, |k, v| {
        let intent = row("intents", &format!("{}#{}", k.0, k.1), v)?;
        put(Record::Intent { invocation_id: k.0.to_string(), ordinal: k.1, intent })
    })?;
    each(snap, OUTCOMES, |k, v| {
        let outcome = row("outcomes", &format!("{}#{}", k.0, k.1), v)?;
        put(Record::Outcome { invocation_id: k.0.to_string(), ordinal: k.1, outcome })
    })?;
    each(snap, SPEND, |k, v| {
        put(Record::Spend { episode: k.0.to_string(), effect: k.1.to_string(), scope: k.2.to_string(), units: v })
    })?;
    // Tasks in their episodes' call order, which the import numbers them by.
    each(snap, EPISODE_CALLS, |k, v| {
        let Some(surface) = Surface::parse(v.0) else { return Ok(()) };
        let key = TaskKey { surface, episode: k.0.to_string(), task_id: v.1.to_string() };
        let task = snap.task(&key)?.ok_or_else(|| {
            ReadError::Corrupt(rows::Corruption {
                table: "episode_calls",
                key: format!("{} {}", k.0, k.1),
                detail: "names a task that has no row".into(),
            })
        })?;
        put(Record::Task { key, task })
    })?;
    each(snap, RECEIPTS, |k, v| put(Record::Receipt { id: k.to_string(), receipt: row("receipts", &k, v)? }))?;
    each(snap, APPROVALS, |k, v| put(Record::Approval { id: k.to_string(), approval: row("approvals", &k, v)? }))?;
    each(snap, APPROVAL_WAITS, |k, v| {
        put(Record::ApprovalWait { credential_id: Ref(k.0), task_id: k.1.to_string(), approval: v.to_string() })
    })?;
    if with_sessions {
        each(snap, SESSIONS, |k, v| {
            put(Record::Session { credential_id: Ref(k), session: row("sessions", &Ref(k), v)? })
        })?;
    }
    Ok(())
}

/// Rebuilds a store at `target` (which must not exist) from an export stream.
pub fn import(target: &Path, input: &mut impl Read) -> Result<u64, ImportError> {
    // A write-ahead log left beside the path belongs to another store.
    let taken = [target.to_path_buf(), wal_path(target), payloads_path(target)].into_iter().find(|p| p.exists());
    if let Some(taken) = taken {
        return Err(ImportError::Exists(taken));
    }
    let mut tmp = target.as_os_str().to_owned();
    tmp.push(format!(".importing-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let result = import_into(&tmp, input);
    let cleanup = |p: &Path| {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_file(lock_path(p));
        let _ = std::fs::remove_file(payloads_path(p));
    };
    match result {
        Ok(n) => {
            // The payloads first: a database never stands without its payload file.
            std::fs::rename(payloads_path(&tmp), payloads_path(target))
                .map_err(|e| ImportError::Store(format!("rename into {}: {e}", payloads_path(target).display())))?;
            std::fs::rename(&tmp, target)
                .map_err(|e| ImportError::Store(format!("rename into {}: {e}", target.display())))?;
            cleanup(&tmp);
            Ok(n)
        }
        Err(e) => {
            cleanup(&tmp);
            Err(e)
        }
    }
}

fn import_into(tmp: &Path, input: &mut impl Read) -> Result<u64, ImportError> {
    // Made at the store's private mode first: redb creates a file at the umask's.
    crate::media::open_private(tmp, true, true)
        .map_err(|e| ImportError::Store(format!("create {}: {e}", tmp.display())))?;
    // A private file nobody else opens: exclusive mode allows cheap non-durable batches.
    let db = redb::Builder::new()
        .set_concurrency_mode(redb::ConcurrencyMode::ExclusiveWriter)
        .create(tmp)
        .map_err(|e| ImportError::Store(e.to_string()))?;
    let mut batch: Vec<(u64, Record)> = Vec::with_capacity(IMPORT_BATCH);
    let mut failure: Option<ImportError> = None;
    let mut kept = crate::ops::Kept::default();
    let payloads = FileMedia { path: tmp.to_path_buf() }
        .payloads()
        .map_err(|e| ImportError::Store(format!("open the payload file: {e}")))?;
    let payloads = payloads.as_ref();
    let count = read_frames(input, |offset, record| {
        batch.push((offset, record));
        if batch.len() >= IMPORT_BATCH
            && let Err(e) = apply(&db, std::mem::take(&mut batch), &mut kept, payloads)
        {
            failure = Some(e);
            return Err(FrameError { offset, detail: "import stopped".into() });
        }
        Ok(())
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let count = count?;
    apply(&db, batch, &mut kept, payloads)?;
    payloads.sync_data().map_err(|e| ImportError::Store(format!("syncing the payload file: {e}")))?;
    let mut txn = db.begin_write().map_err(|e| ImportError::Store(e.to_string()))?;
    txn.set_durability(redb::Durability::Immediate).map_err(|e| ImportError::Store(e.to_string()))?;
    {
        let mut meta = txn.open_table(META).map_err(|e| ImportError::Store(e.to_string()))?;
        meta.insert("format", STORE_FORMAT).map_err(|e| ImportError::Store(e.to_string()))?;
    }
    txn.commit().map_err(|e| ImportError::Store(e.to_string()))?;
    Ok(count)
}

fn apply(
    db: &redb::Database,
    batch: Vec<(u64, Record)>,
    kept: &mut crate::ops::Kept,
    payloads: &dyn WalIo,
) -> Result<(), ImportError> {
    let store = |e: String| ImportError::Store(e);
    let mut txn = db.begin_write().map_err(|e| store(e.to_string()))?;
    txn.set_durability(redb::Durability::None).map_err(|e| store(e.to_string()))?;
    {
        let mut w = W::open_with(&txn, kept, payloads).map_err(|e| store(e.to_string()))?;
        for (offset, record) in batch {
            ops::import(&mut w, record).map_err(|source| ImportError::Refused { offset, source })?;
        }
        w.finish().map_err(|e| store(e.to_string()))?;
    }
    txn.commit().map_err(|e| store(e.to_string()))
}
