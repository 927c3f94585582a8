//! Text analysis shared by documents and queries.
//!
//! The default, [`AnalyzerConfig::english`], follows Anserini's `DefaultEnglishAnalyzer` (Lucene's
//! `EnglishAnalyzer` chain): Unicode word segmentation (UAX #29, as Lucene's `StandardTokenizer`;
//! tokens longer than 255 characters are cut into pieces of 255), removal of English possessives
//! (`'s`, `’s`), lowercasing, Lucene's 33-word English stopword list, and Porter stemming. The Porter
//! stemmer is Martin Porter's reference algorithm (the one Lucene's `PorterStemFilter` implements),
//! from the `nltk-porter` crate in its `Martin` mode; `porter2` (Snowball English, as PISA and tantivy
//! use) comes from `rust-stemmers`. `whitespace` splits on white space only and changes nothing, for
//! pre-tokenized text (Anserini's `-pretokenized`).

use std::cell::RefCell;
use std::fmt;
use std::hash::Hasher;
use std::sync::{PoisonError, RwLock};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::strmap::StrMap;

/// The stopword list and its `match`, written from one list of words so that the two cannot differ.
macro_rules! stopwords {
    ($($word:literal),* $(,)?) => {
        /// Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`.
        pub const LUCENE_ENGLISH_STOPWORDS: [&str; [$($word),*].len()] = [$($word),*];

        /// Whether `token` is one of [`LUCENE_ENGLISH_STOPWORDS`]: a `match`, which compares by length
        /// first and then a few bytes, where a scan of the list called `memcmp` once per word of the
        /// token's length.
        fn is_stopword(token: &str) -> bool {
            matches!(token, $($word)|*)
        }
    };
}

stopwords!(
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to",
    "was", "will", "with",
);

/// Longest token StandardTokenizer emits; longer runs are split.
pub const MAX_TOKEN_CHARS: usize = 255;

/// How text becomes terms. Stored in the index so queries are analysed as documents were.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalyzerConfig {
    /// How text is cut into tokens.
    pub tokenizer: Tokenizer,
    /// Lucene's English stopwords are removed.
    pub stopwords: bool,
    /// Which stemmer runs last.
    pub stemmer: Stemmer,
}

/// Token splitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tokenizer {
    /// Unicode word boundaries, possessives removed, lowercased.
    Standard,
    /// White space only, text unchanged.
    Whitespace,
}

/// Stemming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stemmer {
    /// Porter (1980) as Lucene's PorterStemFilter.
    Porter,
    /// Snowball English (Porter2).
    Porter2,
    /// No stemming.
    None,
}

impl Stemmer {
    /// Parses a command-line name: `porter`, `porter2` or `none`.
    pub fn by_name(name: &str) -> Result<Self, String> {
        match name {
            "porter" => Ok(Stemmer::Porter),
            "porter2" => Ok(Stemmer::Porter2),
            "none" => Ok(Stemmer::None),
            _ => Err(format!(
                "unknown stemmer '{name}': expected porter, porter2 or none"
            )),
        }
    }
}

impl AnalyzerConfig {
    /// Anserini's default English analysis.
    pub fn english() -> Self {
        AnalyzerConfig {
            tokenizer: Tokenizer::Standard,
            stopwords: true,
            stemmer: Stemmer::Porter,
        }
    }

    /// Pre-tokenized text: split on white space, nothing else.
    pub fn whitespace() -> Self {
        AnalyzerConfig {
            tokenizer: Tokenizer::Whitespace,
            stopwords: false,
            stemmer: Stemmer::None,
        }
    }

    /// The analyzer `name` (`english` or `whitespace`) with the index options of `warpsearch index` and
    /// the Python package's `Index.build`: `stemmer` (`porter`, `porter2` or `none`) and whether Lucene's
    /// stopwords are kept. The whitespace analyzer changes no token, so it ignores both.
    pub fn with_options(name: &str, stemmer: &str, keep_stopwords: bool) -> Result<Self, String> {
        let mut a = Self::by_name(name)?;
        if a.tokenizer == Tokenizer::Standard {
            a.stemmer = Stemmer::by_name(stemmer)?;
            a.stopwords = !keep_stopwords;
        }
        Ok(a)
    }

    /// Parses a command-line name: `english` or `whitespace`.
    pub fn by_name(name: &str) -> Result<Self, String> {
        match name {
            "english" | "default" => Ok(Self::english()),
            "whitespace" | "pretokenized" => Ok(Self::whitespace()),
            _ => Err(format!(
                "unknown analyzer '{name}': expected english or whitespace"
            )),
        }
    }

    /// Calls `emit` with every term of `text`, in order.
    pub fn for_each_term(&self, text: &str, mut emit: impl FnMut(&str)) {
        self.for_each_token(text, |token| self.finish_token(token, &mut emit));
    }

    /// Calls `emit` with every token of `text`, in order: the words cut, possessives removed and
    /// lowercased (standard), or the text's white-space-separated pieces. [`AnalyzerConfig::finish_token`]
    /// makes each into at most one term; the two are [`AnalyzerConfig::for_each_term`].
    pub fn for_each_token(&self, text: &str, mut emit: impl FnMut(&str)) {
        let mut lower = String::new();
        self.for_each_piece(text, |piece| emit(self.token_of(piece, &mut lower)));
    }

    /// Calls `emit` with every piece of `text` as the tokenizer cuts it, before it becomes a token
    /// ([`AnalyzerConfig::token_of`]): the words, each longer one cut into pieces of
    /// [`MAX_TOKEN_CHARS`] (standard), or the white-space-separated pieces.
    fn for_each_piece<'t>(&self, text: &'t str, mut emit: impl FnMut(&'t str)) {
        match self.tokenizer {
            Tokenizer::Whitespace => text.split_whitespace().for_each(emit),
            Tokenizer::Standard => {
                crate::words::for_each_word(text, |word| split_long(word).for_each(&mut emit));
            }
        }
    }

    /// The token of a piece: the piece itself (whitespace), or its possessive removed and lowercased
    /// into `buf` (standard).
    fn token_of<'p>(&self, piece: &'p str, buf: &'p mut String) -> &'p str {
        match self.tokenizer {
            Tokenizer::Whitespace => piece,
            Tokenizer::Standard => {
                buf.clear();
                let piece = strip_possessive(piece);
                if piece.is_ascii() {
                    // ASCII lowercases byte by byte: the same as `to_lowercase`, without its tables.
                    buf.push_str(piece);
                    buf.make_ascii_lowercase();
                } else {
                    buf.extend(piece.chars().flat_map(char::to_lowercase));
                }
                buf
            }
        }
    }

    /// The terms of `text`, in order.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_term(text, |t| out.push(t.to_owned()));
        out
    }

    /// Calls `emit` with the term of `token` (one of [`AnalyzerConfig::for_each_token`]'s), or not at
    /// all where the token is empty or a stopword: the stem, or the token unchanged without a stemmer.
    pub fn finish_token(&self, token: &str, emit: &mut impl FnMut(&str)) {
        if self.dropped(token) {
            return;
        }
        if self.stemmer == Stemmer::None {
            return emit(token);
        }
        STEMS.with(|caches| {
            let mut caches = caches.borrow_mut();
            let cache = &mut caches[(self.stemmer == Stemmer::Porter2) as usize];
            if let Some(stemmed) = cache.get(token) {
                return emit(stemmed);
            }
            let stemmed = stem(self.stemmer, token);
            if cache.len() > 1 << 20 {
                cache.clear();
            }
            emit(&stemmed);
            cache.insert(token.into(), stemmed.into());
        })
    }

    /// Whether `token` makes no term: it is empty, or a stopword that this analyzer drops. Decided
    /// before any cache of stems, which are shared by analyzers that keep stopwords and those that
    /// drop them.
    fn dropped(&self, token: &str) -> bool {
        token.is_empty() || (self.stopwords && is_stopword(token))
    }
}

impl fmt::Display for AnalyzerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::english() {
            f.write_str("english")
        } else if *self == Self::whitespace() {
            f.write_str("whitespace")
        } else {
            write!(f, "{:?}", self)
        }
    }
}

thread_local! {
    /// Stemming is the slowest step of analysis and vocabularies are small: cache stems per thread.
    /// Token to stem, one map for Porter and one for Porter2.
    static STEMS: RefCell<[FxHashMap<Box<str>, Box<str>>; 2]> = RefCell::default();
    static PORTER: nltk_porter::PorterStemmer = nltk_porter::PorterStemmer::new(nltk_porter::Mode::Martin);
    static PORTER2: rust_stemmers::Stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
}

/// Tokens' stems shared by every thread, one map per stemmer, in shards: each of a build's threads
/// meets every distinct token, and without them each would stem it again.
static SHARED_STEMS: [SharedStems; 2] = [SharedStems::new(), SharedStems::new()];

/// Shards of token → stem maps, each behind its own lock, so that threads rarely wait for one another.
struct SharedStems {
    shards: [RwLock<Option<StemShard>>; STEM_SHARDS],
}

/// Tokens to their stems.
type StemShard = FxHashMap<Box<str>, Box<str>>;

const STEM_SHARDS: usize = 64;
/// Most tokens a shard keeps (two million in all, some 200 MiB): past it a new token is stemmed each
/// time it is met.
const STEM_SHARD_TOKENS: usize = 1 << 15;

impl SharedStems {
    const fn new() -> SharedStems {
        SharedStems {
            shards: [const { RwLock::new(None) }; STEM_SHARDS],
        }
    }

    /// Calls `with` on the stem of `token` by `stemmer`, stemming it where no thread has yet.
    fn with_stem<R>(&self, stemmer: Stemmer, token: &str, with: impl FnOnce(&str) -> R) -> R {
        let mut h = rustc_hash::FxHasher::default();
        h.write(token.as_bytes());
        let shard = &self.shards[(h.finish() >> 58) as usize % STEM_SHARDS];
        {
            let held = shard.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(stemmed) = held.as_ref().and_then(|map| map.get(token)) {
                return with(stemmed);
            }
        }
        let stemmed = stem(stemmer, token);
        let mut held = shard.write().unwrap_or_else(PoisonError::into_inner);
        let map = held.get_or_insert_with(StemShard::default);
        if map.len() < STEM_SHARD_TOKENS {
            map.insert(token.into(), stemmed.as_str().into());
        }
        drop(held);
        with(&stemmed)
    }

    fn clear(&self) {
        for shard in &self.shards {
            *shard.write().unwrap_or_else(PoisonError::into_inner) = None;
        }
    }
}

/// Calls `with` on the term of `token` under `analyzer` (as [`AnalyzerConfig::finish_token`] makes it;
/// None where it makes none), stemmed once for every thread.
fn shared_term_of<R>(analyzer: AnalyzerConfig, token: &str, with: impl FnOnce(Option<&str>) -> R) -> R {
    if analyzer.dropped(token) {
        return with(None);
    }
    match analyzer.stemmer {
        Stemmer::None => with(Some(token)),
        stemmer => {
            SHARED_STEMS[(stemmer == Stemmer::Porter2) as usize]
                .with_stem(stemmer, token, |stemmed| with(Some(stemmed)))
        }
    }
}

/// Frees the stems shared by a build's threads.
pub(crate) fn release_shared_stems() {
    SHARED_STEMS.iter().for_each(SharedStems::clear);
}

fn stem(stemmer: Stemmer, token: &str) -> String {
    match stemmer {
        Stemmer::Porter => PORTER.with(|p| p.stem(token)),
        Stemmer::Porter2 => PORTER2.with(|p| p.stem(token).into_owned()),
        Stemmer::None => token.to_owned(),
    }
}

fn split_long(word: &str) -> impl Iterator<Item = &str> {
    let mut rest = word;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // A word of at most MAX_TOKEN_CHARS bytes has at most as many characters: no need to count them.
        let cut = if rest.len() <= MAX_TOKEN_CHARS {
            rest.len()
        } else {
            rest.char_indices()
                .nth(MAX_TOKEN_CHARS)
                .map_or(rest.len(), |(i, _)| i)
        };
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// Lucene's EnglishPossessiveFilter: drops a trailing `'s`/`'S` after ', U+2019 or U+FF07.
fn strip_possessive(token: &str) -> &str {
    let mut chars = token.char_indices().rev();
    match (chars.next(), chars.next()) {
        (Some((_, 's' | 'S')), Some((i, '\'' | '\u{2019}' | '\u{FF07}'))) => &token[..i],
        _ => token,
    }
}

/// Pieces of text already met (words as cut, before they are lowercased), each mapped to the number
/// of its term (or to [`Vocabulary::STOP`]), and the terms by number: analysis through a vocabulary
/// lowercases and stems each distinct piece once, and hands out numbers, by which a document's terms
/// are counted without comparing strings.
#[derive(Debug)]
pub struct Vocabulary {
    analyzer: AnalyzerConfig,
    pieces: StrMap<u32>,
    max_pieces: usize,
    names: StrMap<u32>,
    terms: Vec<Box<str>>,
}

impl Vocabulary {
    /// What a stopword's (or an empty token's) number is: it has no term.
    pub const STOP: u32 = u32::MAX;
    /// Most pieces held by default (some 32 MiB of map).
    const MAX_PIECES: usize = 1 << 20;

    /// An empty vocabulary of `analyzer`'s terms.
    pub fn new(analyzer: AnalyzerConfig) -> Vocabulary {
        Self::holding(analyzer, Self::MAX_PIECES)
    }

    /// An empty vocabulary that holds at most `max_pieces` pieces.
    fn holding(analyzer: AnalyzerConfig, max_pieces: usize) -> Vocabulary {
        Vocabulary {
            analyzer,
            max_pieces,
            pieces: StrMap::default(),
            names: StrMap::default(),
            terms: Vec::new(),
        }
    }

    /// The analyzer whose terms it numbers.
    pub fn analyzer(&self) -> AnalyzerConfig {
        self.analyzer
    }

    /// Calls `emit` with the number of every term of `text`, in order: the terms of
    /// [`AnalyzerConfig::for_each_term`]. A piece of text (a word as cut) makes the same term wherever it
    /// is met, so pieces are looked up as cut, before they are lowercased.
    pub fn for_each_term(&mut self, text: &str, mut emit: impl FnMut(u32)) {
        let analyzer = self.analyzer;
        let mut lower = String::new();
        analyzer.for_each_piece(text, |piece| {
            let n = match self.pieces.get(piece) {
                Some(&n) => n,
                None => {
                    let n = self.number(analyzer.token_of(piece, &mut lower));
                    // Text meets its frequent pieces first: once the map is full, a new piece (a rare
                    // one) is analysed each time it is met rather than pushing out a frequent one.
                    if self.pieces.len() < self.max_pieces {
                        self.pieces.insert(piece, n);
                    }
                    n
                }
            };
            if n != Self::STOP {
                emit(n);
            }
        });
    }

    /// The number of the term of a token not met before, the term numbered where new.
    fn number(&mut self, token: &str) -> u32 {
        let (names, terms) = (&mut self.names, &mut self.terms);
        shared_term_of(self.analyzer, token, |term| match term {
            None => Self::STOP,
            Some(term) => match names.get(term) {
                Some(&n) => n,
                None => {
                    let n = terms.len() as u32;
                    names.insert(term, n);
                    terms.push(term.into());
                    n
                }
            },
        })
    }

    /// The term numbered `n`.
    pub fn term(&self, n: u32) -> &str {
        &self.terms[n as usize]
    }

    /// Terms numbered.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether no term is numbered yet.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stopword_match_is_the_list() {
        // Every word of the list, and every prefix and extension of one, is a stopword exactly when listed.
        for w in LUCENE_ENGLISH_STOPWORDS {
            let mut near: Vec<String> = (0..w.len()).map(|i| w[..i].to_owned()).collect();
            near.extend(["s", "e", "a", "y"].map(|x| format!("{w}{x}")));
            near.push(w.to_uppercase());
            near.push(w.to_owned());
            for t in near {
                assert_eq!(
                    is_stopword(&t),
                    LUCENE_ENGLISH_STOPWORDS.contains(&t.as_str()),
                    "{t:?}"
                );
            }
        }
    }

    #[test]
    fn english_matches_lucene_chain() {
        let a = AnalyzerConfig::english();
        assert_eq!(
            a.terms("The Einstein's theories of Relativity"),
            ["einstein", "theori", "rel"]
        );
        assert_eq!(a.terms("caresses ponies running"), ["caress", "poni", "run"]);
        assert_eq!(
            a.terms("it is not the 3.14 version, O’Neil’s"),
            ["3.14", "version", "o’neil"]
        );
        assert_eq!(a.terms(""), Vec::<String>::new());
        assert_eq!(a.terms("a the of"), Vec::<String>::new());
    }

    #[test]
    fn long_tokens_are_split_at_255_chars() {
        let word = "x".repeat(600);
        let a = AnalyzerConfig {
            stemmer: Stemmer::None,
            ..AnalyzerConfig::english()
        };
        let lens: Vec<usize> = a.terms(&word).iter().map(|t| t.len()).collect();
        assert_eq!(lens, [255, 255, 90]);
    }

    #[test]
    fn whitespace_keeps_text() {
        assert_eq!(
            AnalyzerConfig::whitespace().terms(" The  of\tX's "),
            ["The", "of", "X's"]
        );
    }

    #[test]
    fn a_vocabulary_numbers_the_analyzers_terms() {
        use rand::{Rng, SeedableRng};
        let pool = [
            "The",
            "the",
            "THE",
            "running",
            "Runs",
            "Einstein's",
            "O’Neil’s",
            "it's",
            "3.14",
            "U.S.A.",
            "can't",
            "foo_bar",
            "naïve",
            "ÉCOLE",
            "straße",
            "東京",
            "a",
            "of",
            "x",
            "generously",
            "ponies",
            "İstanbul",
        ];
        let long = "y".repeat(300);
        let analyzers = [
            AnalyzerConfig::english(),
            AnalyzerConfig::with_options("english", "porter2", false).unwrap(),
            AnalyzerConfig::with_options("english", "none", true).unwrap(),
            AnalyzerConfig::whitespace(),
        ];
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        for (analyzer, max_pieces) in analyzers.into_iter().flat_map(|a| [(a, 1 << 20), (a, 5)]) {
            // One vocabulary for every text: later texts meet its pieces again, held or (beyond
            // `max_pieces`) not.
            let mut v = Vocabulary::holding(analyzer, max_pieces);
            for _ in 0..300 {
                let n = rng.random_range(0..40);
                let text: Vec<&str> = (0..n)
                    .map(|_| match rng.random_range(0..30) {
                        0 => long.as_str(),
                        1 => ", ",
                        2 => "\n",
                        i => pool[i % pool.len()],
                    })
                    .collect();
                let text = text.join(" ");
                let mut numbers = Vec::new();
                v.for_each_term(&text, |n| numbers.push(n));
                let got: Vec<&str> = numbers.iter().map(|&n| v.term(n)).collect();
                assert_eq!(got, analyzer.terms(&text), "{analyzer} on {text:?}");
            }
        }
    }

    #[test]
    fn analyzers_that_keep_stopwords_and_those_that_drop_them_share_no_terms() {
        // The stems are cached per thread and shared between threads, by stemmer: a stopword an
        // analyzer keeps must not become a term of one that drops it, nor the other way round.
        let keep = AnalyzerConfig::with_options("english", "porter", true).unwrap();
        let drop = AnalyzerConfig::english();
        let text = "the running of the ponies";
        for (first, second) in [(keep, drop), (drop, keep), (keep, drop)] {
            for a in [first, second] {
                let want: &[&str] = if a == keep {
                    &["the", "run", "of", "the", "poni"]
                } else {
                    &["run", "poni"]
                };
                assert_eq!(a.terms(text), want, "{a}");
                let mut v = Vocabulary::new(a);
                let mut got = Vec::new();
                v.for_each_term(text, |n| got.push(n));
                let got: Vec<&str> = got.iter().map(|&n| v.term(n)).collect();
                assert_eq!(got, want, "{a}, through a vocabulary");
            }
        }
    }

    #[test]
    fn vocabularies_on_many_threads_agree_with_the_analyzer() {
        // Threads meet the same new tokens at once: each stems what no other has stored yet, and
        // every thread's terms are the analyzer's, for both stemmers, whose stems differ.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        let words: Vec<String> = (0..3000)
            .map(|_| {
                let len = rng.random_range(1..12);
                let word: String = (0..len).map(|_| rng.random_range(b'a'..=b'z') as char).collect();
                let suffix = ["", "s", "ing", "ly", "ness", "ational", "ously"][rng.random_range(0..7)];
                word + suffix
            })
            .collect();
        let text = words.join(" ");
        let analyzers = [
            AnalyzerConfig::english(),
            AnalyzerConfig::with_options("english", "porter2", false).unwrap(),
        ];
        assert_ne!(analyzers[0].terms(&text), analyzers[1].terms(&text));
        release_shared_stems();
        std::thread::scope(|scope| {
            for t in 0..8 {
                let text = &text;
                scope.spawn(move || {
                    for a in [analyzers[t % 2], analyzers[(t + 1) % 2]] {
                        let mut v = Vocabulary::new(a);
                        let mut got = Vec::new();
                        v.for_each_term(text, |n| got.push(n));
                        let got: Vec<&str> = got.iter().map(|&n| v.term(n)).collect();
                        assert_eq!(got, a.terms(text), "{a} on thread {t}");
                    }
                });
            }
        });
    }

    #[test]
    fn porter2_is_available() {
        let a = AnalyzerConfig {
            stemmer: Stemmer::Porter2,
            ..AnalyzerConfig::english()
        };
        assert_eq!(a.terms("generously"), ["generous"]);
    }

    #[test]
    fn options_by_name() {
        let a = AnalyzerConfig::with_options("english", "none", true).unwrap();
        assert_eq!((a.stemmer, a.stopwords), (Stemmer::None, false));
        assert_eq!(
            AnalyzerConfig::with_options("whitespace", "porter2", false),
            Ok(AnalyzerConfig::whitespace())
        );
        let e = AnalyzerConfig::with_options("english", "lovins", false).unwrap_err();
        assert_eq!(e, "unknown stemmer 'lovins': expected porter, porter2 or none");
        assert!(AnalyzerConfig::with_options("french", "porter", false).is_err());
    }
}
