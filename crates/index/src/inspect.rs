//! Index statistics (`warpsearch inspect`) and a per-codec size and decode-speed comparison.

use std::time::Instant;

use serde::Serialize;
use warpsearch_codec::{Codec, ListParams, BLOCK_LEN};

use crate::error::Result;
use crate::format::BlockMeta;
use crate::reader::Index;

/// Sizes and counts of an index.
#[derive(Debug, Serialize)]
pub struct IndexStats {
    /// Documents.
    pub docs: u64,
    /// Distinct terms.
    pub terms: u64,
    /// Postings.
    pub postings: u64,
    /// Mean document length.
    pub avg_doc_len: f64,
    /// Codec of the lists.
    pub codec: String,
    /// Bits per posting spent on docIDs (block data only).
    pub doc_bits_per_posting: f64,
    /// Bits per posting spent on frequencies.
    pub freq_bits_per_posting: f64,
    /// Bits per posting spent on skip data (blocks.bin).
    pub skip_bits_per_posting: f64,
    /// Bytes of each file of the index directory.
    pub files: Vec<(String, u64)>,
    /// The longest lists: (term, df).
    pub largest_lists: Vec<(String, u32)>,
}

/// Computes [`IndexStats`], listing the `top` longest lists.
pub fn stats(index: &Index, top: usize) -> Result<IndexStats> {
    let (mut doc_words, mut freq_words, mut num_blocks) = (0u64, 0u64, 0u64);
    // A sharded index's lists are its shards'.
    let with_lists: Vec<&Index> = match index.shards() {
        [] => vec![index],
        shards => shards.iter().map(|s| &**s.index()).collect(),
    };
    for ix in with_lists {
        num_blocks += ix.block_metas().len() as u64;
        for r in ix.term_records() {
            let blocks = &ix.block_metas()[r.first_block as usize..r.first_block as usize + r.num_blocks()];
            for (i, b) in blocks.iter().enumerate() {
                let end = blocks.get(i + 1).map_or(r.len_words, |n| n.offset);
                doc_words += b.freq_offset as u64;
                freq_words += (end - b.offset - b.freq_offset) as u64;
            }
        }
    }
    let m = index.meta();
    let per_posting = |bits: u64| {
        if m.num_postings == 0 {
            0.0
        } else {
            bits as f64 / m.num_postings as f64
        }
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(index.dir())
        .map_err(|e| crate::IndexError::Io {
            path: index.dir().into(),
            cause: e,
        })?
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        match entry.metadata() {
            // A shard's directory: the sum of its files.
            Ok(md) if md.is_dir() => {
                let bytes = std::fs::read_dir(entry.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|f| f.metadata().ok())
                    .map(|m| m.len())
                    .sum();
                files.push((format!("{name}/"), bytes));
            }
            Ok(md) => files.push((name, md.len())),
            Err(_) => {}
        }
    }
    files.sort();
    let mut by_df: Vec<(u32, u32)> = index
        .term_records()
        .iter()
        .enumerate()
        .map(|(i, r)| (r.df, i as u32))
        .collect();
    by_df.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    by_df.truncate(top);
    let mut names = vec![String::new(); by_df.len()];
    if !by_df.is_empty() {
        let wanted: std::collections::HashMap<u32, usize> =
            by_df.iter().enumerate().map(|(k, &(_, id))| (id, k)).collect();
        for (term, id) in index.terms() {
            if let Some(&k) = wanted.get(&id) {
                names[k] = String::from_utf8_lossy(&term).into_owned();
            }
        }
    }
    Ok(IndexStats {
        docs: m.num_docs,
        terms: m.num_terms,
        postings: m.num_postings,
        avg_doc_len: m.avg_doc_len,
        codec: m.codec.name().into(),
        doc_bits_per_posting: per_posting(doc_words * 32),
        freq_bits_per_posting: per_posting(freq_words * 32),
        skip_bits_per_posting: per_posting(num_blocks * size_of::<BlockMeta>() as u64 * 8),
        files,
        largest_lists: names.into_iter().zip(by_df).map(|(n, (df, _))| (n, df)).collect(),
    })
}

/// One codec's size and single-thread decode speed over all lists of an index.
#[derive(Debug, Serialize)]
pub struct CodecReport {
    /// The codec.
    pub codec: String,
    /// Bits per docID (block data for docIDs).
    pub doc_bits_per_posting: f64,
    /// Bits per frequency.
    pub freq_bits_per_posting: f64,
    /// Millions of docIDs decoded per second (docIDs only).
    pub doc_decode_mints_per_s: f64,
    /// Millions of postings decoded per second (docIDs and frequencies).
    pub posting_decode_mints_per_s: f64,
}

struct Encoded {
    words: Vec<u32>,
    /// (term params, block skip entry with absolute offset, block length)
    blocks: Vec<(ListParams, BlockMeta, u32)>,
}

/// Re-encodes every list of `index` with each codec and measures size and decode speed (median of
/// `rounds` timed passes over all blocks, one thread).
pub fn compare_codecs(index: &Index, rounds: usize) -> Result<Vec<CodecReport>> {
    let mut reports = Vec::new();
    for codec in Codec::ALL {
        let enc = encode_all(index, codec)?;
        let postings: u64 = enc.blocks.iter().map(|b| b.2 as u64).sum();
        let doc_words: u64 = enc.blocks.iter().map(|b| b.1.freq_offset as u64).sum();
        let time = |with_freqs: bool| -> f64 {
            let mut times: Vec<f64> = (0..rounds.max(1))
                .map(|_| {
                    let start = Instant::now();
                    std::hint::black_box(decode_pass(&enc, codec, with_freqs));
                    start.elapsed().as_secs_f64()
                })
                .collect();
            times.sort_by(f64::total_cmp);
            postings as f64 / times[times.len() / 2] / 1e6
        };
        let bits = |w: u64| w as f64 * 32.0 / postings.max(1) as f64;
        reports.push(CodecReport {
            codec: codec.name().into(),
            doc_bits_per_posting: bits(doc_words),
            freq_bits_per_posting: bits(enc.words.len() as u64 - doc_words),
            doc_decode_mints_per_s: time(false),
            posting_decode_mints_per_s: time(true),
        });
    }
    Ok(reports)
}

fn encode_all(index: &Index, codec: Codec) -> Result<Encoded> {
    let mut enc = Encoded {
        words: Vec::new(),
        blocks: Vec::new(),
    };
    for id in 0..index.term_records().len() as u32 {
        let (docs, freqs) = index.postings(id).decode_all()?;
        let p = codec.list_params(&docs, &freqs);
        for (d, f) in docs.chunks(BLOCK_LEN).zip(freqs.chunks(BLOCK_LEN)) {
            let offset = enc.words.len() as u32;
            let freq_offset = codec.encode_block(p, d, f, &mut enc.words);
            let meta = BlockMeta {
                first_doc: d[0],
                last_doc: d[d.len() - 1],
                offset,
                freq_offset,
                max_score: 0.0,
            };
            enc.blocks.push((p, meta, d.len() as u32));
        }
    }
    Ok(enc)
}

fn decode_pass(enc: &Encoded, codec: Codec, with_freqs: bool) -> u64 {
    let mut out = [0u32; BLOCK_LEN];
    let mut checksum = 0u64;
    for (i, (p, b, n)) in enc.blocks.iter().enumerate() {
        let end = enc
            .blocks
            .get(i + 1)
            .map_or(enc.words.len(), |next| next.1.offset as usize);
        let block = &enc.words[b.offset as usize..end];
        let out = &mut out[..*n as usize];
        codec
            .decode_docs(*p, block, b.freq_offset as usize, b.first_doc, b.last_doc, out)
            .expect("just encoded");
        checksum = checksum.wrapping_add(out[out.len() - 1] as u64);
        if with_freqs {
            codec
                .decode_freqs(*p, block, b.freq_offset as usize, out)
                .expect("just encoded");
            checksum = checksum.wrapping_add(out[0] as u64);
        }
    }
    checksum
}
