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

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`.
pub const LUCENE_ENGLISH_STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to",
    "was", "will", "with",
];

/// Whether `token` is one of [`LUCENE_ENGLISH_STOPWORDS`] (none is longer than five bytes, which spares
/// most tokens the comparisons).
fn is_stopword(token: &str) -> bool {
    token.len() <= 5 && LUCENE_ENGLISH_STOPWORDS.contains(&token)
}

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
        match self.tokenizer {
            Tokenizer::Whitespace => text.split_whitespace().for_each(emit),
            Tokenizer::Standard => {
                let mut lower = String::new();
                for word in text.unicode_words() {
                    for piece in split_long(word) {
                        lower.clear();
                        let piece = strip_possessive(piece);
                        if piece.is_ascii() {
                            // ASCII lowercases byte by byte: the same as `to_lowercase`, without its tables.
                            lower.push_str(piece);
                            lower.make_ascii_lowercase();
                        } else {
                            lower.extend(piece.chars().flat_map(char::to_lowercase));
                        }
                        emit(&lower);
                    }
                }
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
        if token.is_empty() || (self.stopwords && is_stopword(token)) {
            return;
        }
        match self.stemmer {
            Stemmer::None => emit(token),
            stemmer => STEMS.with(|caches| {
                let mut caches = caches.borrow_mut();
                let cache = &mut caches[(stemmer == Stemmer::Porter2) as usize];
                if let Some(stemmed) = cache.get(token) {
                    return emit(stemmed);
                }
                if cache.len() > 1 << 20 {
                    cache.clear();
                }
                let stemmed: Box<str> = stem(stemmer, token).into();
                emit(&stemmed);
                cache.insert(token.into(), stemmed);
            }),
        }
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
        let cut = rest
            .char_indices()
            .nth(MAX_TOKEN_CHARS)
            .map_or(rest.len(), |(i, _)| i);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_at_most_five_bytes() {
        assert!(LUCENE_ENGLISH_STOPWORDS
            .iter()
            .all(|w| w.len() <= 5 && is_stopword(w)));
        assert!(!is_stopword("theirs") && !is_stopword("them"));
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
