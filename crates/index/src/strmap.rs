//! A map keyed by strings that holds short ones inline: a string of at most 15 bytes is its own key
//! (two words, compared and hashed without a call or a pointer to follow), which makes a lookup in a
//! large vocabulary one probe of the table instead of a probe and a visit to the key's text.

use rustc_hash::FxHashMap;

/// Strings to values, the short ones inline; the most recently used short ones also in a small
/// direct-mapped table that stays in a core's cache (see [`StrMap::get_recent`]).
#[derive(Debug, Clone)]
pub struct StrMap<V> {
    short: FxHashMap<[u64; 2], V>,
    long: FxHashMap<Box<str>, V>,
    /// Short keys recently looked up by [`StrMap::get_recent`], each in the slot its hash picks, with
    /// its value; empty until first used, and never holding a key the map does not (inserts only add).
    recent: Vec<([u64; 2], V)>,
}

impl<V> Default for StrMap<V> {
    fn default() -> Self {
        StrMap {
            short: FxHashMap::default(),
            long: FxHashMap::default(),
            recent: Vec::new(),
        }
    }
}

/// Slots of the recent-key table: 16,384 of 24 bytes (384 KiB) stay in a core's L2 cache, where a
/// lookup in a map of a million keys misses twice; text meets its frequent words far more often.
const RECENT_SLOTS: usize = 1 << 14;

/// A key no string has (its length byte says 255): what an empty slot of the recent table holds.
const NO_KEY: [u64; 2] = [0, u64::MAX];

/// The recent table's slot of a short key.
#[inline]
fn recent_slot(k: [u64; 2]) -> usize {
    let h = (k[0] ^ k[1].rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - RECENT_SLOTS.trailing_zeros())) as usize
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
    /// [`StrMap::get`] through the recent-key table: a short key found in the map takes its slot
    /// there, so that the next lookup of it reads one cache line the core holds.
    #[inline]
    pub fn get_recent(&mut self, s: &str) -> Option<V> {
        let Some(k) = short_key(s) else {
            return self.long.get(s).copied();
        };
        if self.recent.is_empty() {
            self.recent = vec![(NO_KEY, V::default()); RECENT_SLOTS];
        }
        let slot = &mut self.recent[recent_slot(k)];
        if slot.0 == k {
            return Some(slot.1);
        }
        let v = *self.short.get(&k)?;
        *slot = (k, v);
        Some(v)
    }
}

impl<V> StrMap<V> {
    /// The value of `s`.
    #[inline]
    pub fn get(&self, s: &str) -> Option<&V> {
        match short_key(s) {
            Some(k) => self.short.get(&k),
            None => self.long.get(s),
        }
    }

    /// Sets the value of `s`.
    pub fn insert(&mut self, s: &str, v: V) {
        match short_key(s) {
            Some(k) => {
                // A slot caching `s` would hold its old value.
                if let Some(slot) = self.recent.get_mut(recent_slot(k)).filter(|slot| slot.0 == k) {
                    slot.0 = NO_KEY;
                }
                self.short.insert(k, v)
            }
            None => self.long.insert(s.into(), v),
        };
    }

    /// Strings held.
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
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
    fn recent_lookups_agree_with_the_map() {
        // Far more keys than the recent table's slots, so that slots are shared and replaced; values
        // changed after being cached; the empty string, whose inline key is all zeros but its length.
        let mut m = StrMap::default();
        let key = |i: u32| if i == 0 { String::new() } else { format!("w{i}") };
        for i in 0..50_000u32 {
            m.insert(&key(i), i);
        }
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for round in 0..4 {
            for _ in 0..100_000 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let i = (rng % 60_000) as u32;
                assert_eq!(m.get_recent(&key(i)), m.get(&key(i)).copied(), "{i}");
            }
            for i in (round..50_000).step_by(7) {
                m.insert(&key(i), i + 1_000_000 * (round + 1));
            }
        }
        m.insert("a-long-key-of-many-bytes", 7);
        assert_eq!(m.get_recent("a-long-key-of-many-bytes"), Some(7));
        assert_eq!(m.get_recent("absent"), None);
    }
}
