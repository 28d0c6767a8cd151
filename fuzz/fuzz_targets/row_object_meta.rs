//! Fuzzes the decoder of `objects` rows (`ObjectMeta`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_object_meta`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_object_meta(data);
});
