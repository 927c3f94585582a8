//! A query of a sharded index as each shard answers it: analysed once against the head (the
//! collection's dictionary), then given to each shard in the shard's term ordinals, with the
//! collection's view of every term ([`crate::Query::collection`]) so that the shard weighs its terms
//! as the single index would.

use warpsearch_index::shards::Shard;
use warpsearch_index::Index;

use crate::query::{CollectionTerm, Query};

/// `query`, analysed against the sharded index `head`, as `shard` (one of the head's) answers it:
/// the terms it has in its ordinals, those it lacks among the unknown (AND then matches nothing in
/// it, as no document of it has them), and every term's collection document frequency and count.
pub fn for_shard(head: &Index, shard: &Shard, query: &Query) -> Query {
    let records = head.term_records();
    let mut out = Query {
        terms: Vec::with_capacity(query.terms.len()),
        unknown: query.unknown.clone(),
        collection: Vec::with_capacity(query.terms.len()),
    };
    for &(id, count) in &query.terms {
        let local = shard.local_term(id);
        out.collection.push(CollectionTerm {
            df: records[id as usize].df as u64,
            count,
            here: local.is_some(),
        });
        match local {
            Some(l) => out.terms.push((l, count)),
            None => out.unknown.push(format!("#{id}")),
        }
    }
    out
}
