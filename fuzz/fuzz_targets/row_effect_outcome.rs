//! Fuzzes the decoder of `outcomes` rows (`EffectOutcome`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_effect_outcome`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_effect_outcome(data);
});
