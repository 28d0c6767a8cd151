//! The schema, created and upgraded by versioned migrations shipped in the
//! binary (the readable SQL lives in `store/migrations/`). A database whose
//! schema is newer than this binary is refused.

use postgres::Client;

/// Every migration, in order; version N is the Nth.
const MIGRATIONS: &[(&str, &str)] = &[("0001_world", include_str!("../../migrations/0001_world.sql"))];

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
