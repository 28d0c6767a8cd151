//! The store's reads, whatever engine holds the rows: one consistent snapshot,
//! asked by domain (objects, the log, worlds and heads, the journal, tasks,
//! sessions, receipts). Each engine implements the primitives; the rest are
//! derived here once, so both engines answer them the same way.

use crate::error::ReadError;
use crate::export::stream::ExportError;
use crate::model::*;
use crate::ops::record::Record;
use crate::refs::Ref;
use crate::rows;
use crate::tables::{REFERRER_ENTRY, REFERRER_OBJECT, REFERRER_WORLD, SELECTED_HEAD};
use crate::verify::report::{Options, Report};

/// A read snapshot of whichever engine the store runs on.
pub type Snapshot = Box<dyn Walks>;

/// Anything that can take a read snapshot.
pub trait Reads {
    fn snapshot(&self) -> Result<Snapshot, ReadError>;
}

/// One consistent snapshot of the store. Paged reads return at most
/// `read::PAGE_MAX` items.
pub trait View: Send + Sync {
    fn object_meta(&self, r: &Ref) -> Result<Option<ObjectMeta>, ReadError>;
    /// The object's sequence number: its place in the order objects were first written.
    fn object_seq(&self, r: &Ref) -> Result<Option<u64>, ReadError>;
    fn payload(&self, r: &Ref) -> Result<Option<Vec<u8>>, ReadError>;
    /// The object with sequence number `seq`.
    fn object_at(&self, seq: u64) -> Result<Option<Ref>, ReadError>;
    fn has_object(&self, r: &Ref) -> Result<bool, ReadError>;
    /// Objects with `semantic_id`, in ascending hash order, strictly after `after`.
    fn objects_by_semantic_id(
        &self,
        semantic_id: &str,
        after: Option<Ref>,
        limit: usize,
    ) -> Result<Vec<(Ref, ObjectMeta)>, ReadError>;

    fn log_entry(&self, index: u64) -> Result<Option<LogEntry>, ReadError>;
    /// Entries from `from`, stopping at the first absent index.
    fn log_range(&self, from: u64, limit: usize) -> Result<Vec<LogEntry>, ReadError>;
    /// Number of entries: one past the last index (the log is contiguous from 0).
    fn log_len(&self) -> Result<u64, ReadError>;
    /// The index of the entry with hash `entry_hash`.
    fn entry_index_of(&self, entry_hash: &Ref) -> Result<Option<u64>, ReadError>;

    fn world(&self, r: &Ref) -> Result<Option<World>, ReadError>;
    /// The world of revision `revision`.
    fn world_at(&self, revision: u64) -> Result<Option<Ref>, ReadError>;
    fn head(&self, name: &str) -> Result<Option<Ref>, ReadError>;
    /// All named heads (registry heads and the selected world), in name order.
    fn heads(&self) -> Result<Vec<(String, Ref)>, ReadError>;
    fn registry_entry(&self, registry: &str, id: &str) -> Result<Option<Ref>, ReadError>;

    fn session(&self, credential_id: &Ref) -> Result<Option<Session>, ReadError>;
    /// Up to `limit` sessions in credential-id order.
    fn sessions(&self, limit: usize) -> Result<Vec<(Ref, Session)>, ReadError>;
    fn task(&self, key: &TaskKey) -> Result<Option<Task>, ReadError>;
    fn receipt(&self, id: &str) -> Result<Option<Receipt>, ReadError>;
    /// Units spent by `episode` on `(effect, scope)`.
    fn spent(&self, episode: &str, effect: &str, scope: &str) -> Result<u64, ReadError>;

    /// The journal of one invocation: each intent with its outcome, in ordinal order.
    fn journal_of(&self, invocation_id: &str) -> Result<Vec<JournalItem>, ReadError>;
    /// Which journal item's outcome carries effect record `record`.
    fn record_journal(&self, record: &Ref) -> Result<Option<JournalKey>, ReadError>;

    /// Who names `target`, by kind (objects, entries, worlds) and then in the
    /// order they were written, strictly after `after`.
    fn referrers(&self, target: &Ref, after: Option<(u8, Ref)>, limit: usize) -> Result<Vec<Referrer>, ReadError>;
    /// Whether the index says `referrer` (of `kind`) names `target`.
    fn has_referrer(&self, target: &Ref, kind: u8, referrer: &Ref) -> Result<bool, ReadError>;

    /// An episode's summary, as the commits that made it kept it.
    fn episode(&self, episode: &str) -> Result<Option<EpisodeRow>, ReadError>;
    /// Episodes by last activity, most recent first, strictly after the
    /// cursor `after` = (last activity, episode) in that order.
    fn episodes(&self, after: Option<(u64, String)>, limit: usize) -> Result<Vec<(String, EpisodeRow)>, ReadError>;
    /// The episode's calls from position `from` on: (position, task key, task).
    fn episode_calls(&self, episode: &str, from: u64, limit: usize) -> Result<Vec<(u64, TaskKey, Task)>, ReadError>;
    /// Up to `limit` of the episode's sessions, in credential-id order.
    fn episode_sessions(&self, episode: &str, limit: usize) -> Result<Vec<(Ref, Session)>, ReadError>;
    /// Units the episode spent, per (effect, scope) it spent on.
    fn episode_spend(&self, episode: &str) -> Result<Vec<(String, String, u64)>, ReadError>;

    fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, ReadError>;
    /// The open approval of one session's exact request, with its id.
    fn open_approval(&self, credential: &Ref, digest: &Ref) -> Result<Option<(String, ApprovalRow)>, ReadError>;
    /// Up to `limit` open approvals (pending, or approved and not used up).
    fn open_approvals(&self, limit: usize) -> Result<Vec<(String, ApprovalRow)>, ReadError>;
    /// Up to `limit` approvals in id order, strictly after `after`.
    fn approvals(&self, after: Option<&str>, limit: usize) -> Result<Vec<(String, ApprovalRow)>, ReadError>;
    /// The approval session `credential`'s A2A task `task_id` last waited
    /// on, with its id, whatever became of it since (decided, used, closed).
    fn awaited_approval(&self, credential: &Ref, task_id: &str) -> Result<Option<(String, ApprovalRow)>, ReadError>;

    // ---- derived: the same for every engine ----

    fn selected_head(&self) -> Result<Option<Ref>, ReadError> {
        self.head(SELECTED_HEAD)
    }

    /// The selected world's row.
    fn head_world(&self) -> Result<Option<World>, ReadError> {
        match self.selected_head()? {
            Some(r) => self.world(&r)?.map(Some).ok_or_else(|| {
                rows::Corruption {
                    table: "heads",
                    key: SELECTED_HEAD.into(),
                    detail: format!("names absent world {r}"),
                }
                .into()
            }),
            None => Ok(None),
        }
    }

    fn receipt_state(&self, id: &str) -> Result<(ReceiptState, Option<Ref>), ReadError> {
        Ok(match self.receipt(id)? {
            None => (ReceiptState::NotStarted, None),
            Some(Receipt { result_ref: Some(r), .. }) => (ReceiptState::Resolved, Some(r)),
            Some(Receipt { result_ref: None, .. }) => (ReceiptState::Indeterminate, None),
        })
    }

    /// Where a referrer sits in its kind's order.
    fn referrer_position(&self, kind: u8, referrer: &Ref) -> Result<Option<u64>, ReadError> {
        match kind {
            REFERRER_OBJECT => self.object_seq(referrer),
            REFERRER_ENTRY => self.entry_index_of(referrer),
            REFERRER_WORLD => Ok(self.world(referrer)?.map(|w| w.revision)),
            _ => Ok(None),
        }
    }

    /// The referrer at a position of its kind.
    fn referrer_at(&self, kind: u8, position: u64) -> Result<Option<Ref>, ReadError> {
        match kind {
            REFERRER_OBJECT => self.object_at(position),
            REFERRER_ENTRY => Ok(self.log_entry(position)?.map(|e| e.entry_hash)),
            REFERRER_WORLD => self.world_at(position),
            _ => Ok(None),
        }
    }

    /// The referrer an index row of `target` names, read whole; a row naming a
    /// position that holds nothing is corruption.
    fn referrer_of(&self, target: &Ref, kind: u8, position: u64) -> Result<Referrer, ReadError> {
        let referrer = self.referrer_at(kind, position)?.ok_or_else(|| rows::Corruption {
            table: "referrers",
            key: format!("{target} {kind} {position}"),
            detail: "the row names a position that holds nothing".into(),
        })?;
        Ok(Referrer { kind, referrer, entry_index: (kind == REFERRER_ENTRY).then_some(position) })
    }

    /// The journal item whose outcome carries effect record `record`.
    fn journal_of_record(&self, record: &Ref) -> Result<Option<(JournalKey, JournalItem)>, ReadError> {
        let Some(key) = self.record_journal(record)? else { return Ok(None) };
        let item = self.journal_of(&key.invocation_id)?.into_iter().find(|i| i.ordinal == key.ordinal);
        Ok(item.map(|i| (key, i)))
    }
}

/// The walks over a whole snapshot that only the engine holding its rows can
/// make: the verifier's checks of its own tables and indexes, and the
/// export's stream of every record. Each engine answers them beside its own
/// code (`verify::redb`, `postgres::verify`), so the modules that serve them
/// (`verify`, `export`) name no engine, and nothing below an engine reaches
/// up into one.
pub trait Walks: View {
    /// Everything this snapshot holds, verified.
    fn verify(&self, opts: &Options<'_>) -> Report;
    /// Every record of the snapshot, in the order every engine streams them.
    fn records(
        &self,
        with_sessions: bool,
        put: &mut dyn FnMut(Record) -> Result<(), ExportError>,
    ) -> Result<(), ExportError>;
}
