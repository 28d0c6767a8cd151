//! `world-store`: World's durable, content-addressed store.
//!
//! One redb file holds the objects, the append-only hash-chained log, the worlds
//! and heads, the effect journal and ledger, tasks, sessions and receipts. One
//! process writes (an exclusive, non-waiting lock on `<db>.writer.lock`), through
//! one writer thread that group-commits; any number of read-only handles, in this
//! process or others, read consistent snapshots without waiting.
//!
//! The store knows nothing of HTTP or async runtimes: writes are submitted with a
//! completion callback (`Store::submit`) or run blocking (`Store::call`).
//!
//! The modules form layers, each using only those below it (ARCHITECTURE.md,
//! `tests/layering.rs`); this root only names what the crate offers.

mod backend;
pub mod bloom;
pub mod canonical;
mod embedded;
mod engine;
pub mod error;
pub mod export;
pub mod fuzz;
pub mod histogram;
pub mod keys;
pub mod media;
pub mod model;
pub mod ops;
pub mod payloads;
pub mod postgres;
pub mod read;
pub mod referrers;
pub mod refs;
pub mod rows;
pub mod sample;
pub mod tables;
pub mod tiered;
pub mod verify;
pub mod view;
pub mod wal;
mod writer;

pub use backend::{
    Done, EpisodeHold, FileSizes, Footprint, Health, OnFatal, StoreStatus, WorldStore, WriterHistograms, WriterStats,
};
pub use embedded::{
    CACHE_BYTES_DEFAULT, Compacted, READ_ONLY_CACHE_BYTES, ReadOnlyStore, Store, StoreOptions, compact, pending_upgrade,
};
pub use engine::Replayed;
pub use error::{OpenError, ReadError, WriteError};
pub use media::{FileMedia, Media, RESERVE_BYTES, WalIo, lock_path};
pub use model::*;
pub use ops::*;
pub use read::{PAGE_DEFAULT, PAGE_MAX, page_limit};
pub use refs::{Ref, RefError};
pub use view::{Reads, Snapshot, View, Walks};
pub use writer::{BATCH_MAX, CHECKPOINT_INTERVAL, CHECKPOINT_WAL_BYTES, HOLD_BYTES_MAX, WRITE_QUEUE_MAX};
