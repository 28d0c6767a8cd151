//! The redb tables. Keys are raw bytes or tuples; values are `rows`-encoded unless noted.

use redb::TableDefinition;

pub type Key32 = [u8; 32];

/// `"format"` → store format version (u64, raw).
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// ref → ObjectMeta, with the object's sequence number (`rows::ObjectRow`).
pub const OBJECTS: TableDefinition<Key32, &[u8]> = TableDefinition::new("objects");
/// sequence number → raw payload bytes (exactly one per object). Objects are
/// numbered in the order they are first written, so a batch's payloads are
/// appended together instead of landing on random pages.
pub const PAYLOADS: TableDefinition<u64, &[u8]> = TableDefinition::new("payloads_by_seq");
/// sequence number → ref: which object a sequence number is.
pub const OBJECT_SEQ: TableDefinition<u64, Key32> = TableDefinition::new("object_seq");
/// (semanticId, ref) → (): ascending-hash paging per semantic id.
pub const BY_SEMANTIC_ID: TableDefinition<(&str, Key32), ()> = TableDefinition::new("by_semantic_id");
/// entryIndex → LogEntry; contiguous from 0.
pub const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
/// world ref → World.
pub const WORLDS: TableDefinition<Key32, &[u8]> = TableDefinition::new("worlds");
/// revision → world ref (one world per revision: revision = entryIndex).
pub const WORLD_BY_REVISION: TableDefinition<u64, Key32> = TableDefinition::new("world_by_revision");
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
/// (surface, episode, taskId) → Task.
pub const TASKS: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("tasks");
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
pub const REFERRERS: TableDefinition<(u8, u64, u8, u64), ()> = TableDefinition::new("referrers_by_target");
/// (target ref, referrer kind, position) → (): who names a ref the store did
/// not hold when it was named (a reader of a target looks here as well).
pub const REFERRERS_OF_ABSENT: TableDefinition<(Key32, u8, u64), ()> = TableDefinition::new("referrers_of_absent");
/// Format 3's referrer index, keyed by the target's hash; moved into the two
/// tables above when such a store is opened.
pub const REFERRERS_BY_HASH: TableDefinition<(Key32, u8, u64), ()> = TableDefinition::new("referrers_by_position");
/// effect record ref → JournalKey of the outcome that carries it.
pub const RECORD_JOURNAL: TableDefinition<Key32, &[u8]> = TableDefinition::new("record_journal");
/// entryHash → entryIndex.
pub const ENTRY_BY_HASH: TableDefinition<Key32, u64> = TableDefinition::new("entry_by_hash");
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
/// secret name → its bytes (raw): the key that seals approval questions.
pub const SECRETS: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets");
/// `rest:<id>` → Receipt.
pub const RECEIPTS: TableDefinition<&str, &[u8]> = TableDefinition::new("receipts");

/// Name of the head that holds the selected world.
pub const SELECTED_HEAD: &str = "world/selected";
/// The store format this binary writes and reads.
pub const STORE_FORMAT: u64 = 4;
/// The format before the episode index, upgraded in place at open.
pub const STORE_FORMAT_BEFORE_EPISODES: u64 = 2;
/// The format whose referrer index was keyed by target hash, upgraded in place at open.
pub const STORE_FORMAT_BEFORE_TARGET_PLACES: u64 = 3;

/// Whether a store of format `found` is upgraded in place when a writer opens it.
pub fn upgradable(found: u64) -> bool {
    found == STORE_FORMAT_BEFORE_EPISODES || found == STORE_FORMAT_BEFORE_TARGET_PLACES
}

/// A referrer row's target is a stored object, at its sequence number.
pub const TARGET_OBJECT: u8 = 1;
/// A referrer row's target is a log entry, at its index.
pub const TARGET_ENTRY: u8 = 2;

/// An object whose payload names the target ref.
pub const REFERRER_OBJECT: u8 = 1;
/// A log entry whose transitionRef, transitionFn or interpreter is the target.
pub const REFERRER_ENTRY: u8 = 2;
/// A world whose stateRoot or logHead is the target.
pub const REFERRER_WORLD: u8 = 3;
/// Most refs indexed from one object's payload.
pub const REFS_INDEXED_PER_OBJECT_MAX: usize = 4096;
