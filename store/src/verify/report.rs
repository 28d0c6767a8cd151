//! What the verifier reports, whichever engine it walked.

use serde::Serialize;

/// Most faults kept in a report; the count still includes the rest.
pub const FAULTS_KEPT_MAX: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// A payload does not hash to its ref, or a derived hash does not recompute.
    HashMismatch,
    /// A row that should exist does not.
    Missing,
    /// A ref names nothing.
    Dangling,
    /// The log's prevEntryHash chain or index contiguity is broken.
    ChainBreak,
    /// Two rows disagree (sizes, indexes, states, spend).
    Mismatch,
    /// A row failed to decode.
    Decode,
    /// The storage engine failed or panicked while reading.
    Engine,
    /// An object under a semantic id only the daemon writes, or an entry
    /// claiming the daemon as its author, that no row of the daemon's names:
    /// written by someone else (a REST commit, before those names were
    /// reserved), and never to be trusted as the daemon's.
    Forged,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fault {
    pub table: &'static str,
    pub key: String,
    pub kind: FaultKind,
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub objects: u64,
    pub payload_bytes: u64,
    pub log_entries: u64,
    pub worlds: u64,
    pub heads: u64,
    pub intents: u64,
    pub outcomes: u64,
    pub tasks: u64,
    pub sessions: u64,
    pub receipts: u64,
}

impl Counts {
    /// Adds what another walk counted.
    pub fn add(&mut self, other: &Counts) {
        let Counts { objects, payload_bytes, log_entries, worlds, heads, intents, outcomes, tasks, sessions, receipts } =
            other;
        self.objects += objects;
        self.payload_bytes += payload_bytes;
        self.log_entries += log_entries;
        self.worlds += worlds;
        self.heads += heads;
        self.intents += intents;
        self.outcomes += outcomes;
        self.tasks += tasks;
        self.sessions += sessions;
        self.receipts += receipts;
    }
}

/// Where one table's bytes go: what its rows hold, and the pages that hold them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableFootprint {
    pub table: String,
    pub rows: u64,
    /// Keys and values as stored: the table's logical bytes.
    pub stored_bytes: u64,
    /// Page headers, branch pages and other bookkeeping.
    pub metadata_bytes: u64,
    /// Unused space inside the table's pages.
    pub fragmented_bytes: u64,
}

impl TableFootprint {
    /// Bytes of pages the table occupies.
    pub fn page_bytes(&self) -> u64 {
        self.stored_bytes + self.metadata_bytes + self.fragmented_bytes
    }
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub counts: Counts,
    /// Every table's footprint, largest first. The file holds these pages,
    /// the engine's own tables, and free pages.
    pub tables: Vec<TableFootprint>,
    pub fault_count: u64,
    pub faults: Vec<Fault>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.fault_count == 0
    }
}

#[derive(Default)]
pub struct Options<'a> {
    /// Hashing threads; 0 means one per core.
    pub threads: usize,
    /// Called now and then with (objects hashed, objects in all).
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

impl Report {
    /// Keys and values of every table and the payloads: what the store logically holds.
    pub fn logical_bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.stored_bytes).sum::<u64>() + self.counts.payload_bytes
    }

    /// Bytes of the pages holding every table.
    pub fn page_bytes(&self) -> u64 {
        self.tables.iter().map(TableFootprint::page_bytes).sum()
    }
}
