//! Sharded indexes: a collection split by contiguous docID ranges into shards that score with one
//! set of collection statistics, so that each shard's scores are exactly the single index's for its
//! documents and an exact merge of the shards' top k is the single index's top k.
//!
//! A sharded index is a directory (`index --shards N`) holding its head and one directory per shard
//! ([`crate::format::files::shard_dir`]). The head is an index without posting lists: the
//! collection's statistics in `meta.json` (with the list of shards), its dictionary with each term's
//! document frequency in the collection (`terms.fst`, `terms.bin`), its document table and stored
//! documents, so that queries are analysed and documents named against the collection. Each shard is
//! a complete index of its documents (numbered from 0) whose `meta.json` carries the collection's
//! statistics ([`crate::format::ShardOf`]): its BM25 (N, mean length) and its stored bounds use them.
//! A query's term weights come from the collection's document frequencies, which the head holds
//! (`warpsearch_query`'s collection terms carry them to each shard).
//!
//! This module checks a head (`check_head`), opens and checks its shards (`open_shards`) and maps
//! the head's term ordinals to each shard's ([`Shard::local_term`]); [`write`] writes a sharded index
//! from a build. [`Index::open`] (`open.rs`) calls it for a head.

mod write;

use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{corrupt, IndexError, Result};
use crate::format::{files, CollectionStats, TermRecord};
pub use crate::reader::Shard;
use crate::reader::{Index, ABSENT};

pub(crate) use write::{cut, entries, write, ListSource, ShardWriters, ShardedOutput};
pub use write::{ShardPart, ShardSplit, Sharding};

/// The statistics of the collection a head describes: what each of its shards must score with.
pub fn collection_stats(head: &Index) -> CollectionStats {
    let m = head.meta();
    CollectionStats {
        num_docs: m.num_docs,
        total_doc_len: m.total_doc_len,
        avg_doc_len: m.avg_doc_len,
        static_scores: m.static_scores,
    }
}

/// The head's own structure: term records with document frequencies only, no lists, shards that
/// cover the documents in order.
pub(crate) fn check_head(head: &Index) -> Result<()> {
    let m = head.meta();
    let at = |f: (&str, &[u8; 8])| head.dir().join(f.0);
    let records: &[TermRecord] = head.term_records();
    if records.len() as u64 != m.num_terms {
        return Err(corrupt(
            at(files::TERMS),
            format!(
                "{} term records, {} says {}",
                records.len(),
                files::META.0,
                m.num_terms
            ),
        ));
    }
    if !head.block_metas().is_empty() || !head.words().is_empty() {
        return Err(corrupt(
            at(files::POSTINGS),
            "a sharded index's head holds no posting lists: rebuild the index",
        ));
    }
    if let Some(t) = records.iter().position(|r| r.df == 0 || r.df as u64 > m.num_docs) {
        return Err(corrupt(
            at(files::TERMS),
            format!(
                "{} has a document frequency out of range",
                head.term_name(t as u32)
            ),
        ));
    }
    let postings: u64 = records.par_iter().map(|r| r.df as u64).sum();
    if postings != m.num_postings {
        return Err(corrupt(
            at(files::TERMS),
            "posting count differs from the metadata",
        ));
    }
    let shards = m.shards.as_deref().unwrap_or_default();
    let mut next = 0u64;
    for s in shards {
        if !files::is_shard_dir(&s.dir) || s.first_doc != next || s.num_docs == 0 {
            return Err(corrupt(
                at(files::META),
                format!(
                    "the shards must be directories shard-NNNN of contiguous, non-empty docID ranges \
                     from 0; {} starts at {} with {} documents, expected a start at {next}: rebuild the \
                     index",
                    s.dir, s.first_doc, s.num_docs
                ),
            ));
        }
        next += s.num_docs;
    }
    if shards.is_empty() || next != m.num_docs {
        return Err(corrupt(
            at(files::META),
            format!(
                "the shards hold {next} documents, the collection {}: rebuild the index",
                m.num_docs
            ),
        ));
    }
    Ok(())
}

/// Opens every shard of `head` (on all cores) and checks that they belong together: each is a shard
/// of this very build (its `set` is the head's build identity), at its place (number, first docID,
/// document count and lengths as the head's table has them), scoring with the head's collection
/// statistics, with the head's analysis, codec and BM25 parameters; and the shards' document
/// frequencies of every term sum to the head's.
pub(crate) fn open_shards(head: &Index) -> Result<Vec<Shard>> {
    let entries = head.meta().shards.clone().unwrap_or_default();
    let n = entries.len();
    // A head built alone (`index --part head`) lists shards still to be built: the first is named.
    if let Some((i, dir)) = entries
        .iter()
        .map(|e| head.dir().join(&e.dir))
        .enumerate()
        .find(|(_, dir)| !dir.exists())
    {
        return Err(IndexError::Invalid(format!(
            "{}: shard {i} of {n} is not built yet ({} is missing): build it with `warpsearch index \
             --input … --output {} --shards {n} --part {i}` (the head's input and options)",
            head.dir().display(),
            dir.display(),
            head.dir().display()
        )));
    }
    let opened: Vec<Shard> = entries
        .par_iter()
        .enumerate()
        .map(|(i, entry)| {
            let dir = head.dir().join(&entry.dir);
            let index = Index::open_member(&dir)?;
            check_member(head, &index, i, n, entry.first_doc, entry.num_docs)?;
            let local = local_terms(head, &index)?;
            Ok(Shard {
                index: Arc::new(index),
                first_doc: entry.first_doc as u32,
                local,
            })
        })
        .collect::<Result<_>>()?;
    // Every head term's document frequency is the sum of the shards'.
    let records = head.term_records();
    let bad = (0..records.len()).into_par_iter().find_first(|&t| {
        let sum: u64 = opened
            .iter()
            .filter_map(|s| {
                s.local_term(t as u32)
                    .map(|l| s.index.term_records()[l as usize].df as u64)
            })
            .sum();
        sum != records[t].df as u64
    });
    if let Some(t) = bad {
        return Err(IndexError::Invalid(format!(
            "{}: the shards' document frequencies of {} do not sum to the collection's: the shards \
             come from different builds; rebuild the index with `warpsearch index --shards N`",
            head.dir().display(),
            head.term_name(t as u32)
        )));
    }
    Ok(opened)
}

/// Whether `index` is shard `i` of `n` of `head`, as the head lists it.
fn check_member(
    head: &Index,
    index: &Index,
    i: usize,
    n: usize,
    first_doc: u64,
    num_docs: u64,
) -> Result<()> {
    let dir = index.dir();
    let m = index.meta();
    let Some(s) = &m.shard else {
        return Err(IndexError::Invalid(format!(
            "{} is an index with statistics of its own (documents, document frequencies, lengths), not \
             a shard of {}: shards scoring with their own statistics give other scores than the single \
             index; rebuild the collection with `warpsearch index --shards N`",
            dir.display(),
            head.dir().display()
        )));
    };
    let refuse = |what: String| {
        Err(IndexError::Invalid(format!(
            "{} does not belong to the sharded index {}: {what}; rebuild the collection with \
             `warpsearch index --shards N`",
            dir.display(),
            head.dir().display()
        )))
    };
    if s.set != head.build_id() {
        return refuse("it was written by another build (its set identity differs from the head's)".into());
    }
    if s.shard as usize != i || s.shards as usize != n || s.first_doc != first_doc || m.num_docs != num_docs {
        return refuse(format!(
            "it says it is shard {} of {} from document {} with {} documents, the head lists shard {i} \
             of {n} from document {first_doc} with {num_docs}",
            s.shard, s.shards, s.first_doc, m.num_docs
        ));
    }
    if s.collection != collection_stats(head) {
        return refuse("its collection statistics differ from the head's".into());
    }
    let h = head.meta();
    if m.analyzer != h.analyzer || m.codec != h.codec || m.bm25 != h.bm25 || m.doc_order != h.doc_order {
        return refuse(
            "its analyzer, codec, BM25 parameters or document order differ from the head's".into(),
        );
    }
    let (a, b) = (first_doc as usize, (first_doc + num_docs) as usize);
    if index.doc_lens() != &head.doc_lens()[a..b] {
        return refuse("its document lengths differ from the head's".into());
    }
    Ok(())
}

/// The shard's ordinal of every head term (a merge of the two dictionaries in byte order); every term
/// of the shard must be the head's.
fn local_terms(head: &Index, shard: &Index) -> Result<Vec<u32>> {
    let mut local = vec![ABSENT; head.meta().num_terms as usize];
    let mut heads = head.terms();
    let mut current = heads.next();
    for (term, id) in shard.terms() {
        while current.as_ref().is_some_and(|(t, _)| *t < term) {
            current = heads.next();
        }
        match &current {
            Some((t, g)) if *t == term => local[*g as usize] = id,
            _ => {
                return Err(IndexError::Invalid(format!(
                    "{}: term '{}' is not in the head's dictionary ({}): the shard belongs to another \
                     build; rebuild the collection with `warpsearch index --shards N`",
                    shard.dir().display(),
                    String::from_utf8_lossy(&term),
                    head.dir().display()
                )))
            }
        }
    }
    Ok(local)
}
