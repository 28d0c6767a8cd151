//! The redb tables. Keys are raw bytes or tuples; values are `rows`-encoded unless noted.

use redb::TableDefinition;

pub use crate::keys::{Key32, PlaceKey, ReferrerKey, SemanticKey};

/// Table `def` as `txn` sees it; `None` where no write ever created it.
pub fn open_existing<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &redb::ReadTransaction,
    def: TableDefinition<K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>, redb::TableError> {
    match txn.open_table(def) {
        Ok(t) => Ok(Some(t)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `"format"` → store format version (u64, raw).
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `meta` key: the last log frame the database contains.
pub const META_WAL_SEQ: &str = "wal_seq";
/// sequence number → the object's row (`model::ObjectRow`: its ref, its
/// metadata and where its payload sits in the payload file, `payloads`);
/// which sequence number a ref has is the place index's (`PLACES`).
pub const OBJECT_ROWS: TableDefinition<u64, &[u8]> = TableDefinition::new("object_rows");
/// Format 7's payloads, sequence number → raw payload bytes; moved into the
/// payload file when such a store is opened.
pub const FORMAT7_PAYLOADS: TableDefinition<u64, &[u8]> = TableDefinition::new("payloads_by_seq");
/// Format 11's sequence number → ref, which object a sequence number is;
/// each ref is moved into its object's row (`ObjectRow::hash`) and the
/// table dropped when such a store is opened.
pub const FORMAT11_OBJECT_SEQ: TableDefinition<u64, Key32> = TableDefinition::new("object_seq");
/// entryIndex → LogEntry; contiguous from 0.
pub const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
/// revision → World (one world per revision: revision = entryIndex); which
/// revision a world ref has is the place index's (`PLACES`).
pub const WORLD_ROWS: TableDefinition<u64, &[u8]> = TableDefinition::new("world_rows");
/// head name → ref (`world/selected` and registry heads).
pub const HEADS: TableDefinition<&str, Key32> = TableDefinition::new("heads");
/// (registry name, transition id) → transitionFn of the current revision.
pub const REGISTRY_ENTRIES: TableDefinition<(&str, &str), Key32> = TableDefinition::new("registry_entries");
/// (invocationId, ordinal) → EffectIntent.
pub const INTENTS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("intents");
/// (invocationId, ordinal) → EffectOutcome; never without its intent.
pub const OUTCOMES: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("outcomes");
/// Intents still waiting for an outcome (what recovery looks at).
pub const OPEN_INTENTS: TableDefinition<(&str, u32), ()> = TableDefinition::new("open_intents");
/// (episode, effect, scope) → units spent (raw u64).
pub const SPEND: TableDefinition<(&str, &str, &str), u64> = TableDefinition::new("spend");
/// (surface, taskId, episode) → Task. The daemon names MCP task ids in
/// rising order, and a writer's batch puts its task rows in key order, once
/// each, at their final size (`ops::redb::W::finish`), so they are appended
/// at the tree's right edge, where redb fills a page before starting the
/// next. Any other insert into a full page (a row keyed by episode first, so
/// at the end of its episode's range mid-tree; a row written at a call's
/// start and rewritten larger at its end; a row behind a later one) splits
/// it into two halves that nothing fills again: 53% full, as format 6 was.
pub const TASKS: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("tasks_by_id");
/// Format 6's task table, keyed (surface, episode, taskId); moved into
/// `TASKS` when such a store is opened.
pub const FORMAT6_TASKS: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("tasks");
/// Tasks still `started` (what recovery looks at).
pub const OPEN_TASKS: TableDefinition<(&str, &str, &str), ()> = TableDefinition::new("open_tasks");
/// credentialId = sha256(token) → Session.
pub const SESSIONS: TableDefinition<Key32, &[u8]> = TableDefinition::new("sessions");
/// (target's place, target's position, referrer kind, position) → (): who
/// names a stored object or log entry. The target is keyed by where it sits
/// (`TARGET_OBJECT` and its sequence number, `TARGET_ENTRY` and its index),
/// not by its hash: most targets are young (a call names what it just wrote)
/// or much named (a transitionFn), so rows land in the rightmost leaves or at
/// the end of their target's range instead of on a random page. Referrer
/// kinds are `REFERRER_*`; the position is the referring object's sequence
/// number, the entry's index or the world's revision.
pub const REFERRERS: TableDefinition<ReferrerKey, ()> = TableDefinition::new("referrers_by_target");
/// (target ref, referrer kind, position) → (): who names a ref the store did
/// not hold when it was named (a reader of a target looks here as well).
pub const REFERRERS_OF_ABSENT: TableDefinition<(Key32, u8, u64), ()> = TableDefinition::new("referrers_of_absent");
/// Format 3's referrer index, keyed by the target's hash; moved into the two
/// tables above when such a store is opened.
pub const REFERRERS_BY_HASH: TableDefinition<(Key32, u8, u64), ()> = TableDefinition::new("referrers_by_position");
/// effect record's sequence number → JournalKey of the outcome that carries
/// it. Keyed by where the record sits, not by its hash: a record is written
/// by the call whose outcome names it, so its row lands in the rightmost leaf.
pub const RECORD_JOURNAL: TableDefinition<u64, &[u8]> = TableDefinition::new("record_journal_by_seq");
/// effect record ref → JournalKey, for a record the store did not hold when
/// an outcome named it (the table every record's row sat in up to format 5).
pub const RECORD_JOURNAL_OF_ABSENT: TableDefinition<Key32, &[u8]> = TableDefinition::new("record_journal");
/// An index kept as a young table and sorted runs merged in tiers
/// (`tiered`): its young table, its run directory (run id → (level,
/// state)), and the prefix of its runs' table names.
pub struct Tiered<K: redb::Key + 'static, V: redb::Value + 'static> {
    /// The index's name where operators see it (`GET /v1/store`, `/metrics`).
    pub name: &'static str,
    pub young: TableDefinition<'static, K, V>,
    pub runs: TableDefinition<'static, u32, (u8, u8)>,
    pub run_prefix: &'static str,
    /// Run id → the Bloom filter of its keys (`bloom`), for an index whose
    /// lookups mostly miss: one per run that is not being built.
    pub filters: Option<TableDefinition<'static, u32, &'static [u8]>>,
    /// `meta` key: a number every transaction that may change the run
    /// directory or the filters raises, so that a writer can keep them
    /// across transactions and know when to read them again (`tiered::Filters`).
    pub runs_version: &'static str,
}

/// The place index: (ref, place kind) → position, where a stored object (its
/// seq), log entry (its index) or world (its revision) sits, found by ref.
/// It places the rows before the referrer mark (`referrers::Indexed`);
/// those past it are placed from their own rows (`ops::redb::Unplaced`).
pub const PLACES: Tiered<PlaceKey, u64> = Tiered {
    name: "places",
    young: TableDefinition::new("places_young"),
    runs: TableDefinition::new("place_runs"),
    run_prefix: "places_run_",
    filters: Some(TableDefinition::new("place_filters")),
    runs_version: "place_runs_version",
};
/// The place of an object: its sequence number.
pub const PLACE_OBJECT: u8 = 1;
/// The place of a log entry: its index.
pub const PLACE_ENTRY: u8 = 2;
/// The place of a world: its revision.
pub const PLACE_WORLD: u8 = 3;

/// The semantic index's key of the object `r` whose semanticId is `semantic_id`.
pub fn semantic_key(semantic_id: &str, r: &crate::refs::Ref) -> SemanticKey {
    SemanticKey(crate::refs::Ref::of(semantic_id.as_bytes()).0, r.0)
}
/// The semantic index: (sha256 of a semanticId, ref) → the object's seq,
/// each semantic id's objects in ascending ref order (REST pages them so).
pub const SEMANTIC: Tiered<SemanticKey, u64> = Tiered {
    name: "semantic",
    young: TableDefinition::new("semantic_young"),
    runs: TableDefinition::new("semantic_runs"),
    run_prefix: "semantic_run_",
    filters: None,
    runs_version: "semantic_runs_version",
};

/// Format 4's tables keyed by ref, moved into `OBJECT_ROWS`, `WORLD_ROWS`
/// and the place index (`PLACES`) when such a store is opened: ref →
/// ObjectRow, world ref → World, revision → world ref, entryHash → entryIndex.
pub const FORMAT4_OBJECTS: TableDefinition<Key32, &[u8]> = TableDefinition::new("objects");
pub const FORMAT4_WORLDS: TableDefinition<Key32, &[u8]> = TableDefinition::new("worlds");
pub const FORMAT4_WORLD_BY_REVISION: TableDefinition<u64, Key32> = TableDefinition::new("world_by_revision");
pub const FORMAT4_ENTRY_BY_HASH: TableDefinition<Key32, u64> = TableDefinition::new("entry_by_hash");
/// Format 4's semantic index, (semanticId, ref) → (), moved into `SEMANTIC`.
pub const FORMAT4_BY_SEMANTIC_ID: TableDefinition<(&str, Key32), ()> = TableDefinition::new("by_semantic_id");
/// episode → EpisodeRow: what the episode did, kept by the writes that
/// start and end its calls.
pub const EPISODES: TableDefinition<&str, &[u8]> = TableDefinition::new("episodes");
/// (episode, position) → (surface, taskId): an episode's calls in the order
/// their tasks were created, contiguous from 0.
pub const EPISODE_CALLS: TableDefinition<(&str, u64), (&str, &str)> = TableDefinition::new("episode_calls");
/// (last activity, episode) → (): episodes by their last activity.
pub const EPISODES_BY_ACTIVITY: TableDefinition<(u64, &str), ()> = TableDefinition::new("episodes_by_activity");
/// (episode, credentialId) → (): an episode's sessions.
pub const EPISODE_SESSIONS: TableDefinition<(&str, Key32), ()> = TableDefinition::new("episode_sessions");
/// approval id → ApprovalRow.
pub const APPROVALS: TableDefinition<&str, &[u8]> = TableDefinition::new("approvals");
/// (credentialId, request digest) → approval id: the open approval of one
/// session's exact request (pending, or approved and not used up).
pub const OPEN_APPROVALS: TableDefinition<(Key32, Key32), &str> = TableDefinition::new("open_approvals");
/// (credentialId, A2A task id) → approval id: the approval each A2A task
/// of a session last waited on (asked it, or found it open), written in the
/// wait's transaction and kept as long as approval rows are (always), so a
/// task that waited is found by its own id however its approval ended.
pub const APPROVAL_WAITS: TableDefinition<(Key32, &str), &str> = TableDefinition::new("approval_waits");
/// secret name → its bytes (raw): the key that seals approval questions.
pub const SECRETS: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets");
/// `rest:<id>` → Receipt.
pub const RECEIPTS: TableDefinition<&str, &[u8]> = TableDefinition::new("receipts");

/// Name of the head that holds the selected world.
pub const SELECTED_HEAD: &str = "world/selected";
/// The store format this binary writes and reads.
pub const STORE_FORMAT: u64 = 12;
/// The format before the episode index, upgraded in place at open.
pub const STORE_FORMAT_BEFORE_EPISODES: u64 = 2;
/// The format whose referrer index was keyed by target hash, upgraded in place at open.
pub const STORE_FORMAT_BEFORE_TARGET_PLACES: u64 = 3;

/// The format whose objects, worlds and entries were keyed by ref, upgraded in place at open.
pub const STORE_FORMAT_BEFORE_PLACES: u64 = 4;

/// The format whose record journal was keyed by the record's hash and whose
/// place runs had no filters, upgraded in place at open.
pub const STORE_FORMAT_BEFORE_RECORD_PLACES: u64 = 5;

/// The format whose task rows were keyed by episode before task id,
/// upgraded in place at open.
pub const STORE_FORMAT_BEFORE_TASKS_BY_ID: u64 = 6;

/// The format whose payloads were rows of the database, upgraded in place at open.
pub const STORE_FORMAT_BEFORE_PAYLOAD_FILE: u64 = 7;

/// The format that wrote every referrer row in the transaction of its
/// referrer (`referrers`), upgraded in place at open.
pub const STORE_FORMAT_BEFORE_REFERRERS_BEHIND: u64 = 8;

/// The format that wrote an object's semantic row in the object's own
/// transaction (format 10 writes it with the object's referrer rows); its
/// stores need no change: a row written twice is read once.
pub const STORE_FORMAT_BEFORE_SEMANTIC_BEHIND: u64 = 9;

/// The format that wrote each object's, entry's and world's place in the
/// transaction of its row (format 11 writes it with the row's referrer rows,
/// under the same mark); its stores need no change: a place written twice
/// is read once. A binary of format 10 would miss the places past the mark.
pub const STORE_FORMAT_BEFORE_PLACES_BEHIND: u64 = 10;

/// The format that kept each object's ref in a table of its own
/// (`FORMAT11_OBJECT_SEQ`), one more row a stored object; upgraded in place
/// at open.
pub const STORE_FORMAT_BEFORE_OBJECT_HASHES: u64 = 11;

/// Whether a store of format `found` is upgraded in place when a writer opens it.
pub fn upgradable(found: u64) -> bool {
    (STORE_FORMAT_BEFORE_EPISODES..STORE_FORMAT).contains(&found)
}

/// A referrer row's target is a stored object, at its sequence number (its place).
pub const TARGET_OBJECT: u8 = PLACE_OBJECT;
/// A referrer row's target is a log entry, at its index (its place).
pub const TARGET_ENTRY: u8 = PLACE_ENTRY;

/// An object whose payload names the target ref.
pub const REFERRER_OBJECT: u8 = 1;
/// A log entry whose transitionRef, transitionFn or interpreter is the target.
pub const REFERRER_ENTRY: u8 = 2;
/// A world whose stateRoot or logHead is the target.
pub const REFERRER_WORLD: u8 = 3;
/// Most refs indexed from one object's payload.
pub const REFS_INDEXED_PER_OBJECT_MAX: usize = 4096;
