//! A fast, deterministic hasher for the engine's integer-keyed maps (sequence ids; the prefix
//! cache has its own index, [`crate::kv::HashIndex`]): one multiply per key (the Fx hash of
//! rustc), instead of SipHash's many rounds.
//!
//! Nothing here resists adversarial keys, and nothing needs to: the keys are the engine's own
//! (ids its driver assigns, content hashes it computed), and no map is ever iterated, so the
//! hasher cannot change a result, only how fast lookups are.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A [`HashMap`] hashed with [`FxHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// An empty [`FastMap`].
pub fn fast_map<K, V>() -> FastMap<K, V> {
    FastMap::default()
}

const SEED: u64 = 0xf135_7aea_2e62_a9c5;

/// The Fx hash: each word is added and the state multiplied by an odd constant; the result is
/// rotated so that its high bits (which hashbrown uses as a tag) depend on every input bit.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher {
    h: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.h = self.h.wrapping_add(w).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n as u64);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.h.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn one_word_by_hand() {
        // (0 + 1)·SEED, rotated left by 26
        let b = BuildHasherDefault::<FxHasher>::default();
        assert_eq!(b.hash_one(1u64), SEED.rotate_left(26));
        assert_eq!(b.hash_one(0u64), 0);
    }

    #[test]
    fn sequential_keys_spread_over_the_tag_bits() {
        // hashbrown's 7-bit tag comes from the top bits: sequential ids must not share one
        let b = BuildHasherDefault::<FxHasher>::default();
        let tags: std::collections::HashSet<u64> = (0..1000u64).map(|k| b.hash_one(k) >> 57).collect();
        // of the 128 tags, the first 1000 ids use 97
        assert!(tags.len() > 64, "{} distinct tags", tags.len());
    }

    #[test]
    fn a_map_behaves_as_a_map() {
        let mut m = fast_map::<u64, u32>();
        for k in 0..10_000u64 {
            m.insert(k * 7919, k as u32);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.get(&(42 * 7919)), Some(&42));
        assert_eq!(m.remove(&7919), Some(1));
        assert!(!m.contains_key(&7919));
    }
}
