//! Fuzzes the decoder of `log` rows (`LogEntry`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_log_entry`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_log_entry(data);
});
