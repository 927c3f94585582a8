//! Query terms looked up through a per-thread cache of tokens.
//!
//! Analysing a query and finding its terms in the dictionary cost 2.8 µs a TREC 2005 query on the
//! Wikipedia passages (serially, on the development machine): the FST's lookup about 600 ns a term
//! (its nodes lie all over a dictionary of millions of terms), stemming and the stopword test most of
//! the rest. That is 8-9% of a server's CPU for AND queries, and `search_batch`'s analysis pass in
//! Python. Query vocabularies are small, so each thread keeps what its recent tokens became (skipped,
//! a term's ordinal, or a term the index lacks) for the index it last served: a repeated token costs
//! one hash lookup. An index is read-only, so a cached outcome is what the lookup would return again.

use std::cell::RefCell;

use rustc_hash::FxHashMap;

use crate::reader::Index;

/// A query term as the index knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// A term of the index: its ordinal.
    Known(u32),
    /// A term the index does not have.
    Unknown(&'a str),
}

/// What one token became.
enum Outcome {
    /// Empty or a stopword: no term.
    Skip,
    Known(u32),
    Unknown(Box<str>),
}

impl Outcome {
    fn emit(&self, emit: &mut impl FnMut(Lookup<'_>)) {
        match self {
            Outcome::Skip => {}
            Outcome::Known(id) => emit(Lookup::Known(*id)),
            Outcome::Unknown(term) => emit(Lookup::Unknown(term)),
        }
    }
}

/// One thread's cache: the index it serves (its [`Index::uid`]) and its tokens' outcomes.
#[derive(Default)]
struct Tokens {
    index: u64,
    outcomes: FxHashMap<Box<str>, Outcome>,
}

/// Tokens a thread keeps (about 1.5 MiB at most); the cache starts over when it is full.
const MAX_TOKENS: usize = 1 << 15;

thread_local! {
    static TOKENS: RefCell<Tokens> = RefCell::default();
}

impl Index {
    /// Calls `emit` with every term of `text` (analysed as the index's documents were), in order,
    /// with its ordinal or as unknown: [`crate::AnalyzerConfig::for_each_term`] and
    /// [`Index::term_id`], through the thread's cache of tokens.
    pub fn for_each_query_term(&self, text: &str, mut emit: impl FnMut(Lookup<'_>)) {
        TOKENS.with(|cell| match cell.try_borrow_mut() {
            Ok(mut tokens) => self.lookup_cached(&mut tokens, text, &mut emit),
            // Called again from `emit`: without the cache.
            Err(_) => self.lookup_uncached(text, &mut emit),
        })
    }

    fn lookup_cached(&self, tokens: &mut Tokens, text: &str, emit: &mut impl FnMut(Lookup<'_>)) {
        if tokens.index != self.uid() {
            tokens.outcomes.clear();
            tokens.index = self.uid();
        }
        let analyzer = &self.meta().analyzer;
        analyzer.for_each_token(text, |token| {
            if let Some(outcome) = tokens.outcomes.get(token) {
                return outcome.emit(emit);
            }
            let outcome = self.outcome(token);
            outcome.emit(emit);
            if tokens.outcomes.len() >= MAX_TOKENS {
                tokens.outcomes.clear();
            }
            tokens.outcomes.insert(token.into(), outcome);
        });
    }

    fn lookup_uncached(&self, text: &str, emit: &mut impl FnMut(Lookup<'_>)) {
        let analyzer = &self.meta().analyzer;
        analyzer.for_each_token(text, |token| self.outcome(token).emit(emit));
    }

    /// What `token` becomes: its term looked up, or nothing.
    fn outcome(&self, token: &str) -> Outcome {
        let mut outcome = Outcome::Skip;
        self.meta().analyzer.finish_token(token, &mut |term| {
            outcome = match self.term_id(term) {
                Some(id) => Outcome::Known(id),
                None => Outcome::Unknown(term.into()),
            }
        });
        outcome
    }
}
