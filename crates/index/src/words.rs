//! Word segmentation exactly as `unicode_segmentation`'s `unicode_words`, with ASCII text cut without
//! the Unicode tables.
//!
//! The text is cut into chunks at runs of *separator* bytes: ASCII characters that are neither letters,
//! digits, `_` nor one of the word-joining marks `. : , ; '` (their UAX #29 classes are Other, CR, LF,
//! Newline, WSegSpace and Double_Quote). No UAX #29 rule joins such a byte to an ASCII neighbour, so:
//! - a word boundary falls before a separator run whose preceding byte is ASCII (no state of the
//!   segmenter accepts one of these classes after an ASCII character), and
//! - a word boundary falls after a separator run whose following byte is ASCII (a separator attaches
//!   only a following Extend, Format or ZWJ character (WB4), or a following white space to a space
//!   (WB3d), and neither is ASCII apart from the space itself, which is in the run).
//!
//! The segmenter's state starts afresh at a boundary, and the end of the text ends a segment as any
//! separator does, so the words of the text are the words of its chunks cut at those boundaries, in
//! order. Chunks of ASCII text go through [`ascii_words`], UAX #29 restricted to ASCII; a chunk holding
//! other characters (a separator run, its non-ASCII pieces and the runs between them, up to a run
//! followed by ASCII) goes to `unicode_words` unchanged. The other side of each cut must be ASCII: a
//! space after a non-ASCII white space joins it (WB3d), and a space or tab before an Extend character
//! takes it (WB4), which can make a word of both (`" \u{93e}"`: a vowel sign is alphabetic).

use unicode_segmentation::UnicodeSegmentation;

/// ALetter: `A`–`Z`, `a`–`z`.
const LETTER: u8 = 1;
/// Numeric: `0`–`9`.
const DIGIT: u8 = 2;
/// ExtendNumLet: `_`.
const UNDERSCORE: u8 = 4;
/// MidLetter or MidNumLetQ (`:`, `.`, `'`): joins two letters (WB6, WB7). Equal to `LETTER << 3`.
const MID_LETTER: u8 = 8;
/// MidNum or MidNumLetQ (`,`, `;`, `.`, `'`): joins two digits (WB11, WB12). Equal to `DIGIT << 3`.
const MID_NUM: u8 = 16;
/// An ASCII byte no rule joins to an ASCII neighbour: where the text may be cut (see the module's
/// documentation).
const SEPARATOR: u8 = 32;
/// Letters, digits and `_` join one another in any order (WB5, WB8–WB10, WB13a, WB13b).
const CORE: u8 = LETTER | DIGIT | UNDERSCORE;

/// 1 in each byte of a `u64`: `ONES * b` is eight bytes `b`, for reading text eight bytes at a time.
const ONES: u64 = 0x0101_0101_0101_0101;

/// The class bits of each byte: the UAX #29 word-break classes of the ASCII characters, from
/// `unicode_segmentation`'s tables; bytes of non-ASCII characters have none.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = match b as u8 {
            b'A'..=b'Z' | b'a'..=b'z' => LETTER,
            b'0'..=b'9' => DIGIT,
            b'_' => UNDERSCORE,
            b':' => MID_LETTER,
            b',' | b';' => MID_NUM,
            b'.' | b'\'' => MID_LETTER | MID_NUM,
            _ => SEPARATOR,
        };
        b += 1;
    }
    t
};

/// Calls `emit` with every word of `text`, in order: exactly `text.unicode_words()` (UAX #29 word
/// boundaries, the segments holding a letter or digit), with ASCII text cut without the Unicode tables.
pub(crate) fn for_each_word<'a>(text: &'a str, mut emit: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let is_separator = |b: u8| CLASS[b as usize] & SEPARATOR != 0;
    let mut pos = 0;
    // Invariant: `pos` is 0, or follows a separator run and precedes an ASCII byte (or the end); the
    // words before it have been emitted.
    while let Some(first) = find_non_ascii(bytes, pos) {
        // The chunk holding `first` starts at the separator run before its piece (the bytes since the
        // last separator), whose preceding byte is ASCII, or at `pos`.
        let mut start = first;
        while start > pos && !is_separator(bytes[start - 1]) {
            start -= 1;
        }
        while start > pos && is_separator(bytes[start - 1]) {
            start -= 1;
        }
        ascii_words(&text[pos..start], &mut emit);
        // It ends after the first separator run that an ASCII byte (or the end) follows.
        let mut end = first;
        loop {
            while end < n && !is_separator(bytes[end]) {
                end += 1;
            }
            while end < n && is_separator(bytes[end]) {
                end += 1;
            }
            if end == n || bytes[end].is_ascii() {
                break;
            }
        }
        text[start..end].unicode_words().for_each(&mut emit);
        pos = end;
    }
    ascii_words(&text[pos..], &mut emit);
}

/// The position of the first non-ASCII byte of `bytes` from `from`, eight bytes at a time.
fn find_non_ascii(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(word) = bytes.get(i..i + 8) {
        let high = u64::from_le_bytes(word.try_into().unwrap()) & (ONES * 0x80);
        if high != 0 {
            return Some(i + high.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    bytes[i..].iter().position(|b| !b.is_ascii()).map(|at| i + at)
}

/// Calls `emit` with the words of the ASCII `text`, as UAX #29 cuts them: a word is a run of letters,
/// digits and `_`, in which a MidLetter or MidNumLetQ between two letters, or a MidNum or MidNumLetQ
/// between two digits, also joins; it is kept when it holds a letter or digit (a run of `_` is not).
/// Whether a mark joins depends only on its two neighbours, as the segmenter's state after a letter,
/// digit or `_` is that character's class.
fn ascii_words<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    debug_assert!(text.is_ascii());
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut i = 0;
    while i < n {
        if CLASS[bytes[i] as usize] & CORE == 0 {
            i += 1;
            continue;
        }
        let start = i;
        loop {
            // `i` holds a letter, digit or `_`: the run goes on to the next other byte, and past it where
            // it is a mark of the kind of its neighbours (WB6/7 for letters, WB11/12 for digits; `kind`
            // is 0 after `_`, which no mark joins).
            i = next_non_core(bytes, i + 1);
            let Some(&next) = bytes.get(i + 1) else {
                break;
            };
            let kind = CLASS[bytes[i - 1] as usize] & (LETTER | DIGIT);
            if CLASS[bytes[i] as usize] & (kind << 3) == 0 || CLASS[next as usize] & kind == 0 {
                break;
            }
            i += 1;
        }
        let word = &text[start..i];
        if bytes[start] != b'_' || word.bytes().any(|b| b.is_ascii_alphanumeric()) {
            emit(word);
        }
    }
}

/// The position of the first byte from `from` of the ASCII `bytes` that is not a letter, digit or
/// `_`, or the length: eight bytes at a time, as most words are shorter.
fn next_non_core(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(word) = bytes.get(i..i + 8) {
        let other = !core_bytes(u64::from_le_bytes(word.try_into().unwrap())) & (ONES * 0x80);
        if other != 0 {
            return i + other.trailing_zeros() as usize / 8;
        }
        i += 8;
    }
    while i < bytes.len() && CLASS[bytes[i] as usize] & CORE != 0 {
        i += 1;
    }
    i
}

/// Bit 7 set in each byte of `x` (eight ASCII bytes) that is a letter, digit or `_`, and no other bit.
#[inline(always)]
fn core_bytes(x: u64) -> u64 {
    // Bit 7 of each byte set where `lo < byte < hi`: for bytes below 0x80 and `hi <= 0x80`, neither
    // the subtraction nor the addition carries out of a byte.
    let between = |x: u64, lo: u64, hi: u64| (ONES * (127 + hi) - x) & (x + ONES * (127 - lo));
    // `| 0x20` maps A–Z onto a–z and no other byte into a–z.
    let core = between(x | (ONES * 0x20), b'a' as u64 - 1, b'z' as u64 + 1)
        | between(x, b'0' as u64 - 1, b'9' as u64 + 1)
        | between(x, b'_' as u64 - 1, b'_' as u64 + 1);
    core & (ONES * 0x80)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::io::BufRead;

    /// The words of `text` as (offset, length) pairs: equal pairs are the same slices.
    fn spans<'a>(text: &'a str, words: impl IntoIterator<Item = &'a str>) -> Vec<(usize, usize)> {
        let base = text.as_ptr() as usize;
        words
            .into_iter()
            .map(|w| (w.as_ptr() as usize - base, w.len()))
            .collect()
    }

    fn ours(text: &str) -> Vec<(usize, usize)> {
        let mut words = Vec::new();
        for_each_word(text, |w| words.push(w));
        spans(text, words)
    }

    fn oracle(text: &str) -> Vec<(usize, usize)> {
        spans(text, text.unicode_words())
    }

    /// `unicode_words` takes a path of its own for all-ASCII text; this is its general one (the one
    /// that cuts the ASCII parts of a text that has other characters), filtered as `unicode_words`
    /// filters.
    fn general_oracle(text: &str) -> Vec<(usize, usize)> {
        spans(
            text,
            text.split_word_bounds()
                .filter(|w| w.chars().any(char::is_alphanumeric)),
        )
    }

    /// Panics, showing where, unless `for_each_word` gives `text` the words of `unicode_words`.
    fn check(text: &str) {
        let (got, want) = (ours(text), oracle(text));
        if got == want {
            return;
        }
        // The first words that differ, and the text around them.
        let k = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        let at = [got.get(k), want.get(k)]
            .into_iter()
            .flatten()
            .map(|s| s.0)
            .min()
            .unwrap_or(0);
        let mut from = at.saturating_sub(60);
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        let mut to = (at + 60).min(text.len());
        while !text.is_char_boundary(to) {
            to += 1;
        }
        let words = |s: &[(usize, usize)]| -> Vec<&str> {
            s.iter()
                .skip(k)
                .take(4)
                .map(|&(at, len)| &text[at..at + len])
                .collect()
        };
        panic!(
            "text of {} bytes, at byte {at}: {:?}\nfor_each_word gives {:?}…\nunicode_words gives {:?}…",
            text.len(),
            &text[from..to],
            words(&got),
            words(&want)
        );
    }

    /// Every string of length 1 to `max_len` over `alphabet`, passed to `f`.
    fn every_string(alphabet: &[&str], max_len: usize, mut f: impl FnMut(&str)) {
        let mut digits = Vec::new();
        let mut text = String::new();
        for len in 1..=max_len {
            digits.clear();
            digits.resize(len, 0);
            loop {
                text.clear();
                digits.iter().for_each(|&d| text.push_str(alphabet[d]));
                f(&text);
                let Some(at) = digits.iter().rposition(|&d| d + 1 < alphabet.len()) else {
                    break;
                };
                digits[at] += 1;
                digits[at + 1..].fill(0);
            }
        }
    }

    #[test]
    fn words_examples_match_unicode_words() {
        let text = "Can't stop: e.g. 3.14, 1,000; x:y foo_bar __ _1 a.b. 1.a 'quoted' \"q\" ab:cd:1";
        let want = [
            "Can't", "stop", "e.g", "3.14", "1,000", "x:y", "foo_bar", "_1", "a.b", "1", "a", "quoted", "q",
            "ab:cd", "1",
        ];
        assert_eq!(text.unicode_words().collect::<Vec<_>>(), want);
        let mut got = Vec::new();
        for_each_word(text, |w| got.push(w));
        assert_eq!(got, want);

        let text = "Café’s naïve 1990–1995 \u{3000} a\u{301}b \t\u{93e}x 東京";
        let want = [
            "Café’s",
            "naïve",
            "1990",
            "1995",
            "a\u{301}b",
            "\t\u{93e}",
            "x",
            "東",
            "京",
        ];
        assert_eq!(text.unicode_words().collect::<Vec<_>>(), want);
        let mut got = Vec::new();
        for_each_word(text, |w| got.push(w));
        assert_eq!(got, want);
    }

    #[test]
    fn words_every_short_ascii_string_matches_unicode_words() {
        let alphabet = [
            "a", "Z", "0", "9", ".", "'", ":", ",", ";", "_", " ", "\t", "\n", "\r", "-", "\"", "@",
        ];
        let mut count = 0;
        let mut padded = String::new();
        every_string(&alphabet, 4, |text| {
            check(text);
            assert_eq!(ours(text), general_oracle(text), "{text:?}");
            // Inside and beside runs longer than the eight bytes read at a time.
            for pad in ["xxxxxxxxx", "999999999", "_________", "         ", "a.b.c.d.e"] {
                for (left, right) in [(pad, pad), ("", pad), (pad, "")] {
                    padded.clear();
                    padded.extend([left, text, right]);
                    check(&padded);
                }
            }
            count += 1;
        });
        assert_eq!(count, 17 + 17 * 17 + 17 * 17 * 17 + 17 * 17 * 17 * 17);
        // Every ASCII character, alone, beside another and between two letters, digits or `_`.
        let all: Vec<String> = (0u8..128).map(|b| char::from(b).to_string()).collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        every_string(&all, 2, |text| {
            check(text);
            assert_eq!(ours(text), general_oracle(text), "{text:?}");
        });
        for mid in &all {
            for outer in ["a", "0", "_", "a0", "0a"] {
                for text in [
                    format!("{outer}{mid}{outer}"),
                    format!("{outer}{mid}{outer}{mid}{outer}"),
                ] {
                    check(&text);
                    assert_eq!(ours(&text), general_oracle(&text), "{text:?}");
                }
            }
        }
    }

    /// The claim the chunking rests on: a run of separator bytes with an ASCII byte before it is
    /// preceded by a boundary, and with an ASCII byte after it is followed by one, whatever else
    /// surrounds it.
    #[test]
    fn words_separator_runs_are_boundaries_beside_ascii() {
        let separators: Vec<String> = (0u8..128)
            .filter(|&b| CLASS[b as usize] & SEPARATOR != 0)
            .map(|b| char::from(b).to_string())
            .collect();
        assert_eq!(separators.len(), 128 - 52 - 10 - 6);
        let sides = [
            "",
            "a",
            "0",
            "_",
            ".",
            "'",
            ":",
            ",",
            "\u{5d0}",
            "\u{3000}",
            "\u{301}",
            "\u{93e}",
            "\u{200d}",
            "\u{ad}",
            "\u{1f600}",
            "\u{1f1fa}",
            "é",
        ];
        let mut runs: Vec<String> = separators.clone();
        for a in ["\r", "\n", " ", "\t", "\""] {
            for b in ["\r", "\n", " ", "\t", "\""] {
                runs.push(format!("{a}{b}"));
            }
        }
        let segments = |s: &str| -> Vec<String> { s.split_word_bounds().map(str::to_owned).collect() };
        let mut checked = 0;
        every_string(&sides, 2, |side| {
            for run in &runs {
                for ascii in ["a", "0", "_", ".", "'", ":"] {
                    // Left: `side` ending in ASCII, then the run, then anything.
                    let left = format!("{side}{ascii}");
                    let text = format!("{left}{run}{side}");
                    let mut cut = segments(&left);
                    cut.extend(segments(&text[left.len()..]));
                    assert_eq!(segments(&text), cut, "{text:?} cut after {left:?}");
                    check(&text);
                    // Right: anything, then the run, then `side` starting with ASCII.
                    let right = format!("{ascii}{side}");
                    let text = format!("{side}{run}{right}");
                    let at = text.len() - right.len();
                    let mut cut = segments(&text[..at]);
                    cut.extend(segments(&right));
                    assert_eq!(segments(&text), cut, "{text:?} cut before {right:?}");
                    check(&text);
                    checked += 2;
                }
            }
        });
        assert!(checked > 100_000);
        // Why the other side must be ASCII: a space takes a following Extend character, and makes a
        // word of it where that is alphabetic; it joins a preceding non-ASCII white space.
        assert_eq!(" \u{93e}".unicode_words().collect::<Vec<_>>(), [" \u{93e}"]);
        assert_eq!(segments("\u{3000} x"), ["\u{3000} ", "x"]);
    }

    /// The pieces the mixed tests draw from: every ASCII class, and non-ASCII characters of the
    /// classes that act across a cut (Extend, Format, ZWJ, white space, quotes, Hebrew, Katakana,
    /// ideographs, emoji, regional indicators, non-ASCII digits and letters).
    const MIXED: [&str; 38] = [
        "a",
        "Z",
        "0",
        "7",
        ".",
        "'",
        ":",
        ",",
        ";",
        "_",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\r\n",
        "-",
        "\"",
        "@",
        "\u{301}",
        "\u{ad}",
        "\u{200d}",
        "\u{a0}",
        "\u{3000}",
        "\u{2019}",
        "\u{30a2}",
        "\u{3042}",
        "\u{4e00}",
        "\u{5d0}",
        "\u{5f4}",
        "\u{1f600}",
        "\u{1f1fa}\u{1f1f8}",
        "\u{1f1fa}",
        "\u{663}",
        "é",
        "\u{ff07}",
        "\u{93e}",
        "\u{2014}",
    ];

    #[test]
    fn words_every_short_mixed_string_matches_unicode_words() {
        let alphabet = [
            "a",
            "0",
            ".",
            "'",
            " ",
            "\t",
            "\n",
            "\"",
            "\u{301}",
            "\u{93e}",
            "\u{200d}",
            "\u{ad}",
            "\u{3000}",
            "\u{5d0}",
            "é",
            "\u{1f600}",
        ];
        every_string(&alphabet, 4, check);
    }

    #[test]
    fn words_random_mixed_strings_match_unicode_words() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0x5eed_0001);
        let ascii = MIXED.iter().take_while(|piece| piece.is_ascii()).count();
        let mut text = String::new();
        for case in 0..300_000 {
            text.clear();
            let len = rng.random_range(0..=40);
            // Half the cases mostly ASCII, as real text is; the others from every piece alike.
            let ascii_bias = case % 2 == 0;
            for _ in 0..len {
                let piece = if ascii_bias && rng.random_range(0..4) != 0 {
                    MIXED[rng.random_range(0..ascii)]
                } else {
                    MIXED[rng.random_range(0..MIXED.len())]
                };
                text.push_str(piece);
            }
            check(&text);
        }
    }

    /// Every text field of the first `lines` JSON lines of `path` (zstd-compressed where it ends so).
    fn check_json_lines(path: &std::path::Path, lines: usize) -> usize {
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let reader: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "zst") {
            let mut decoder = zstd::Decoder::new(file).unwrap();
            decoder.window_log_max(27).unwrap();
            Box::new(decoder)
        } else {
            Box::new(file)
        };
        let mut bytes = 0;
        for line in std::io::BufReader::new(reader).lines().take(lines) {
            let doc: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            for value in doc.as_object().expect("a JSON object per line").values() {
                if let Some(text) = value.as_str() {
                    check(text);
                    bytes += text.len();
                }
            }
        }
        bytes
    }

    #[test]
    fn words_real_text_matches_unicode_words() {
        let Some(data) = crate::testdata::shared_data("") else {
            eprintln!("skipped: words_real_text_matches_unicode_words compares on the shared data");
            return;
        };
        let mut bytes = 0;
        for part in 0..4 {
            bytes += check_json_lines(&data.join(format!("wiki/articles-0{part}.jsonl.zst")), 2000);
        }
        bytes += check_json_lines(&data.join("cacm/docs.jsonl"), usize::MAX);
        let queries = std::fs::read_to_string(data.join("queries/trec05-efficiency.txt")).unwrap();
        queries.lines().for_each(check);
        assert!(bytes > 10_000_000, "only {bytes} bytes of text compared");
    }
}
