//! Entry points of the fuzz targets (`fuzz/fuzz_targets/*.rs`), shared with the
//! seed-corpus test (`store/tests/fuzz_corpus.rs`) so that both run the same code.
//!
//! Each function feeds arbitrary bytes to one decoder of the on-disk format and
//! checks what must hold for every input: it never panics; a refused row is a
//! `Corruption` naming its table and key; an accepted row re-encodes to bytes that
//! decode to the same value and re-encode identically; an accepted entry preimage
//! is exactly the canonical encoding of what it parsed to. Each returns whether
//! the input was accepted.

use crate::canonical;
use crate::model::*;
use crate::refs::Ref;
use crate::rows;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Every target, by the name of its file in `fuzz/fuzz_targets/` and its corpus folder.
pub const TARGETS: &[&str] = &[
    "row_object_meta",
    "row_log_entry",
    "row_world",
    "row_session",
    "row_task",
    "row_effect_intent",
    "row_effect_outcome",
    "row_receipt",
    "preimage",
    "export_frames",
];

/// Runs target `name` on `bytes`: `Some(accepted)`, or `None` for an unknown target.
pub fn run(name: &str, bytes: &[u8]) -> Option<bool> {
    Some(match name {
        "row_object_meta" => row_object_meta(bytes),
        "row_log_entry" => row_log_entry(bytes),
        "row_world" => row_world(bytes),
        "row_session" => row_session(bytes),
        "row_task" => row_task(bytes),
        "row_effect_intent" => row_effect_intent(bytes),
        "row_effect_outcome" => row_effect_outcome(bytes),
        "row_receipt" => row_receipt(bytes),
        "preimage" => preimage(bytes),
        "export_frames" => export_frames(bytes),
        _ => return None,
    })
}

const KEY: &str = "fuzz-input";

/// Decodes one row of type `T` as stored in `table`, checking the round trip.
pub fn row<T: Serialize + DeserializeOwned + PartialEq + Debug>(table: &'static str, bytes: &[u8]) -> bool {
    match rows::decode::<T>(table, &KEY, bytes) {
        Ok(value) => {
            let encoded = rows::encode(&value);
            let again: T = rows::decode(table, &KEY, &encoded).expect("a re-encoded row decodes");
            assert_eq!(again, value, "a decoded {table} row changed through re-encoding");
            assert_eq!(rows::encode(&again), encoded, "row encoding is not deterministic");
            true
        }
        Err(c) => {
            assert_eq!((c.table, c.key.as_str()), (table, KEY), "a corruption names its table and key");
            false
        }
    }
}

pub fn row_object_meta(bytes: &[u8]) -> bool {
    row::<ObjectRow>("objects", bytes)
}

pub fn row_log_entry(bytes: &[u8]) -> bool {
    row::<LogEntry>("log", bytes)
}

pub fn row_world(bytes: &[u8]) -> bool {
    row::<World>("worlds", bytes)
}

pub fn row_session(bytes: &[u8]) -> bool {
    row::<Session>("sessions", bytes)
}

pub fn row_task(bytes: &[u8]) -> bool {
    row::<Task>("tasks", bytes)
}

pub fn row_effect_intent(bytes: &[u8]) -> bool {
    row::<EffectIntent>("intents", bytes)
}

pub fn row_effect_outcome(bytes: &[u8]) -> bool {
    row::<EffectOutcome>("outcomes", bytes)
}

pub fn row_receipt(bytes: &[u8]) -> bool {
    row::<Receipt>("receipts", bytes)
}

/// Parses an `entryHash` preimage; accepted bytes must be exactly canonical.
pub fn preimage(bytes: &[u8]) -> bool {
    match canonical::parse_entry_preimage(bytes) {
        Ok(entry) => {
            let canonical = canonical::entry_preimage(&entry.header, &entry.transition_ref);
            assert_eq!(canonical, bytes, "a non-canonical preimage was accepted");
            assert_eq!(entry.entry_hash, Ref::of(bytes), "entryHash is the sha256 of the preimage");
            true
        }
        Err(_) => false,
    }
}

/// Reads an export stream frame by frame: a refusal names an offset inside the
/// input; an accepted stream re-encodes to exactly the same bytes.
pub fn export_frames(bytes: &[u8]) -> bool {
    let mut records = vec![];
    let read = crate::export::read_frames(&mut &bytes[..], |_, r| {
        records.push(r);
        Ok(())
    });
    match read {
        Ok(n) => {
            assert_eq!(n as usize, records.len(), "the count covers every record");
            assert_eq!(crate::export::encode_records(&records), bytes, "an accepted stream re-encodes identically");
            true
        }
        Err(e) => {
            assert!(e.offset as usize <= bytes.len(), "the bad frame's offset {} lies inside the input", e.offset);
            false
        }
    }
}
