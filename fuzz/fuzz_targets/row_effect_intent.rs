//! Fuzzes the decoder of `intents` rows (`EffectIntent`, via `rows::decode`); the checks live in
//! `world_store::fuzz::row_effect_intent`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    world_store::fuzz::row_effect_intent(data);
});
