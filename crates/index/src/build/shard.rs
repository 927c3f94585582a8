//! One shard of a sharded index built on its own (`index --shards N --part i`), after its head
//! (`--part head`): the collection is read again, each line parsed for its id, and only the lines
//! whose document the head numbers within the shard's docID range are analysed and inverted. The
//! shard is written with the head's rows of its documents, the collection's statistics and the
//! head's identity, so that its files are those a whole build writes (build identities aside), and
//! the head's checks on opening accept it.

use std::path::Path;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::analyze::analyze_if;
use super::{detect_schema, schema, BuildOptions, BuildReport, Skipped, Source};
use crate::error::{IndexError, Result};
use crate::format::ShardOf;
use crate::reader::Index;
use crate::shards::{collection_stats, Sharding};
use crate::writer::{DocIds, DocTable, IndexWriter, WriterOptions};

/// Builds shard `shard` of the sharded index whose head is at `head_dir` from `source`, the
/// collection the head was built from.
pub(super) fn build_shard(
    source: Source<'_>,
    head_dir: &Path,
    opts: &BuildOptions,
    sharding: &Sharding,
    shard: usize,
) -> Result<BuildReport> {
    let started = Instant::now();
    let head = Index::open_member(head_dir).map_err(|e| {
        IndexError::Invalid(format!(
            "{}: no head of a sharded index to build shard {shard} of ({e}); build it first with \
             `warpsearch index --shards N --part head`",
            head_dir.display()
        ))
    })?;
    let m = head.meta();
    let Some(entries) = &m.shards else {
        return Err(IndexError::Invalid(format!(
            "{} is not the head of a sharded index: build one with `warpsearch index --shards N --part \
             head`, then each shard with `--part i`",
            head_dir.display()
        )));
    };
    let listed: Vec<u64> = entries.iter().map(|e| e.first_doc).collect();
    let asked = sharding.split.starts(m.num_docs)?;
    if asked != listed {
        return Err(IndexError::Invalid(format!(
            "{}: the head lists {} shards starting at documents {listed:?}, --shards asks for {} starting \
             at {asked:?}: give the --shards the head was built with",
            head_dir.display(),
            listed.len(),
            asked.len()
        )));
    }
    let Some(entry) = entries.get(shard) else {
        return Err(IndexError::Invalid(format!(
            "--part {shard}: {} has shards 0 to {}",
            head_dir.display(),
            entries.len() - 1
        )));
    };
    let w = &opts.writer;
    let order_asked = opts
        .reorder_alpha
        .map(|alpha| crate::DocOrder::GlobalScore { alpha });
    if w.analyzer != m.analyzer
        || w.codec != m.codec
        || w.bm25 != m.bm25
        || order_asked.unwrap_or(crate::DocOrder::Input) != m.doc_order
    {
        return Err(IndexError::Invalid(format!(
            "{}: its head was built with codec {}, analyzer {:?}, k1 {} b {} and document order {:?}; \
             build its shards with the same options",
            head_dir.display(),
            m.codec,
            m.analyzer,
            m.bm25.k1,
            m.bm25.b,
            m.doc_order
        )));
    }
    let (first, end) = (entry.first_doc, entry.first_doc + entry.num_docs);
    let out = head_dir.join(&entry.dir);

    // The shard's documents, by the docID the head gave each id: analysed, checked against the
    // head's lengths, and inverted in memory.
    let Source {
        names,
        batches,
        finished,
        ..
    } = source;
    let choice = schema::FieldChoice {
        id_field: opts.id_field.clone(),
        fields: opts.fields.clone(),
        title: opts.include_title,
    };
    let analyzer = w.analyzer;
    let member = |id: &str| head.find_doc(id).filter(|&d| (first..end).contains(&(d as u64)));
    let mut schema: Option<schema::Schema> = None;
    let mut lists: FxHashMap<String, Vec<(u32, u32)>> = FxHashMap::default();
    let mut seen: FxHashSet<u32> = FxHashSet::default();
    let mut skipped = Skipped::default();
    let mut failure = None;
    let mut input_wait = Duration::ZERO;
    let mut batch_iter = batches.iter();
    loop {
        let waiting = Instant::now();
        let Some(batch) = batch_iter.next() else {
            break;
        };
        input_wait += waiting.elapsed();
        if schema.is_none() {
            match detect_schema(&batch, &choice, &names) {
                Ok(s) => schema = Some(s),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let s = schema.as_ref().expect("detected from the first batch");
        let chunks: Vec<_> = batch
            .par_chunks(super::chunk_len(batch.len()))
            .map(|lines| analyze_if(&analyzer, s, lines, 1, member))
            .collect();
        let mut lines = batch.iter();
        for chunk in &chunks {
            // Each line's document in the shard, or None.
            let mut local: Vec<Option<u32>> = Vec::with_capacity(chunk.docs.len());
            // The chunk's documents first: a line is taken only for a document.
            for (a, l) in chunk.docs.iter().zip(lines.by_ref()) {
                local.push(None);
                match a {
                    Ok(None) => {}
                    Ok(Some((d, doc))) => {
                        // The first line of an id is its document, as in the head's build.
                        if !seen.insert(*d) {
                            continue;
                        }
                        let (id, len) = (&doc.id, doc.len);
                        if head.doc_lens()[*d as usize] != len {
                            failure = Some(IndexError::Input {
                                path: names[l.file as usize].clone(),
                                line: l.line,
                                what: format!(
                                    "document '{id}' has {len} tokens here and {} in the head at {}: build \
                                     every part from the same input with the same options",
                                    head.doc_lens()[*d as usize],
                                    head_dir.display()
                                ),
                            });
                            break;
                        }
                        *local.last_mut().expect("pushed") = Some(d - first as u32);
                    }
                    Err(what) => {
                        let path = names[l.file as usize].clone();
                        failure = skipped.line(opts.skip_bad, path, l.line, what);
                        if failure.is_some() {
                            break;
                        }
                    }
                }
            }
            if failure.is_some() {
                break;
            }
            let part = chunk.part(0);
            for &(at, t, tf) in part.postings {
                if let Some(doc) = local[at as usize] {
                    // The term's text is copied only where the term is new to the shard.
                    match lists.get_mut(part.term(t)) {
                        Some(list) => list.push((doc, tf)),
                        None => {
                            lists.insert(part.term(t).to_owned(), vec![(doc, tf)]);
                        }
                    }
                }
            }
        }
        if failure.is_some() {
            break;
        }
    }
    super::analyze::release_vocabularies();
    drop(batches);
    finished()?;
    if let Some(e) = failure {
        return Err(e);
    }
    if seen.len() as u64 != entry.num_docs {
        return Err(IndexError::Invalid(format!(
            "the input holds {} of the {} documents of shard {shard} of {}: build every part from the \
             input the head was built from",
            seen.len(),
            entry.num_docs,
            head_dir.display()
        )));
    }
    let schema = match schema {
        Some(s) => s,
        None => schema::Schema::detect(None, &choice).map_err(IndexError::Invalid)?,
    };
    let invert_time = started.elapsed();

    // The shard's rows of the head's table, and its lists in term order.
    let write_started = Instant::now();
    let (a, b) = (first as usize, end as usize);
    let mut ids = DocIds::default();
    for d in a..b {
        ids.push(head.doc_id(d as u32));
    }
    let table = DocTable {
        ids,
        lens: head.doc_lens()[a..b].to_vec(),
        static_scores: head.static_scores().map(|s| s[a..b].to_vec()),
        global_scores: head.global_scores().map(|s| s[a..b].to_vec()),
    };
    let of = ShardOf {
        shard: shard as u32,
        shards: entries.len() as u32,
        first_doc: first,
        set: head.build_id(),
        collection: collection_stats(&head),
    };
    let writer_opts = WriterOptions {
        doc_order: m.doc_order,
        ..*w
    };
    let mut writer = IndexWriter::create_shard(&out, writer_opts, table, of)?;
    let mut terms: Vec<(String, Vec<(u32, u32)>)> = lists.into_iter().collect();
    terms.par_sort_unstable_by(|x, y| x.0.as_bytes().cmp(y.0.as_bytes()));
    let (mut docs, mut freqs) = (Vec::new(), Vec::new());
    for (term, mut list) in terms {
        list.sort_unstable();
        docs.clear();
        freqs.clear();
        docs.extend(list.iter().map(|p| p.0));
        freqs.extend(list.iter().map(|p| p.1));
        writer.add_term(term.as_bytes(), &docs, &freqs)?;
    }
    let finishing = Instant::now();
    let meta = writer.finish()?;
    let sync_time = finishing.elapsed();
    Ok(BuildReport {
        meta,
        schema,
        skipped: skipped.count,
        skip_reasons: skipped.reasons,
        skipped_files: Vec::new(),
        empty_docs: head.doc_lens()[a..b].iter().filter(|&&l| l == 0).count() as u64,
        runs: 0,
        static_missing: 0,
        static_unknown: 0,
        invert_time,
        input_wait,
        lists_time: Duration::ZERO,
        write_time: write_started.elapsed(),
        sync_time,
        device: None,
        device_phases: Vec::new(),
        device_passes: 0,
        notes: vec![format!(
            "shard {shard} of {}: {} documents from {first}, written into {}",
            entries.len(),
            entry.num_docs,
            out.display()
        )],
    })
}
