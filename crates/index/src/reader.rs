//! Opening an index directory and reading its posting lists.
//!
//! Every file is memory-mapped and checked (magic, kind, version, length, CRC) when the index opens, and
//! every term record is checked against the sizes of the files it points into, so a reader can trust
//! offsets afterwards. Block contents are still decoded defensively: a damaged block is an error.

use std::path::{Path, PathBuf};

use warpsearch_codec::{Codec, BLOCK_LEN};

use crate::bm25::Bm25;
use crate::container::{self, Payload};
use crate::error::{corrupt, IndexError, Result};
use crate::format::{files, BlockMeta, IndexMeta, TermRecord};

/// An open, read-only index.
pub struct Index {
    dir: PathBuf,
    meta: IndexMeta,
    terms_fst: fst::Map<Payload>,
    terms: Payload,
    blocks: Payload,
    postings: Payload,
    doc_lens: Payload,
    doc_ids: Payload,
    static_scores: Option<Payload>,
    global_scores: Option<Payload>,
}

impl Index {
    /// Opens and checks the index in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Index> {
        let dir = dir.as_ref();
        if !dir.join(files::META.0).is_file() {
            return Err(IndexError::Invalid(format!(
                "{} is not a warpsearch index (no {}): build one with `warpsearch index`",
                dir.display(),
                files::META.0
            )));
        }
        let open = |f: (&str, &[u8; 8])| container::open(&dir.join(f.0), f.1);
        let optional = |f: (&str, &[u8; 8])| -> Result<Option<Payload>> {
            if dir.join(f.0).exists() {
                open(f).map(Some)
            } else {
                Ok(None)
            }
        };
        let meta_path = dir.join(files::META.0);
        let meta: IndexMeta = serde_json::from_slice(open(files::META)?.bytes())
            .map_err(|e| corrupt(&meta_path, format!("metadata: {e}")))?;
        let fst_path = dir.join(files::TERMS_FST.0);
        let terms_fst =
            fst::Map::new(open(files::TERMS_FST)?).map_err(|e| corrupt(&fst_path, e.to_string()))?;
        let index = Index {
            terms: open(files::TERMS)?,
            blocks: open(files::BLOCKS)?,
            postings: open(files::POSTINGS)?,
            doc_lens: open(files::DOC_LENS)?,
            doc_ids: open(files::DOC_IDS)?,
            static_scores: optional(files::STATIC)?,
            global_scores: optional(files::GLOBAL)?,
            terms_fst,
            dir: dir.to_owned(),
            meta,
        };
        index.check()?;
        Ok(index)
    }

    fn check(&self) -> Result<()> {
        let m = &self.meta;
        let path = |f: (&str, &[u8; 8])| self.dir.join(f.0);
        let sized = |p: &Payload, unit: usize, count: u64, f: (&str, &[u8; 8])| {
            if p.bytes().len() as u64 != unit as u64 * count {
                Err(corrupt(
                    path(f),
                    format!(
                        "{} bytes, expected {count} records of {unit} bytes",
                        p.bytes().len()
                    ),
                ))
            } else {
                Ok(())
            }
        };
        sized(&self.terms, size_of::<TermRecord>(), m.num_terms, files::TERMS)?;
        sized(&self.doc_lens, 4, m.num_docs, files::DOC_LENS)?;
        for (p, f) in [
            (&self.static_scores, files::STATIC),
            (&self.global_scores, files::GLOBAL),
        ] {
            if let Some(p) = p {
                sized(p, 4, m.num_docs, f)?;
            }
        }
        if self.terms_fst.len() as u64 != m.num_terms {
            return Err(corrupt(
                path(files::TERMS_FST),
                "term count differs from the metadata",
            ));
        }
        if !self.blocks.bytes().len().is_multiple_of(size_of::<BlockMeta>())
            || !self.postings.bytes().len().is_multiple_of(4)
        {
            return Err(corrupt(
                path(files::BLOCKS),
                "file size is not a whole number of records",
            ));
        }
        let (num_blocks, num_words) = (self.block_metas().len() as u64, self.words().len() as u64);
        let mut postings = 0u64;
        for (id, r) in self.term_records().iter().enumerate() {
            let blocks_end = r.first_block.checked_add(r.num_blocks() as u64);
            let words_end = r.offset_words.checked_add(r.len_words as u64);
            if r.df == 0
                || blocks_end.is_none_or(|e| e > num_blocks)
                || words_end.is_none_or(|e| e > num_words)
            {
                return Err(corrupt(
                    path(files::TERMS),
                    format!("term #{id} points outside the posting files"),
                ));
            }
            postings += r.df as u64;
        }
        if postings != m.num_postings {
            return Err(corrupt(
                path(files::TERMS),
                "posting count differs from the metadata",
            ));
        }
        let ids = self.doc_ids.bytes();
        let n = m.num_docs as usize;
        let offsets_ok = ids.len() >= 8 * (n + 1) && {
            let offsets: &[u64] = bytemuck::cast_slice(&ids[..8 * (n + 1)]);
            offsets.windows(2).all(|w| w[0] <= w[1])
                && offsets[n] as usize == ids.len() - 8 * (n + 1)
                && std::str::from_utf8(&ids[8 * (n + 1)..]).is_ok()
        };
        if !offsets_ok {
            return Err(corrupt(path(files::DOC_IDS), "document id table is inconsistent"));
        }
        Ok(())
    }

    /// The directory the index was opened from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The metadata.
    pub fn meta(&self) -> &IndexMeta {
        &self.meta
    }

    /// The codec of every list.
    pub fn codec(&self) -> Codec {
        self.meta.codec
    }

    /// Number of documents.
    pub fn num_docs(&self) -> u32 {
        self.meta.num_docs as u32
    }

    /// BM25 with the index's parameters and statistics.
    pub fn bm25(&self) -> Bm25 {
        Bm25 {
            params: self.meta.bm25,
            num_docs: self.meta.num_docs,
            avg_doc_len: self.meta.avg_doc_len as f32,
        }
    }

    /// The ordinal of `term`, if the index has it.
    pub fn term_id(&self, term: &str) -> Option<u32> {
        self.terms_fst.get(term).map(|id| id as u32)
    }

    /// All term records, by ordinal (terms are numbered in byte order).
    pub fn term_records(&self) -> &[TermRecord] {
        bytemuck::cast_slice(self.terms.bytes())
    }

    /// All terms with their ordinals, in byte order.
    pub fn terms(&self) -> impl Iterator<Item = (Vec<u8>, u32)> + '_ {
        use fst::Streamer;
        let mut stream = self.terms_fst.stream();
        std::iter::from_fn(move || stream.next().map(|(k, v)| (k.to_vec(), v as u32)))
    }

    /// The skip data of all lists.
    pub fn block_metas(&self) -> &[BlockMeta] {
        bytemuck::cast_slice(self.blocks.bytes())
    }

    /// The encoded blocks of all lists.
    pub fn words(&self) -> &[u32] {
        bytemuck::cast_slice(self.postings.bytes())
    }

    /// The posting list of term `id`.
    pub fn postings(&self, id: u32) -> PostingList<'_> {
        let record = self.term_records()[id as usize];
        let first = record.first_block as usize;
        let start = record.offset_words as usize;
        PostingList {
            codec: self.meta.codec,
            num_docs: self.num_docs(),
            term: id,
            record,
            blocks: &self.block_metas()[first..first + record.num_blocks()],
            words: &self.words()[start..start + record.len_words as usize],
        }
    }

    /// Document lengths, by docID.
    pub fn doc_lens(&self) -> &[u32] {
        bytemuck::cast_slice(self.doc_lens.bytes())
    }

    /// The external id of document `doc`.
    pub fn doc_id(&self, doc: u32) -> &str {
        let ids = self.doc_ids.bytes();
        let n = self.meta.num_docs as usize;
        let offsets: &[u64] = bytemuck::cast_slice(&ids[..8 * (n + 1)]);
        let text = &ids[8 * (n + 1)..];
        let bytes = &text[offsets[doc as usize] as usize..offsets[doc as usize + 1] as usize];
        // Checked as UTF-8 as a whole at open; an id boundary inside a character is still possible in
        // a damaged file, so fall back to a visible marker instead of panicking.
        std::str::from_utf8(bytes).unwrap_or("\u{FFFD}")
    }

    /// Raw static scores, by docID, when the index has them.
    pub fn static_scores(&self) -> Option<&[f32]> {
        self.static_scores
            .as_ref()
            .map(|p| bytemuck::cast_slice(p.bytes()))
    }

    /// Global scores GS(d), by docID, for a global-score-ordered index.
    pub fn global_scores(&self) -> Option<&[f32]> {
        self.global_scores
            .as_ref()
            .map(|p| bytemuck::cast_slice(p.bytes()))
    }
}

/// One term's posting list: skip data and encoded blocks.
#[derive(Clone, Copy)]
pub struct PostingList<'a> {
    codec: Codec,
    num_docs: u32,
    term: u32,
    record: TermRecord,
    blocks: &'a [BlockMeta],
    words: &'a [u32],
}

impl<'a> PostingList<'a> {
    /// The term's record.
    pub fn record(&self) -> &TermRecord {
        &self.record
    }

    /// Number of postings.
    pub fn len(&self) -> usize {
        self.record.df as usize
    }

    /// Whether the list is empty (never, for a list of the index).
    pub fn is_empty(&self) -> bool {
        self.record.df == 0
    }

    /// Skip data, one entry per block.
    pub fn blocks(&self) -> &'a [BlockMeta] {
        self.blocks
    }

    /// Postings in block `i`.
    pub fn block_len(&self, i: usize) -> usize {
        if i + 1 < self.blocks.len() {
            BLOCK_LEN
        } else {
            self.len() - BLOCK_LEN * (self.blocks.len() - 1)
        }
    }

    /// The encoded words of block `i`.
    pub fn block_words(&self, i: usize) -> Result<&'a [u32]> {
        let start = self.blocks[i].offset as usize;
        let end = self
            .blocks
            .get(i + 1)
            .map_or(self.words.len(), |b| b.offset as usize);
        self.words
            .get(start..end)
            .ok_or_else(|| self.error(i, warpsearch_codec::CodecError::Truncated))
    }

    /// Decodes the docIDs of block `i` into `out[..block_len(i)]`; returns that length.
    pub fn decode_docs(&self, i: usize, out: &mut [u32; BLOCK_LEN]) -> Result<usize> {
        let (n, b) = (self.block_len(i), &self.blocks[i]);
        if b.last_doc >= self.num_docs {
            return Err(self.error(
                i,
                warpsearch_codec::CodecError::Corrupt("docID beyond the last document"),
            ));
        }
        let words = self.block_words(i)?;
        self.codec
            .decode_docs(
                self.record.params(),
                words,
                b.freq_offset as usize,
                b.first_doc,
                b.last_doc,
                &mut out[..n],
            )
            .map_err(|e| self.error(i, e))?;
        Ok(n)
    }

    /// Decodes the frequencies of block `i` into `out[..block_len(i)]`; returns that length.
    pub fn decode_freqs(&self, i: usize, out: &mut [u32; BLOCK_LEN]) -> Result<usize> {
        let n = self.block_len(i);
        let words = self.block_words(i)?;
        self.codec
            .decode_freqs(
                self.record.params(),
                words,
                self.blocks[i].freq_offset as usize,
                &mut out[..n],
            )
            .map_err(|e| self.error(i, e))?;
        Ok(n)
    }

    /// Decodes the whole list.
    pub fn decode_all(&self) -> Result<(Vec<u32>, Vec<u32>)> {
        let (mut docs, mut freqs) = (Vec::with_capacity(self.len()), Vec::with_capacity(self.len()));
        let (mut d, mut f) = ([0u32; BLOCK_LEN], [0u32; BLOCK_LEN]);
        for i in 0..self.blocks.len() {
            let n = self.decode_docs(i, &mut d)?;
            self.decode_freqs(i, &mut f)?;
            docs.extend_from_slice(&d[..n]);
            freqs.extend_from_slice(&f[..n]);
        }
        Ok((docs, freqs))
    }

    fn error(&self, block: usize, source: warpsearch_codec::CodecError) -> IndexError {
        IndexError::Codec {
            term: format!("#{}", self.term),
            block,
            source,
        }
    }
}
