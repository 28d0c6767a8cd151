//! The export stream: a portable, append-only file of framed CBOR records.
//!
//! `MAGIC`, then frames of `[u32 LE body length][blake3(body), 32 bytes][body]`
//! where the body is one CBOR `Record`. The first record is a `Header`, the
//! last an `End` carrying the record count, so a truncated stream is told from
//! a complete one. An export is taken from one snapshot, so it is consistent
//! even beside a live writer. Import rebuilds every derived row (indexes, open
//! sets) and writes into a temporary file renamed into place only when the
//! whole stream checked out: nothing half-imported ever remains.

use crate::error::{ReadError, WriteError};
use crate::model::*;
use crate::postgres::PgSnapshot;
use crate::read::RedbSnapshot;
use crate::refs::Ref;
use crate::tables::*;
use crate::view::{Snapshot, View};
use redb::{ReadableTable, TableDefinition, TableError};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"WORLDEX1";
pub const EXPORT_FORMAT: u64 = 1;
/// Largest frame body (an object payload plus its metadata).
pub const FRAME_BODY_MAX: usize = crate::ops::OBJECT_PAYLOAD_MAX + (1 << 20);
/// Records applied per import transaction.
pub const IMPORT_BATCH: usize = 4096;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Record {
    Header {
        format: u64,
        created_at: u64,
        with_sessions: bool,
    },
    Object {
        hash: Ref,
        meta: ObjectMeta,
        #[serde(with = "crate::model::serde_bytes_vec")]
        payload: Vec<u8>,
    },
    Entry(LogEntry),
    World(World),
    Head {
        name: String,
        head: Ref,
    },
    RegistryEntry {
        registry: String,
        id: String,
        transition_fn: Ref,
    },
    Intent {
        invocation_id: String,
        ordinal: u32,
        intent: EffectIntent,
    },
    Outcome {
        invocation_id: String,
        ordinal: u32,
        outcome: EffectOutcome,
    },
    Spend {
        episode: String,
        effect: String,
        scope: String,
        units: u64,
    },
    Task {
        key: TaskKey,
        task: Task,
    },
    Receipt {
        id: String,
        receipt: Receipt,
    },
    Session {
        credential_id: Ref,
        session: Session,
    },
    End {
        records: u64,
    },
}

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

fn each<K: redb::Key + 'static, V: redb::Value + 'static>(
    snap: &RedbSnapshot,
    def: TableDefinition<K, V>,
    mut f: impl FnMut(K::SelfType<'_>, V::SelfType<'_>) -> Result<(), ExportError>,
) -> Result<(), ExportError> {
    let t = match snap.txn().open_table(def) {
        Ok(t) => t,
        Err(TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(e) => return Err(ReadError::Storage(e.to_string()).into()),
    };
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
    crate::rows::decode(table, key, bytes).map_err(|c| ExportError::Read(c.into()))
}

/// The embedded engine's records, table by table in key order.
fn redb_records(
    snap: &RedbSnapshot,
    with_sessions: bool,
    put: &mut dyn FnMut(Record) -> Result<(), ExportError>,
) -> Result<(), ExportError> {
    each(snap, OBJECTS, |k, v| {
        let hash = Ref(k);
        let meta: ObjectMeta = row("objects", &hash, v)?;
        let payload = snap.payload(&hash)?.ok_or_else(|| {
            ReadError::Corrupt(crate::rows::Corruption {
                table: "payloads",
                key: hash.to_string(),
                detail: "object has no payload".into(),
            })
        })?;
        put(Record::Object { hash, meta, payload })
    })?;
    each(snap, LOG, |k, v| put(Record::Entry(row("log", &k, v)?)))?;
    each(snap, WORLDS, |k, v| put(Record::World(row("worlds", &Ref(k), v)?)))?;
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
    each(snap, TASKS, |k, v| {
        let Some(surface) = Surface::parse(k.0) else { return Ok(()) };
        let key = TaskKey { surface, episode: k.1.to_string(), task_id: k.2.to_string() };
        let task = row("tasks", &key.invocation_id(), v)?;
        put(Record::Task { key, task })
    })?;
    each(snap, RECEIPTS, |k, v| put(Record::Receipt { id: k.to_string(), receipt: row("receipts", &k, v)? }))?;
    if with_sessions {
        each(snap, SESSIONS, |k, v| {
            put(Record::Session { credential_id: Ref(k), session: row("sessions", &Ref(k), v)? })
        })?;
    }
    Ok(())
}

/// Writes the whole snapshot; returns the number of records. Both engines
/// write the same records in the same order.
pub fn export(snap: &Snapshot, out: &mut impl Write, with_sessions: bool, now: u64) -> Result<u64, ExportError> {
    let engine = snap.as_any();
    if let Some(snap) = engine.downcast_ref::<RedbSnapshot>() {
        write_stream(out, with_sessions, now, |put| redb_records(snap, with_sessions, put))
    } else if let Some(snap) = engine.downcast_ref::<PgSnapshot>() {
        write_stream(out, with_sessions, now, |put| snap.records(with_sessions, put))
    } else {
        Err(ReadError::Storage("the snapshot is of no engine the export knows".into()).into())
    }
}

/// A whole stream: `MAGIC`, the Header, what `scan` puts, the End. Returns
/// the number of records.
pub(crate) fn write_stream(
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

/// Rebuilds a store at `target` (which must not exist) from an export stream.
pub fn import(target: &Path, input: &mut impl Read) -> Result<u64, ImportError> {
    // A write-ahead log left beside the path belongs to another store.
    if let Some(taken) = [target.to_path_buf(), crate::media::wal_path(target)].into_iter().find(|p| p.exists()) {
        return Err(ImportError::Exists(taken));
    }
    let mut tmp = target.as_os_str().to_owned();
    tmp.push(format!(".importing-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let result = import_into(&tmp, input);
    let cleanup = |p: &Path| {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_file(crate::media::lock_path(p));
    };
    match result {
        Ok(n) => {
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
    // A private file nobody else opens: exclusive mode allows cheap non-durable batches.
    let db = redb::Builder::new()
        .set_concurrency_mode(redb::ConcurrencyMode::ExclusiveWriter)
        .create(tmp)
        .map_err(|e| ImportError::Store(e.to_string()))?;
    let mut batch: Vec<(u64, Record)> = Vec::with_capacity(IMPORT_BATCH);
    let mut failure: Option<ImportError> = None;
    let count = read_frames(input, |offset, record| {
        batch.push((offset, record));
        if batch.len() >= IMPORT_BATCH
            && let Err(e) = apply(&db, std::mem::take(&mut batch))
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
    apply(&db, batch)?;
    let mut txn = db.begin_write().map_err(|e| ImportError::Store(e.to_string()))?;
    txn.set_durability(redb::Durability::Immediate).map_err(|e| ImportError::Store(e.to_string()))?;
    {
        let mut meta = txn.open_table(META).map_err(|e| ImportError::Store(e.to_string()))?;
        meta.insert("format", STORE_FORMAT).map_err(|e| ImportError::Store(e.to_string()))?;
    }
    txn.commit().map_err(|e| ImportError::Store(e.to_string()))?;
    Ok(count)
}

fn apply(db: &redb::Database, batch: Vec<(u64, Record)>) -> Result<(), ImportError> {
    let store = |e: String| ImportError::Store(e);
    let mut txn = db.begin_write().map_err(|e| store(e.to_string()))?;
    txn.set_durability(redb::Durability::None).map_err(|e| store(e.to_string()))?;
    {
        let mut w = crate::ops::W::open(&txn).map_err(|e| store(e.to_string()))?;
        for (offset, record) in batch {
            crate::ops::import(&mut w, record).map_err(|source| ImportError::Refused { offset, source })?;
        }
        w.finish().map_err(|e| store(e.to_string()))?;
    }
    txn.commit().map_err(|e| store(e.to_string()))
}

/// Whether `path` starts like an export stream.
pub fn is_export(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == MAGIC
}
