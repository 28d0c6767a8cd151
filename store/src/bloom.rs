//! A Bloom filter over a run's keys: says for sure that a key is not in the
//! run, so a lookup that misses (every new object is one) skips the run
//! instead of reading a random leaf of it.
//!
//! `BITS_PER_KEY` bits and `HASHES` probes per key give about one false
//! "maybe" in a hundred. A filter is made once, when its run is complete,
//! and never changed; its bytes are `[hashes u8][words of u64 LE]`.

/// Bits of filter per key.
pub const BITS_PER_KEY: u64 = 10;
/// Bits set (and tested) per key.
pub const HASHES: u8 = 7;
/// Largest filter, in 64-bit words (64 MiB): a run of 50 million keys.
pub const WORDS_MAX: usize = 8 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bloom {
    words: Vec<u64>,
    hashes: u8,
}

/// A key as filters test it: hashed once, then asked of any number of
/// filters (a lookup asks every run's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe(u64, u64);

impl Probe {
    pub fn of(key: &[u8]) -> Probe {
        let (h1, h2) = hashes_of(key);
        Probe(h1, h2)
    }
}

/// Two independent 64-bit hashes of `key`, from which every probe is made
/// (`h1 + i·h2`). Keys here are mostly hashes already; the mixing makes
/// any key's bits spread all the same.
fn hashes_of(key: &[u8]) -> (u64, u64) {
    let mut h1: u64 = 0x243f_6a88_85a3_08d3 ^ key.len() as u64;
    let mut h2: u64 = 0x1319_8a2e_0370_7344;
    for chunk in key.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        h1 = mix(h1 ^ w);
        h2 = mix(h2.wrapping_add(w).rotate_left(23));
    }
    (h1, h2 | 1)
}

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Bloom {
    /// An empty filter sized for `keys` keys.
    pub fn for_keys(keys: u64) -> Bloom {
        let bits = keys.saturating_mul(BITS_PER_KEY).max(64);
        let words = usize::try_from(bits.div_ceil(64)).unwrap_or(WORDS_MAX).min(WORDS_MAX);
        Bloom { words: vec![0; words], hashes: HASHES }
    }

    fn bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// The bits a key sets: `h1 + i·h2` for each of the filter's probes.
    fn bits_of(hashes: u8, bits: u64, probe: Probe) -> impl Iterator<Item = u64> {
        let Probe(h1, h2) = probe;
        (0..u64::from(hashes)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % bits)
    }

    pub fn insert(&mut self, key: &[u8]) {
        for bit in Bloom::bits_of(self.hashes, self.bits(), Probe::of(key)) {
            self.words[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    /// False only when `key` was never inserted.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.may_hold(Probe::of(key))
    }

    /// `may_contain` for a key already hashed.
    pub fn may_hold(&self, probe: Probe) -> bool {
        Bloom::bits_of(self.hashes, self.bits(), probe)
            .all(|bit| self.words[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.words.len() * 8);
        out.push(self.hashes);
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The filter `bytes` spell; `None` for bytes no filter was written as.
    pub fn from_bytes(bytes: &[u8]) -> Option<Bloom> {
        let (&hashes, body) = bytes.split_first()?;
        if hashes == 0 || body.is_empty() || !body.len().is_multiple_of(8) || body.len() / 8 > WORDS_MAX {
            return None;
        }
        let words = body.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        Some(Bloom { words, hashes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> [u8; 33] {
        let mut k = [0u8; 33];
        k[..32].copy_from_slice(crate::refs::Ref::of(&i.to_le_bytes()).as_bytes());
        k[32] = 1;
        k
    }

    #[test]
    fn every_inserted_key_is_found_and_about_one_absent_key_in_a_hundred_is_not_ruled_out() {
        let mut bloom = Bloom::for_keys(10_000);
        for i in 0..10_000 {
            bloom.insert(&key(i));
        }
        assert!((0..10_000).all(|i| bloom.may_contain(&key(i))));
        let false_maybes = (10_000..110_000).filter(|i| bloom.may_contain(&key(*i))).count();
        assert!(false_maybes < 2_000, "{false_maybes} false maybes in 100,000");
        assert!(false_maybes > 0, "a filter this size cannot rule out every absent key");
    }

    #[test]
    fn a_filter_reads_back_from_its_bytes_and_refuses_bytes_it_did_not_write() {
        let mut bloom = Bloom::for_keys(100);
        bloom.insert(b"short key");
        bloom.insert(&key(7));
        let back = Bloom::from_bytes(&bloom.to_bytes()).unwrap();
        assert_eq!(back, bloom);
        assert!(back.may_contain(b"short key") && back.may_contain(&key(7)));
        for bad in [&[][..], &[7][..], &[0, 0, 0, 0, 0, 0, 0, 0, 0][..], &[7, 1, 2, 3][..]] {
            assert_eq!(Bloom::from_bytes(bad), None, "{bad:?}");
        }
    }
}
