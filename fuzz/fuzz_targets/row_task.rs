//! Fuzzes the decoder of `tasks` rows (`Task`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_task`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_task(data);
});
