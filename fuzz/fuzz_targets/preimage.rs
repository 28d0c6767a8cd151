//! Fuzzes the canonical JSON `entryHash` preimage parser (`canonical::parse_entry_preimage`);
//! the checks live in `world_store::fuzz::preimage`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::preimage(data);
});
