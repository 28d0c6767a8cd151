//! Reads on PostgreSQL: one REPEATABLE READ, read-only transaction on a pooled
//! connection is one snapshot, as consistent as the embedded engine's.

use super::Pooled;
use crate::error::{ReadError, read_storage};
use crate::export::stream::ExportError;
use crate::model::*;
use crate::ops::record::Record;
use crate::read::PAGE_MAX;
use crate::refs::Ref;
use crate::rows;
use crate::verify::derived::Derived;
use crate::view::View;
use postgres::Row;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use std::sync::Mutex;

use super::conn::Param;

pub struct PgSnapshot {
    conn: Mutex<Pooled>,
    /// A snapshot runs in a transaction; a glance reads statement by statement.
    in_transaction: bool,
}

fn decoded<T: serde::de::DeserializeOwned>(
    table: &'static str,
    key: &dyn std::fmt::Display,
    bytes: &[u8],
) -> Result<T, ReadError> {
    Ok(rows::decode(table, key, bytes)?)
}

fn ref_of(table: &'static str, key: &dyn std::fmt::Display, v: &[u8]) -> Result<Ref, ReadError> {
    <[u8; 32]>::try_from(v)
        .map(Ref)
        .map_err(|_| rows::Corruption { table, key: key.to_string(), detail: format!("a {}-byte ref", v.len()) }.into())
}

/// A position or count as the database holds it (`bigint`); beyond it, nothing is there.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn limit_of(limit: usize) -> i64 {
    limit.min(PAGE_MAX) as i64
}

impl PgSnapshot {
    pub(crate) fn begin(mut conn: Pooled) -> Result<PgSnapshot, ReadError> {
        conn.client().batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").map_err(read_storage)?;
        Ok(PgSnapshot { conn: Mutex::new(conn), in_transaction: true })
    }

    /// Reads without a transaction: each statement sees the latest commit.
    pub(crate) fn glance(conn: Pooled) -> PgSnapshot {
        PgSnapshot { conn: Mutex::new(conn), in_transaction: false }
    }

    fn q(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, ReadError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.query(sql, params).map_err(read_storage)
    }

    fn one<T>(
        &self,
        sql: &str,
        params: &[Param<'_>],
        f: impl FnOnce(&Row) -> Result<T, ReadError>,
    ) -> Result<Option<T>, ReadError> {
        self.q(sql, params)?.first().map(f).transpose()
    }
}

impl Drop for PgSnapshot {
    fn drop(&mut self) {
        if !self.in_transaction {
            return;
        }
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // A connection that cannot end its transaction is closed by the pool.
        let _ = conn.client().batch_execute("ROLLBACK");
    }
}

fn meta(row: &Row, key: &Ref) -> Result<ObjectMeta, ReadError> {
    Ok(ObjectMeta {
        interface_hash: ref_of("objects", key, row.get("interface_hash"))?,
        semantic_id: row.get("semantic_id"),
        provenance: row.get("provenance"),
        size: row.get::<_, i64>("size") as u64,
    })
}

impl View for PgSnapshot {
    fn object_meta(&self, r: &Ref) -> Result<Option<ObjectMeta>, ReadError> {
        self.one(
            "SELECT interface_hash, semantic_id, provenance, size FROM objects WHERE hash = $1",
            &[(&r.0.as_slice(), Type::BYTEA)],
            |row| meta(row, r),
        )
    }

    fn object_seq(&self, r: &Ref) -> Result<Option<u64>, ReadError> {
        self.one("SELECT seq FROM objects WHERE hash = $1", &[(&r.0.as_slice(), Type::BYTEA)], |row| {
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn payload(&self, r: &Ref) -> Result<Option<Vec<u8>>, ReadError> {
        self.one("SELECT payload FROM objects WHERE hash = $1", &[(&r.0.as_slice(), Type::BYTEA)], |row| Ok(row.get(0)))
    }

    fn object_at(&self, seq: u64) -> Result<Option<Ref>, ReadError> {
        self.one("SELECT hash FROM objects WHERE seq = $1", &[(&int(seq), Type::INT8)], |row| {
            ref_of("objects", &seq, row.get(0))
        })
    }

    fn has_object(&self, r: &Ref) -> Result<bool, ReadError> {
        Ok(!self.q("SELECT 1 FROM objects WHERE hash = $1", &[(&r.0.as_slice(), Type::BYTEA)])?.is_empty())
    }

    fn objects_by_semantic_id(
        &self,
        semantic_id: &str,
        after: Option<Ref>,
        limit: usize,
    ) -> Result<Vec<(Ref, ObjectMeta)>, ReadError> {
        let after = after.map(|r| r.0.to_vec()).unwrap_or_default();
        let rows = self.q(
            "SELECT hash, interface_hash, semantic_id, provenance, size FROM objects
             WHERE semantic_id = $1 AND hash > $2 ORDER BY hash LIMIT $3",
            &[(&semantic_id, Type::TEXT), (&after, Type::BYTEA), (&limit_of(limit), Type::INT8)],
        )?;
        rows.iter()
            .map(|row| {
                let r = ref_of("objects", &semantic_id, row.get("hash"))?;
                Ok((r, meta(row, &r)?))
            })
            .collect()
    }

    fn log_entry(&self, index: u64) -> Result<Option<LogEntry>, ReadError> {
        self.one("SELECT entry FROM log WHERE log_id = 0 AND entry_index = $1", &[(&int(index), Type::INT8)], |row| {
            decoded("log", &index, row.get(0))
        })
    }

    fn log_range(&self, from: u64, limit: usize) -> Result<Vec<LogEntry>, ReadError> {
        let rows = self.q(
            "SELECT entry_index, entry FROM log WHERE log_id = 0 AND entry_index >= $1 ORDER BY entry_index LIMIT $2",
            &[(&int(from), Type::INT8), (&limit_of(limit), Type::INT8)],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for (expected, row) in (from..=u64::MAX).zip(&rows) {
            if row.get::<_, i64>(0) as u64 != expected {
                break;
            }
            out.push(decoded("log", &expected, row.get(1))?);
        }
        Ok(out)
    }

    fn log_len(&self) -> Result<u64, ReadError> {
        let last: Option<i64> =
            self.one("SELECT max(entry_index) FROM log WHERE log_id = 0", &[], |row| Ok(row.get(0)))?.flatten();
        Ok(last.map_or(0, |i| i as u64 + 1))
    }

    fn entry_index_of(&self, entry_hash: &Ref) -> Result<Option<u64>, ReadError> {
        self.one(
            "SELECT entry_index FROM log WHERE entry_hash = $1",
            &[(&entry_hash.0.as_slice(), Type::BYTEA)],
            |row| Ok(row.get::<_, i64>(0) as u64),
        )
    }

    fn world(&self, r: &Ref) -> Result<Option<World>, ReadError> {
        self.one("SELECT world FROM worlds WHERE world_ref = $1", &[(&r.0.as_slice(), Type::BYTEA)], |row| {
            decoded("worlds", r, row.get(0))
        })
    }

    fn world_at(&self, revision: u64) -> Result<Option<Ref>, ReadError> {
        self.one("SELECT world_ref FROM worlds WHERE revision = $1", &[(&int(revision), Type::INT8)], |row| {
            ref_of("worlds", &revision, row.get(0))
        })
    }

    fn head(&self, name: &str) -> Result<Option<Ref>, ReadError> {
        self.one("SELECT ref FROM heads WHERE name = $1", &[(&name, Type::TEXT)], |row| {
            ref_of("heads", &name, row.get(0))
        })
    }

    fn heads(&self) -> Result<Vec<(String, Ref)>, ReadError> {
        let rows = self.q("SELECT name, ref FROM heads ORDER BY name COLLATE \"C\"", &[])?;
        rows.iter()
            .map(|row| {
                let name: String = row.get(0);
                let r = ref_of("heads", &name, row.get(1))?;
                Ok((name, r))
            })
            .collect()
    }

    fn registry_entry(&self, registry: &str, id: &str) -> Result<Option<Ref>, ReadError> {
        self.one(
            "SELECT transition_fn FROM registry_entries WHERE registry = $1 AND transition_id = $2",
            &[(&registry, Type::TEXT), (&id, Type::TEXT)],
            |row| ref_of("registry_entries", &id, row.get(0)),
        )
    }

    fn session(&self, credential_id: &Ref) -> Result<Option<Session>, ReadError> {
        self.one(
            "SELECT session FROM sessions WHERE credential_id = $1",
            &[(&credential_id.0.as_slice(), Type::BYTEA)],
            |row| decoded("sessions", credential_id, row.get(0)),
        )
    }

    fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, ReadError> {
        self.one("SELECT approval FROM approvals WHERE id = $1", &[(&id, Type::TEXT)], |row| {
            decoded("approvals", &id, row.get(0))
        })
    }

    fn open_approval(&self, credential: &Ref, digest: &Ref) -> Result<Option<(String, ApprovalRow)>, ReadError> {
        let rows = self.q(
            "SELECT id, approval FROM approvals WHERE credential = $1 AND digest = $2 AND NOT closed",
            &[(&credential.0.as_slice(), Type::BYTEA), (&digest.0.as_slice(), Type::BYTEA)],
        )?;
        Ok(approval_rows(&rows)?.into_iter().next())
    }

    fn open_approvals(&self, limit: usize) -> Result<Vec<(String, ApprovalRow)>, ReadError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.q(
            "SELECT id, approval FROM approvals WHERE NOT closed ORDER BY requested_at, id LIMIT $1",
            &[(&limit, Type::INT8)],
        )?;
        approval_rows(&rows)
    }

    fn awaited_approval(&self, credential: &Ref, task_id: &str) -> Result<Option<(String, ApprovalRow)>, ReadError> {
        let rows = self.q(
            "SELECT w.approval, a.approval FROM approval_waits w LEFT JOIN approvals a ON a.id = w.approval \
             WHERE w.credential = $1 AND w.task_id = $2",
            &[(&credential.0.as_slice(), Type::BYTEA), (&task_id, Type::TEXT)],
        )?;
        let Some(row) = rows.first() else { return Ok(None) };
        let id: String = row.get(0);
        let Some(bytes) = row.get::<_, Option<&[u8]>>(1) else {
            return Err(rows::Corruption {
                table: "approval_waits",
                key: format!("{credential} {task_id}"),
                detail: format!("names approval {id}, which has no row"),
            }
            .into());
        };
        let approval = decoded("approvals", &id, bytes)?;
        Ok(Some((id, approval)))
    }

    fn approvals(&self, after: Option<&str>, limit: usize) -> Result<Vec<(String, ApprovalRow)>, ReadError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.q(
            "SELECT id, approval FROM approvals WHERE id COLLATE \"C\" > $1 ORDER BY id COLLATE \"C\" LIMIT $2",
            &[(&after.unwrap_or(""), Type::TEXT), (&limit, Type::INT8)],
        )?;
        approval_rows(&rows)
    }

    fn sessions(&self, limit: usize) -> Result<Vec<(Ref, Session)>, ReadError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.q(
            "SELECT credential_id, session FROM sessions ORDER BY credential_id LIMIT $1",
            &[(&limit, Type::INT8)],
        )?;
        rows.iter()
            .map(|row| {
                let id = ref_of("sessions", &"credential id", row.get(0))?;
                Ok((id, decoded("sessions", &id, row.get(1))?))
            })
            .collect()
    }

    fn task(&self, key: &TaskKey) -> Result<Option<Task>, ReadError> {
        self.one(
            "SELECT task FROM tasks WHERE surface = $1 AND episode = $2 AND task_id = $3",
            &[
                (&key.surface.as_str(), Type::TEXT),
                (&key.episode.as_str(), Type::TEXT),
                (&key.task_id.as_str(), Type::TEXT),
            ],
            |row| decoded("tasks", &key.invocation_id(), row.get(0)),
        )
    }

    fn receipt(&self, id: &str) -> Result<Option<Receipt>, ReadError> {
        self.one("SELECT receipt FROM receipts WHERE id = $1", &[(&id, Type::TEXT)], |row| {
            decoded("receipts", &id, row.get(0))
        })
    }

    fn spent(&self, episode: &str, effect: &str, scope: &str) -> Result<u64, ReadError> {
        let units = self.one(
            "SELECT units FROM spend WHERE episode = $1 AND effect = $2 AND scope = $3",
            &[(&episode, Type::TEXT), (&effect, Type::TEXT), (&scope, Type::TEXT)],
            |row| Ok(row.get::<_, i64>(0) as u64),
        )?;
        Ok(units.unwrap_or(0))
    }

    fn journal_of(&self, invocation_id: &str) -> Result<Vec<JournalItem>, ReadError> {
        let rows = self.q(super::JOURNAL_OF, &[(&invocation_id, Type::TEXT)])?;
        Ok(super::journal_items(invocation_id, &rows)?)
    }

    fn episode(&self, episode: &str) -> Result<Option<EpisodeRow>, ReadError> {
        self.one("SELECT summary FROM episodes WHERE episode = $1", &[(&episode, Type::TEXT)], |row| {
            decoded("episodes", &episode, row.get(0))
        })
    }

    fn episodes(&self, after: Option<(u64, String)>, limit: usize) -> Result<Vec<(String, EpisodeRow)>, ReadError> {
        let limit = limit.min(PAGE_MAX) as i64;
        let rows = match &after {
            Some((at, ep)) => self.q(
                "SELECT episode, summary FROM episodes WHERE (last_at, episode COLLATE \"C\") < ($1, $2)
                 ORDER BY last_at DESC, episode COLLATE \"C\" DESC LIMIT $3",
                &[(&int(*at), Type::INT8), (&ep.as_str(), Type::TEXT), (&limit, Type::INT8)],
            )?,
            None => self.q(
                "SELECT episode, summary FROM episodes ORDER BY last_at DESC, episode COLLATE \"C\" DESC LIMIT $1",
                &[(&limit, Type::INT8)],
            )?,
        };
        rows.iter()
            .map(|row| {
                let episode: String = row.get(0);
                let summary = decoded("episodes", &episode, row.get(1))?;
                Ok((episode, summary))
            })
            .collect()
    }

    fn episode_calls(&self, episode: &str, from: u64, limit: usize) -> Result<Vec<(u64, TaskKey, Task)>, ReadError> {
        let limit = limit.min(PAGE_MAX) as i64;
        let rows = self.q(
            "SELECT seq, surface, task_id, task FROM tasks WHERE episode = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
            &[(&episode, Type::TEXT), (&int(from), Type::INT8), (&limit, Type::INT8)],
        )?;
        rows.iter()
            .map(|row| {
                let seq = row.get::<_, i64>(0) as u64;
                let surface: &str = row.get(1);
                let surface = Surface::parse(surface).ok_or_else(|| rows::Corruption {
                    table: "tasks",
                    key: format!("{episode} {seq}"),
                    detail: format!("unknown surface {surface:?}"),
                })?;
                let key = TaskKey { surface, episode: episode.to_string(), task_id: row.get(2) };
                let task = decoded("tasks", &key.invocation_id(), row.get(3))?;
                Ok((seq, key, task))
            })
            .collect()
    }

    fn episode_sessions(&self, episode: &str, limit: usize) -> Result<Vec<(Ref, Session)>, ReadError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.q(
            "SELECT credential_id, session FROM sessions WHERE episode = $1 ORDER BY credential_id LIMIT $2",
            &[(&episode, Type::TEXT), (&limit, Type::INT8)],
        )?;
        rows.iter()
            .map(|row| {
                let id = ref_of("sessions", &"credential id", row.get(0))?;
                Ok((id, decoded("sessions", &id, row.get(1))?))
            })
            .collect()
    }

    fn episode_spend(&self, episode: &str) -> Result<Vec<(String, String, u64)>, ReadError> {
        let rows = self.q(
            "SELECT effect, scope, units FROM spend WHERE episode = $1 ORDER BY effect, scope",
            &[(&episode, Type::TEXT)],
        )?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get::<_, i64>(2) as u64)).collect())
    }

    fn record_journal(&self, record: &Ref) -> Result<Option<JournalKey>, ReadError> {
        self.one(
            "SELECT invocation_id, ordinal FROM record_journal WHERE record = $1",
            &[(&record.0.as_slice(), Type::BYTEA)],
            |row| Ok(JournalKey { invocation_id: row.get(0), ordinal: row.get::<_, i32>(1) as u32 }),
        )
    }

    fn referrers(&self, target: &Ref, after: Option<(u8, Ref)>, limit: usize) -> Result<Vec<Referrer>, ReadError> {
        // A cursor that names nothing known resumes after its whole kind.
        let (kind, position) = match after {
            Some((kind, r)) => (kind as i16, self.referrer_position(kind, &r)?.map_or(i64::MAX, int)),
            None => (-1, -1),
        };
        let rows = self.q(
            "SELECT kind, position FROM referrers WHERE target = $1 AND (kind, position) > ($2, $3)
             ORDER BY kind, position LIMIT $4",
            &[
                (&target.0.as_slice(), Type::BYTEA),
                (&kind, Type::INT2),
                (&position, Type::INT8),
                (&limit_of(limit), Type::INT8),
            ],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let (kind, position) = (row.get::<_, i16>(0) as u8, row.get::<_, i64>(1) as u64);
            out.push(self.referrer_of(target, kind, position)?);
        }
        Ok(out)
    }

    fn has_referrer(&self, target: &Ref, kind: u8, referrer: &Ref) -> Result<bool, ReadError> {
        let Some(position) = self.referrer_position(kind, referrer)? else { return Ok(false) };
        let rows = self.q(
            "SELECT 1 FROM referrers WHERE target = $1 AND kind = $2 AND position = $3",
            &[(&target.0.as_slice(), Type::BYTEA), (&(kind as i16), Type::INT2), (&int(position), Type::INT8)],
        )?;
        Ok(!rows.is_empty())
    }
}

/// The export's records of one kind, as a query and how a row becomes a record.
struct Scan {
    sql: &'static str,
    record: fn(&Row) -> Result<Record, ReadError>,
}

/// Every table in the embedded engine's key order (bytes, not the locale's
/// collation), so that both engines export the same records in the same order.
const SCANS: &[Scan] = &[
    Scan {
        sql: "SELECT hash, interface_hash, semantic_id, provenance, size, payload FROM objects ORDER BY hash",
        record: |row| {
            let hash = ref_of("objects", &"export", row.get("hash"))?;
            Ok(Record::Object { hash, meta: meta(row, &hash)?, payload: row.get("payload") })
        },
    },
    Scan {
        sql: "SELECT entry_index, entry FROM log WHERE log_id = 0 ORDER BY entry_index",
        record: |row| Ok(Record::Entry(decoded("log", &row.get::<_, i64>(0), row.get(1))?)),
    },
    Scan {
        sql: "SELECT world_ref, world FROM worlds ORDER BY world_ref",
        record: |row| Ok(Record::World(decoded("worlds", &"export", row.get(1))?)),
    },
    Scan {
        sql: "SELECT name, ref FROM heads ORDER BY name COLLATE \"C\"",
        record: |row| {
            let name: String = row.get(0);
            let head = ref_of("heads", &name, row.get(1))?;
            Ok(Record::Head { name, head })
        },
    },
    Scan {
        sql: "SELECT registry, transition_id, transition_fn FROM registry_entries
              ORDER BY registry COLLATE \"C\", transition_id COLLATE \"C\"",
        record: |row| {
            let id: String = row.get(1);
            let transition_fn = ref_of("registry_entries", &id, row.get(2))?;
            Ok(Record::RegistryEntry { registry: row.get(0), id, transition_fn })
        },
    },
    Scan {
        sql: "SELECT invocation_id, ordinal, intent FROM intents ORDER BY invocation_id COLLATE \"C\", ordinal",
        record: |row| {
            let (invocation_id, ordinal): (String, u32) = (row.get(0), row.get::<_, i32>(1) as u32);
            let intent = decoded("intents", &format!("{invocation_id}#{ordinal}"), row.get(2))?;
            Ok(Record::Intent { invocation_id, ordinal, intent })
        },
    },
    Scan {
        sql: "SELECT invocation_id, ordinal, outcome FROM outcomes ORDER BY invocation_id COLLATE \"C\", ordinal",
        record: |row| {
            let (invocation_id, ordinal): (String, u32) = (row.get(0), row.get::<_, i32>(1) as u32);
            let outcome = decoded("outcomes", &format!("{invocation_id}#{ordinal}"), row.get(2))?;
            Ok(Record::Outcome { invocation_id, ordinal, outcome })
        },
    },
    Scan {
        sql: "SELECT episode, effect, scope, units FROM spend
              ORDER BY episode COLLATE \"C\", effect COLLATE \"C\", scope COLLATE \"C\"",
        record: |row| {
            let units = row.get::<_, i64>(3) as u64;
            Ok(Record::Spend { episode: row.get(0), effect: row.get(1), scope: row.get(2), units })
        },
    },
    Scan {
        // In their episodes' call order, which the import numbers them by.
        sql: "SELECT surface, episode, task_id, task FROM tasks ORDER BY episode COLLATE \"C\", seq",
        record: |row| {
            let surface = Surface::parse(row.get(0)).ok_or_else(|| rows::Corruption {
                table: "tasks",
                key: row.get::<_, String>(0),
                detail: "an unknown surface".into(),
            })?;
            let key = TaskKey { surface, episode: row.get(1), task_id: row.get(2) };
            let task = decoded("tasks", &key.invocation_id(), row.get(3))?;
            Ok(Record::Task { key, task })
        },
    },
    Scan {
        sql: "SELECT id, receipt FROM receipts ORDER BY id COLLATE \"C\"",
        record: |row| {
            let id: String = row.get(0);
            let receipt = decoded("receipts", &id, row.get(1))?;
            Ok(Record::Receipt { id, receipt })
        },
    },
    Scan {
        sql: "SELECT id, approval FROM approvals ORDER BY id COLLATE \"C\"",
        record: |row| {
            let id: String = row.get(0);
            let approval = decoded("approvals", &id, row.get(1))?;
            Ok(Record::Approval { id, approval })
        },
    },
    Scan {
        sql: "SELECT credential, task_id, approval FROM approval_waits ORDER BY credential, task_id COLLATE \"C\"",
        record: |row| {
            let task_id: String = row.get(1);
            let credential_id = ref_of("approval_waits", &task_id, row.get(0))?;
            Ok(Record::ApprovalWait { credential_id, task_id, approval: row.get(2) })
        },
    },
];

const SESSIONS_SCAN: Scan = Scan {
    sql: "SELECT credential_id, session FROM sessions ORDER BY credential_id",
    record: |row| {
        let credential_id = ref_of("sessions", &"export", row.get(0))?;
        Ok(Record::Session { credential_id, session: decoded("sessions", &credential_id, row.get(1))? })
    },
};

impl PgSnapshot {
    /// Every record of the world, streamed in the embedded engine's order.
    pub(crate) fn records(
        &self,
        with_sessions: bool,
        put: &mut dyn FnMut(Record) -> Result<(), ExportError>,
    ) -> Result<(), ExportError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let scans = SCANS.iter().chain(with_sessions.then_some(&SESSIONS_SCAN));
        for scan in scans {
            let no_params: [(&(dyn ToSql + Sync), Type); 0] = [];
            let mut rows = conn.client().query_typed_raw(scan.sql, no_params).map_err(read_storage)?;
            while let Some(row) = rows.next().map_err(read_storage)? {
                put((scan.record)(&row)?)?;
            }
        }
        Ok(())
    }

    /// The derived tables, summed up as `verify::derived` does, each
    /// referrer spelled by the ref at its position. Returns too the rows
    /// naming a position that holds nothing (at most `DANGLING_KEPT_MAX`,
    /// with how many there were).
    pub(crate) fn derived(&self) -> Result<(Derived, Vec<String>, u64), ReadError> {
        const REFERRERS: &str = "SELECT r.target, r.kind, r.position, coalesce(o.hash, l.entry_hash, w.world_ref)
             FROM referrers r
             LEFT JOIN objects o ON r.kind = 1 AND o.seq = r.position
             LEFT JOIN log l ON r.kind = 2 AND l.log_id = 0 AND l.entry_index = r.position
             LEFT JOIN worlds w ON r.kind = 3 AND w.revision = r.position";
        const RECORDS: &str = "SELECT record, invocation_id, ordinal FROM record_journal";
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let no_params: [(&(dyn ToSql + Sync), Type); 0] = [];
        let (mut derived, mut dangling, mut dangling_count) = (Derived::default(), vec![], 0u64);
        let mut rows = conn.client().query_typed_raw(REFERRERS, no_params).map_err(read_storage)?;
        while let Some(row) = rows.next().map_err(read_storage)? {
            let target = ref_of("referrers", &"derived", row.get(0))?;
            let (kind, position) = (row.get::<_, i16>(1), row.get::<_, i64>(2));
            match row.get::<_, Option<&[u8]>>(3) {
                Some(referrer) => {
                    let referrer = ref_of("referrers", &target, referrer)?;
                    derived.referrers.add_referrer(&target, kind as u8, &referrer);
                }
                None => {
                    dangling_count += 1;
                    if dangling.len() < DANGLING_KEPT_MAX {
                        dangling.push(format!("{target} {kind} {position}"));
                    }
                }
            }
        }
        drop(rows);
        let no_params: [(&(dyn ToSql + Sync), Type); 0] = [];
        let mut rows = conn.client().query_typed_raw(RECORDS, no_params).map_err(read_storage)?;
        while let Some(row) = rows.next().map_err(read_storage)? {
            let record = ref_of("record_journal", &"derived", row.get(0))?;
            let key = JournalKey { invocation_id: row.get(1), ordinal: row.get::<_, i32>(2) as u32 };
            derived.record_journal.add_record(&record, &key);
        }
        drop(rows);
        for row in conn.query("SELECT episode, summary FROM episodes", &[]).map_err(read_storage)? {
            derived.episodes.add_episode(row.get(0), row.get(1));
        }
        // A task without a position sums as position -1: not what the copy numbers it.
        for row in
            conn.query("SELECT episode, coalesce(seq, -1), surface, task_id FROM tasks", &[]).map_err(read_storage)?
        {
            derived.episode_calls.add_call(row.get(0), row.get::<_, i64>(1) as u64, row.get(2), row.get(3));
        }
        for row in conn.query("SELECT episode, credential_id FROM sessions", &[]).map_err(read_storage)? {
            let episode: Option<&str> = row.get(0);
            let id = ref_of("sessions", &"derived", row.get(1))?;
            derived.episode_sessions.add_session(episode.unwrap_or(""), &id);
        }
        Ok((derived, dangling, dangling_count))
    }
}

/// The most referrer rows naming nothing that a verify names one by one.
pub(crate) const DANGLING_KEPT_MAX: usize = 100;

fn approval_rows(rows: &[postgres::Row]) -> Result<Vec<(String, ApprovalRow)>, ReadError> {
    rows.iter()
        .map(|row| {
            let id: String = row.get(0);
            let approval = decoded("approvals", &id, row.get(1))?;
            Ok((id, approval))
        })
        .collect()
}
