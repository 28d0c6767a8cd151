-- World on PostgreSQL, schema version 1.
--
-- One world: the hash-chained log, its worlds and heads, the objects they
-- name, the effect journal and ledger, tasks, sessions and receipts, shared by
-- every worldd node that runs on this database. Columns that hold a domain
-- value (a log entry, a world, a task, ...) hold the store's row encoding of
-- it (a version byte, then CBOR): the same bytes the embedded engine keeps,
-- decoded by the same code. Keys are plain columns.

-- Immutable, content-addressed objects; seq orders them by first write.
CREATE TABLE objects (
    hash           bytea PRIMARY KEY CHECK (length(hash) = 32),
    seq            bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    interface_hash bytea NOT NULL,
    semantic_id    text NOT NULL,
    provenance     text NOT NULL,
    size           bigint NOT NULL,
    payload        bytea NOT NULL
);
CREATE INDEX objects_by_semantic_id ON objects (semantic_id, hash);

-- Who names an object: kind 1 an object (position: its seq), 2 a log entry
-- (its index), 3 a world (its revision).
CREATE TABLE referrers (
    target   bytea NOT NULL,
    kind     smallint NOT NULL,
    position bigint NOT NULL,
    PRIMARY KEY (target, kind, position)
);

-- The append-only log, contiguous from 0. log_id leaves room for several
-- chains later; today there is one, 0.
CREATE TABLE log (
    log_id      smallint NOT NULL DEFAULT 0,
    entry_index bigint NOT NULL,
    entry_hash  bytea NOT NULL UNIQUE,
    entry       bytea NOT NULL,
    PRIMARY KEY (log_id, entry_index)
);

CREATE TABLE worlds (
    world_ref bytea PRIMARY KEY,
    revision  bigint NOT NULL UNIQUE,
    world     bytea NOT NULL
);

-- world/selected and the registry heads. A batch that appends to the log
-- locks the world/selected row: that lock orders appends across nodes.
CREATE TABLE heads (
    name text PRIMARY KEY,
    ref  bytea NOT NULL
);

CREATE TABLE registry_entries (
    registry      text NOT NULL,
    transition_id text NOT NULL,
    transition_fn bytea NOT NULL,
    PRIMARY KEY (registry, transition_id)
);

-- The nodes serving this world. A node renews its lease with every write
-- batch and while idle; once a lease has lapsed, any node resolves the
-- node's calls still in flight, and the node itself may write no more.
CREATE TABLE nodes (
    node_id     text PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    lease_until timestamptz NOT NULL
);

-- Task ids, unique per (surface, episode): the key that makes a task run once
-- across nodes. node is the node that started it.
CREATE TABLE tasks (
    surface  text NOT NULL,
    episode  text NOT NULL,
    task_id  text NOT NULL,
    state    text NOT NULL,
    node     text NOT NULL,
    task     bytea NOT NULL,
    PRIMARY KEY (surface, episode, task_id)
);
CREATE INDEX tasks_started ON tasks (node) WHERE state = 'started';

CREATE TABLE intents (
    invocation_id text NOT NULL,
    ordinal       integer NOT NULL,
    intent        bytea NOT NULL,
    PRIMARY KEY (invocation_id, ordinal)
);

CREATE TABLE outcomes (
    invocation_id text NOT NULL,
    ordinal       integer NOT NULL,
    outcome       bytea NOT NULL,
    PRIMARY KEY (invocation_id, ordinal),
    FOREIGN KEY (invocation_id, ordinal) REFERENCES intents
);

-- Which outcome carries an effect record.
CREATE TABLE record_journal (
    record        bytea PRIMARY KEY,
    invocation_id text NOT NULL,
    ordinal       integer NOT NULL
);

-- Units spent per (episode, effect, scope); a debit updates it in the
-- transaction that journals the intent.
CREATE TABLE spend (
    episode text NOT NULL,
    effect  text NOT NULL,
    scope   text NOT NULL,
    units   bigint NOT NULL CHECK (units >= 0),
    PRIMARY KEY (episode, effect, scope)
);

-- Keyed by credential id = sha256(token); tokens are never stored.
CREATE TABLE sessions (
    credential_id bytea PRIMARY KEY,
    session       bytea NOT NULL
);

CREATE TABLE receipts (
    id      text PRIMARY KEY,
    receipt bytea NOT NULL
);
