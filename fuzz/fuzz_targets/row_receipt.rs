//! Fuzzes the decoder of `receipts` rows (`Receipt`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_receipt`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_receipt(data);
});
