//! The schema, created and upgraded by versioned migrations shipped in the
//! binary (the readable SQL lives in `store/migrations/`). A database whose
//! schema is newer than this binary is refused.

use postgres::Client;

/// Every migration, in order; version N is the Nth.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_world", include_str!("../../migrations/0001_world.sql")),
    ("0002_episodes", include_str!("../../migrations/0002_episodes.sql")),
    ("0003_approvals", include_str!("../../migrations/0003_approvals.sql")),
    ("0004_approval_waits", include_str!("../../migrations/0004_approval_waits.sql")),
];

/// The schema version this binary writes and reads.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Serialises schema changes between nodes starting at once.
const MIGRATION_LOCK: i64 = 0x776f_726c_6400_0001;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("the database's schema is version {found}, newer than this binary's {SCHEMA_VERSION}; upgrade worldd")]
    Newer { found: i32 },
    #[error("the database has no World schema; run `worldd store init --store URL` first")]
    Missing,
    #[error(
        "the database's schema is version {found}, older than this binary's {SCHEMA_VERSION}; run `worldd store init --store URL` to upgrade it"
    )]
    Older { found: i32 },
    #[error("{0}")]
    Database(#[from] postgres::Error),
}

/// What `init` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migrated {
    pub from: i32,
    pub to: i32,
}

/// Creates or upgrades the schema to `SCHEMA_VERSION`, in one transaction.
pub fn init(client: &mut Client) -> Result<Migrated, SchemaError> {
    let mut txn = client.transaction()?;
    txn.query("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS world_schema (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )?;
    let from: i32 = txn.query_one("SELECT coalesce(max(version), 0) FROM world_schema", &[])?.get(0);
    if from > SCHEMA_VERSION {
        return Err(SchemaError::Newer { found: from });
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        txn.batch_execute(sql)?;
        txn.execute("INSERT INTO world_schema (version, name) VALUES ($1, $2)", &[&(i as i32 + 1), name])?;
    }
    if (1..2).contains(&from) {
        index_episodes(&mut txn)?;
    }
    txn.commit()?;
    Ok(Migrated { from, to: SCHEMA_VERSION })
}

/// Checks that the schema is the one this binary knows.
pub fn check(client: &mut Client) -> Result<(), SchemaError> {
    let exists: bool = client.query_one("SELECT to_regclass('world_schema') IS NOT NULL", &[])?.get(0);
    if !exists {
        return Err(SchemaError::Missing);
    }
    let found: i32 = client.query_one("SELECT coalesce(max(version), 0) FROM world_schema", &[])?.get(0);
    match found {
        0 => Err(SchemaError::Missing),
        f if f > SCHEMA_VERSION => Err(SchemaError::Newer { found: f }),
        f if f < SCHEMA_VERSION => Err(SchemaError::Older { found: f }),
        _ => Ok(()),
    }
}

/// Fills the episode index of a store written before it was kept: each
/// episode's calls numbered by start time, its summary summed from them, and
/// each session's episode. Rows that do not decode are left for `verify`.
fn index_episodes(txn: &mut postgres::Transaction<'_>) -> Result<(), SchemaError> {
    use crate::model::{Session, Surface, Task, TaskKey, TaskState};
    let mut tasks: Vec<(TaskKey, Task)> = vec![];
    for r in txn.query("SELECT surface, episode, task_id, task FROM tasks", &[])? {
        let (surface, episode, task_id): (String, String, String) = (r.get(0), r.get(1), r.get(2));
        let (Some(surface), Ok(task)) =
            (Surface::parse(&surface), crate::rows::decode::<Task>("tasks", &task_id, r.get(3)))
        else {
            continue;
        };
        tasks.push((TaskKey { surface, episode, task_id }, task));
    }
    tasks.sort_by(crate::model::call_order);
    // A call that ended before tasks told their effects: its journal's.
    let mut journal: std::collections::HashMap<String, Vec<crate::model::JournalItem>> = Default::default();
    for r in txn.query(
        "SELECT i.invocation_id, i.ordinal, i.intent, o.outcome FROM intents i
         LEFT JOIN outcomes o ON o.invocation_id = i.invocation_id AND o.ordinal = i.ordinal
         ORDER BY i.invocation_id, i.ordinal",
        &[],
    )? {
        let inv: String = r.get(0);
        let ordinal = r.get::<_, i32>(1) as u32;
        let Ok(intent) = crate::rows::decode("intents", &inv, r.get(2)) else { continue };
        let outcome = r.get::<_, Option<&[u8]>>(3).and_then(|b| crate::rows::decode("outcomes", &inv, b).ok());
        journal.entry(inv).or_default().push(crate::model::JournalItem { ordinal, intent, outcome });
    }
    for (key, task) in tasks.iter_mut().filter(|(_, t)| t.state != TaskState::Started && t.effects.is_empty()) {
        let Some(items) = journal.get(&key.invocation_id()) else { continue };
        task.effects = items.iter().map(crate::model::CallEffect::journaled).collect();
        txn.execute(
            "UPDATE tasks SET task = $4 WHERE surface = $1 AND episode = $2 AND task_id = $3",
            &[&key.surface.as_str(), &key.episode, &key.task_id, &crate::rows::encode(&*task)],
        )?;
    }
    for calls in tasks.chunk_by(|a, b| a.0.episode == b.0.episode) {
        let episode = &calls[0].0.episode;
        for (seq, (key, _)) in calls.iter().enumerate() {
            txn.execute(
                "UPDATE tasks SET seq = $4 WHERE surface = $1 AND episode = $2 AND task_id = $3",
                &[&key.surface.as_str(), &key.episode, &key.task_id, &(seq as i64)],
            )?;
        }
        let row = crate::model::summarize_calls(calls.iter().map(|(_, t)| t));
        txn.execute(
            "INSERT INTO episodes (episode, last_at, summary) VALUES ($1, $2, $3)",
            &[episode, &(row.last_at as i64), &crate::rows::encode(&row)],
        )?;
    }
    for r in txn.query("SELECT credential_id, session FROM sessions", &[])? {
        let id: Vec<u8> = r.get(0);
        if let Ok(s) = crate::rows::decode::<Session>("sessions", &"", r.get(1)) {
            txn.execute("UPDATE sessions SET episode = $2 WHERE credential_id = $1", &[&id, &s.episode])?;
        }
    }
    Ok(())
}
