//! A map keyed by strings that holds short ones inline: a string of at most 15 bytes is its own key
//! (two words, compared and hashed without a call or a pointer to follow), which makes a lookup in a
//! large vocabulary one probe of the table instead of a probe and a visit to the key's text.

use rustc_hash::FxHashMap;

/// Strings to values, the short ones inline.
#[derive(Debug, Clone)]
pub struct StrMap<V> {
    short: FxHashMap<[u64; 2], V>,
    long: FxHashMap<Box<str>, V>,
}

impl<V> Default for StrMap<V> {
    fn default() -> Self {
        StrMap {
            short: FxHashMap::default(),
            long: FxHashMap::default(),
        }
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
            Some(k) => self.short.insert(k, v),
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
}
