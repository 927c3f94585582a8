//! One shard of a sharded index built on its own (`index --shards N --part i`), after its head
//! (`--part head`): the collection is read again, each line parsed for its id, and only the lines
//! whose document the head numbers within the shard's docID range are analysed and inverted. The
//! shard is written with the head's rows of its documents, the collection's statistics and the
//! head's identity, so that its files are those a whole build writes (build identities aside), and
//! the head's checks on opening accept it. Its postings are gathered by partitions on every core, as a
//! whole build's, within the memory budget (spilled runs merged where they outgrow it), and its lists
//! encoded on every core.

use std::path::Path;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use rustc_hash::FxHashSet;

use super::analyze::analyze_if;
use super::invert::{Partitions, NO_DOC};
use super::{detect_schema, lists, schema, BuildOptions, BuildReport, Skipped, Source};
use crate::error::{IndexError, IoContext, Result};
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
    // head's lengths, and gathered by partitions, numbered in input order; `new_id` gives each its
    // number in the shard (the head's order, which global-score order permutes).
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
    // The runs of partitions past their share of the budget go beside the shard, as a whole build's
    // beside its index (the process id in the name lets a later build remove what a killed one left).
    let work = tempfile::Builder::new()
        .prefix(&format!(".warpsearch-runs-{}-", std::process::id()))
        .tempdir_in(head_dir)
        .at(head_dir)?;
    let mut partitions = Partitions::new(4 * rayon::current_num_threads(), opts.memory_budget, work.path());
    let parts = partitions.count();
    let mut new_id: Vec<u32> = Vec::new();
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
            .map(|lines| analyze_if(&analyzer, s, lines, parts, member))
            .collect();
        let mut lines = batch.iter();
        // Each line's document in input order, or NO_DOC: a line is taken only for a document.
        let mut docs: Vec<u32> = Vec::with_capacity(batch.len());
        for chunk in &chunks {
            for (a, l) in chunk.docs.iter().zip(lines.by_ref()) {
                docs.push(NO_DOC);
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
                        *docs.last_mut().expect("pushed") = new_id.len() as u32;
                        new_id.push(d - first as u32);
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
        }
        if failure.is_some() {
            break;
        }
        if let Err(e) = partitions.add(&chunks, &docs) {
            failure = Some(e);
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
    // Renumbered where the head's order is not the input's (global-score order).
    let in_order = new_id.iter().enumerate().all(|(i, &d)| i as u32 == d);
    let new_id = (!in_order).then_some(new_id);
    let mut runs = 0;
    if partitions.spilled() {
        runs = lists::write_spilled(
            &mut writer,
            &mut partitions,
            opts.max_open_runs,
            new_id.as_deref(),
            |_| {},
        )?;
    } else {
        let (order, _) = partitions.term_order();
        let lists = partitions.take_lists();
        lists::write_partitions(
            &mut writer,
            &partitions,
            &lists,
            &order,
            new_id.as_deref(),
            |_| {},
        )?;
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
        runs,
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
