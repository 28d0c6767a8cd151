//! Keys of the busiest index tables, stored exactly as redb stores the tuples
//! they stand for (the same bytes, the same type name, the same order), so a
//! store written with the tuples opens with these and back.
//!
//! Why not the tuples: redb compares a `[u8; 32]` one byte at a time through
//! a call per byte (a semantic key's first 32 bytes are shared by every
//! object of one semantic id, so each comparison made 33 such calls), and it
//! encodes every tuple into a fresh `Vec`. These compare as their bytes
//! (`memcmp`, or the numbers' order where they hold little-endian numbers)
//! and encode into an array on the stack.

use redb::{Key, TypeName, Value};
use std::cmp::Ordering;

/// A 32-byte hash as tables hold it.
pub type Key32 = [u8; 32];

/// (ref, place kind): the key of the place index, stored as `(Key32, u8)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlaceKey(pub Key32, pub u8);

/// (sha256 of a semantic id, ref): the key of the semantic index, stored as
/// `(Key32, Key32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SemanticKey(pub Key32, pub Key32);

/// (target's place, target's position, referrer kind, referrer's position):
/// the key of the referrer index, stored as `(u8, u64, u8, u64)` (numbers
/// little-endian, so compared as numbers, not as bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReferrerKey(pub u8, pub u64, pub u8, pub u64);

fn key32(data: &[u8]) -> Key32 {
    let mut out = [0; 32];
    out.copy_from_slice(&data[..32]);
    out
}

fn le_u64(data: &[u8]) -> u64 {
    let mut out = [0; 8];
    out.copy_from_slice(&data[..8]);
    u64::from_le_bytes(out)
}

impl PlaceKey {
    const WIDTH: usize = 33;

    fn encode(&self) -> [u8; Self::WIDTH] {
        let mut out = [0; Self::WIDTH];
        out[..32].copy_from_slice(&self.0);
        out[32] = self.1;
        out
    }

    fn decode(data: &[u8]) -> PlaceKey {
        PlaceKey(key32(data), data[32])
    }
}

impl SemanticKey {
    const WIDTH: usize = 64;

    fn encode(&self) -> [u8; Self::WIDTH] {
        let mut out = [0; Self::WIDTH];
        out[..32].copy_from_slice(&self.0);
        out[32..].copy_from_slice(&self.1);
        out
    }

    fn decode(data: &[u8]) -> SemanticKey {
        SemanticKey(key32(data), key32(&data[32..]))
    }
}

impl ReferrerKey {
    const WIDTH: usize = 18;

    fn encode(&self) -> [u8; Self::WIDTH] {
        let mut out = [0; Self::WIDTH];
        out[0] = self.0;
        out[1..9].copy_from_slice(&self.1.to_le_bytes());
        out[9] = self.2;
        out[10..].copy_from_slice(&self.3.to_le_bytes());
        out
    }

    fn decode(data: &[u8]) -> ReferrerKey {
        ReferrerKey(data[0], le_u64(&data[1..]), data[9], le_u64(&data[10..]))
    }
}

/// redb's `Value` and `Key` for `$key`, stored as the tuple `$tuple` (its
/// type name, and the bytes of its `encode`), compared as bytes (`bytes`)
/// or as the decoded values (`decoded`, for little-endian numbers).
macro_rules! stored_as {
    ($key:ty, $tuple:ty, $compare:ident) => {
        impl Value for $key {
            type SelfType<'a> = $key;
            type AsBytes<'a> = [u8; <$key>::WIDTH];

            fn fixed_width() -> Option<usize> {
                Some(<$key>::WIDTH)
            }

            fn from_bytes<'a>(data: &'a [u8]) -> $key
            where
                Self: 'a,
            {
                <$key>::decode(data)
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a $key) -> [u8; <$key>::WIDTH]
            where
                Self: 'b,
            {
                value.encode()
            }

            fn type_name() -> TypeName {
                <$tuple as Value>::type_name()
            }
        }

        impl Key for $key {
            fn compare(data1: &[u8], data2: &[u8]) -> Ordering {
                stored_as!(@compare $compare, $key, data1, data2)
            }
        }
    };
    (@compare bytes, $key:ty, $a:ident, $b:ident) => {
        $a.cmp($b)
    };
    (@compare decoded, $key:ty, $a:ident, $b:ident) => {
        <$key>::decode($a).cmp(&<$key>::decode($b))
    };
}

stored_as!(PlaceKey, (Key32, u8), bytes);
stored_as!(SemanticKey, (Key32, Key32), bytes);
stored_as!(ReferrerKey, (u8, u64, u8, u64), decoded);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `K` stores as the tuple `T`: same type name, same bytes, same order,
    /// and its bytes read back as itself.
    fn stores_as<K, T>(a: K, b: K, ta: T::SelfType<'_>, tb: T::SelfType<'_>)
    where
        K: for<'x> Key<SelfType<'x> = K> + Ord + std::fmt::Debug + Copy + 'static,
        T: Key + 'static,
    {
        assert_eq!(K::type_name(), T::type_name());
        let (ka, kb) = (K::as_bytes(&a), K::as_bytes(&b));
        let (ua, ub) = (T::as_bytes(&ta), T::as_bytes(&tb));
        assert_eq!(ka.as_ref(), ua.as_ref());
        assert_eq!(kb.as_ref(), ub.as_ref());
        assert_eq!(K::compare(ka.as_ref(), kb.as_ref()), T::compare(ua.as_ref(), ub.as_ref()));
        assert_eq!(K::compare(ka.as_ref(), kb.as_ref()), a.cmp(&b));
        assert_eq!(K::from_bytes(ka.as_ref()), a);
    }

    /// Two 32-byte values that often share a prefix, as semantic ids do.
    fn near_pair() -> impl Strategy<Value = (Key32, Key32)> {
        (any::<Key32>(), any::<Key32>(), 0usize..=32).prop_map(|(a, mut b, shared)| {
            b[..shared].copy_from_slice(&a[..shared]);
            (a, b)
        })
    }

    proptest! {
        #[test]
        fn a_place_key_stores_as_its_tuple((r1, r2) in near_pair(), k1: u8, k2: u8) {
            stores_as::<PlaceKey, (Key32, u8)>(PlaceKey(r1, k1), PlaceKey(r2, k2), (r1, k1), (r2, k2));
            stores_as::<PlaceKey, (Key32, u8)>(PlaceKey(r1, k1), PlaceKey(r1, k2), (r1, k1), (r1, k2));
        }

        #[test]
        fn a_semantic_key_stores_as_its_tuple((s1, s2) in near_pair(), (r1, r2) in near_pair()) {
            stores_as::<SemanticKey, (Key32, Key32)>(SemanticKey(s1, r1), SemanticKey(s2, r2), (s1, r1), (s2, r2));
            stores_as::<SemanticKey, (Key32, Key32)>(SemanticKey(s1, r1), SemanticKey(s1, r2), (s1, r1), (s1, r2));
        }

        #[test]
        fn a_referrer_key_stores_as_its_tuple(a: (u8, u64, u8, u64), b: (u8, u64, u8, u64), same_target: bool) {
            let b = if same_target { (a.0, a.1, b.2, b.3) } else { b };
            stores_as::<ReferrerKey, (u8, u64, u8, u64)>(ReferrerKey(a.0, a.1, a.2, a.3), ReferrerKey(b.0, b.1, b.2, b.3), a, b);
        }
    }

    #[test]
    fn a_table_written_with_tuples_reads_with_these_keys_in_the_same_order() {
        use redb::{ReadableDatabase, ReadableTable, TableDefinition};
        let db = redb::Database::builder().create_with_backend(redb::backends::InMemoryBackend::new()).unwrap();
        let tuples: TableDefinition<(Key32, u8), u64> = TableDefinition::new("t");
        let keys: TableDefinition<PlaceKey, u64> = TableDefinition::new("t");
        let written: Vec<(Key32, u8)> = (0..200u8).map(|i| ([i.wrapping_mul(37); 32], i % 3)).collect();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(tuples).unwrap();
            for (i, k) in written.iter().enumerate() {
                t.insert(*k, i as u64).unwrap();
            }
        }
        txn.commit().unwrap();
        let read = db.begin_read().unwrap();
        let t = read.open_table(keys).unwrap();
        let got: Vec<PlaceKey> = t.iter().unwrap().map(|item| item.unwrap().0.value()).collect();
        let mut expected: Vec<PlaceKey> = written.iter().map(|(r, k)| PlaceKey(*r, *k)).collect();
        expected.sort();
        assert_eq!(got, expected);
        assert_eq!(t.get(PlaceKey([37; 32], 1)).unwrap().map(|v| v.value()), Some(1));
    }
}
