//! Fuzzes the decoder of `sessions` rows (`Session`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_session`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_session(data);
});
