//! Fuzzes the export stream's frame reader (`export::read_frames`); the checks
//! live in `world_store::fuzz::export_frames`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::export_frames(data);
});
