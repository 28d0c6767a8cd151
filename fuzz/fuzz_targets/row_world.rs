//! Fuzzes the decoder of `worlds` rows (`World`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_world`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_world(data);
});
