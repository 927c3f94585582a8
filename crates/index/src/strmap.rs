//! A map keyed by strings that holds short ones inline: a string of at most 15 bytes is its own key
//! (two words, compared and hashed without a call or a pointer to follow), kept with its value in one
//! slot of an open-addressed table, which makes a lookup in a large vocabulary one visit to memory
//! instead of three (the table's control bytes, its slot, the key's text).

use rustc_hash::FxHashMap;

/// Strings to values, the short ones inline.
#[derive(Debug, Clone)]
pub struct StrMap<V> {
    short: Inline<V>,
    long: FxHashMap<Box<str>, V>,
}

impl<V> Default for StrMap<V> {
    fn default() -> Self {
        StrMap {
            short: Inline {
                slots: Vec::new(),
                len: 0,
            },
            long: FxHashMap::default(),
        }
    }
}

/// A key no string has (its length byte says 255): what a free slot of the table holds.
const NO_KEY: [u64; 2] = [0, u64::MAX];

/// Short keys to values by open addressing: a key and its value share a slot, the one its hash picks
/// or the first free one after it (linear probing, at most three quarters of the slots full), so that
/// a lookup in a table larger than the caches mostly costs one miss where a map with separate control
/// bytes costs two.
#[derive(Debug, Clone)]
struct Inline<V> {
    /// A power of two of slots (none before the first insert); [`NO_KEY`] marks a free one.
    slots: Vec<([u64; 2], V)>,
    len: usize,
}

impl<V: Copy + Default> Inline<V> {
    /// The first slot to look in for `k`: the high bits of a multiplicative hash of its two words.
    #[inline]
    fn home(&self, k: [u64; 2]) -> usize {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let h = (k[0].wrapping_mul(K).rotate_left(26) ^ k[1]).wrapping_mul(K);
        (h >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    #[inline]
    fn get(&self, k: [u64; 2]) -> Option<&V> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        loop {
            let slot = &self.slots[i];
            if slot.0 == k {
                return Some(&slot.1);
            }
            if slot.0 == NO_KEY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, k: [u64; 2], v: V) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            let grown = vec![(NO_KEY, V::default()); (self.slots.len() * 2).max(16)];
            let old = std::mem::replace(&mut self.slots, grown);
            self.len = 0;
            for (k, v) in old.into_iter().filter(|s| s.0 != NO_KEY) {
                self.insert(k, v);
            }
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(k);
        while self.slots[i].0 != k && self.slots[i].0 != NO_KEY {
            i = (i + 1) & mask;
        }
        self.len += (self.slots[i].0 == NO_KEY) as usize;
        self.slots[i] = (k, v);
    }
}

/// The inline key of a string of at most 15 bytes: its bytes, zero-padded, and its length in the last
/// byte (so that strings differing only by trailing NULs differ).
fn short_key(s: &str) -> Option<[u64; 2]> {
    let bytes = s.as_bytes();
    if bytes.len() > 15 {
        return None;
    }
    let mut b = [0u8; 16];
    b[..bytes.len()].copy_from_slice(bytes);
    b[15] = bytes.len() as u8;
    Some([
        u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
        u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
    ])
}

impl<V: Copy + Default> StrMap<V> {
    /// The value of `s`.
    #[inline]
    pub fn get(&self, s: &str) -> Option<&V> {
        match short_key(s) {
            Some(k) => self.short.get(k),
            None => self.long.get(s),
        }
    }

    /// Sets the value of `s`.
    pub fn insert(&mut self, s: &str, v: V) {
        match short_key(s) {
            Some(k) => self.short.insert(k, v),
            None => {
                self.long.insert(s.into(), v);
            }
        }
    }

    /// Strings held.
    pub fn len(&self) -> usize {
        self.short.len + self.long.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_strings_are_told_apart() {
        let words = [
            "",
            "a",
            "a\0",
            "\0",
            "ab",
            "abcdefghijklmno",
            "abcdefghijklmnop",
            "abcdefghijklmnopq",
            "é",
            "e\u{301}",
        ];
        let mut m = StrMap::default();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(m.get(w), None);
            m.insert(w, i);
        }
        assert_eq!(m.len(), words.len());
        for (i, w) in words.iter().enumerate() {
            assert_eq!(m.get(w), Some(&i), "{w:?}");
        }
        m.insert("a", 99);
        assert_eq!((m.get("a"), m.len()), (Some(&99), words.len()));
        assert_eq!(m.get("abcdefghijklmnoq"), None);
    }

    #[test]
    fn lookups_agree_with_a_hash_map() {
        // Enough keys for the table to grow many times and for probes to run past taken slots; values
        // changed after insertion; absent keys; the empty string, whose inline key is all zeros but its
        // length; keys that differ only in their last bytes.
        let mut m = StrMap::default();
        let mut oracle = std::collections::HashMap::new();
        let key = |i: u32| match i % 3 {
            0 if i == 0 => String::new(),
            0 => format!("w{i}"),
            1 => format!("{:0>15}", i),
            _ => format!("prefix-{i}"),
        };
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for round in 0..6u32 {
            for _ in 0..20_000 {
                let i = (next() % 80_000) as u32;
                m.insert(&key(i), i + round);
                oracle.insert(key(i), i + round);
            }
            for _ in 0..50_000 {
                let i = (next() % 100_000) as u32;
                assert_eq!(m.get(&key(i)), oracle.get(&key(i)), "{i}");
            }
            assert_eq!(m.len(), oracle.len());
        }
    }
}
