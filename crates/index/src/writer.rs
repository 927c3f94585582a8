//! Writes an index directory from sorted posting lists and a document table.
//!
//! Everything goes to a hidden temporary directory beside the target; the directory is put in place
//! ([`crate::replace`]) only after every file is complete, checksummed and synced. Every file of one
//! build carries the same random build identity in its header. A failed or abandoned write removes the
//! temporary directory and leaves any existing index untouched.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use warpsearch_codec::{Codec, ListParams, BLOCK_LEN};

use crate::analyzer::AnalyzerConfig;
use crate::bm25::{loosen_bound, mean_doc_len, Bm25, Bm25Params};
use crate::container::{self, ContainerWriter, FORMAT_VERSION};
use crate::error::{IndexError, Result};
use crate::format::{files, BlockMeta, DocOrder, IndexMeta, ShardEntry, ShardOf, StaticRange, TermRecord};
use crate::replace::{clean_stale, replace_dir, TmpDir};

/// Choices fixed when an index is written.
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    /// Posting-list codec.
    pub codec: Codec,
    /// Analysis the documents went through.
    pub analyzer: AnalyzerConfig,
    /// BM25 parameters for the stored upper bounds.
    pub bm25: Bm25Params,
    /// How docIDs were assigned.
    pub doc_order: DocOrder,
    /// Replace an existing index at the output path.
    pub force: bool,
}

/// External document ids, concatenated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DocIds {
    offsets: Vec<u64>,
    bytes: Vec<u8>,
}

impl DocIds {
    /// Appends an id.
    pub fn push(&mut self, id: &str) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.bytes.extend_from_slice(id.as_bytes());
        self.offsets.push(self.bytes.len() as u64);
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id at `i`.
    pub fn get(&self, i: usize) -> &str {
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        std::str::from_utf8(&self.bytes[a..b]).expect("ids are pushed as str")
    }

    /// The ids in the order `order` gives (`order[new] = old`).
    pub fn permuted(&self, order: &[u32]) -> DocIds {
        let mut out = DocIds::default();
        for &old in order {
            out.push(self.get(old as usize));
        }
        out
    }
}

/// Per-document data, indexed by final docID.
#[derive(Debug, Clone, Default)]
pub struct DocTable {
    /// External ids.
    pub ids: DocIds,
    /// Lengths in tokens.
    pub lens: Vec<u32>,
    /// Raw static scores, if any.
    pub static_scores: Option<Vec<f32>>,
    /// Global scores, for a global-score-ordered index.
    pub global_scores: Option<Vec<f32>>,
}

/// Terms encoded at once by [`IndexWriter::push_all`]: enough for every core to take many, few enough to
/// hold their lists.
pub(crate) const WINDOW: usize = 8192;

/// Encodes posting lists for an [`IndexWriter`] (codec, BM25 block bounds); shareable across threads.
#[derive(Clone, Copy)]
pub struct ListEncoder<'a> {
    codec: Codec,
    bm25: Bm25,
    lens: &'a [u32],
}

/// One term's encoded list, ready for [`IndexWriter::push`]: encoded here (owned), or by another
/// processor ([`ListEncoder::assemble`], borrowed from what it returned).
pub struct EncodedList<'a> {
    term: Cow<'a, [u8]>,
    words: Cow<'a, [u32]>,
    blocks: Cow<'a, [BlockMeta]>,
    record: TermRecord,
}

impl ListEncoder<'_> {
    /// Encodes the list of `term` (docIDs strictly increasing and below the number of documents,
    /// frequencies at least 1); `None` for an empty list, which is skipped (it cannot match anything).
    pub fn encode(&self, term: &[u8], docs: &[u32], freqs: &[u32]) -> Result<Option<EncodedList<'static>>> {
        self.encode_bounded(term, docs, freqs, None)
    }

    /// [`ListEncoder::encode`] with each block's bound given (`bounds[b]` of block b, as another
    /// processor computed it) instead of computed here: they must be the bounds `encode` computes, bit
    /// for bit, which a build on such a processor promises.
    pub fn encode_with_bounds(
        &self,
        term: &[u8],
        docs: &[u32],
        freqs: &[u32],
        bounds: &[f32],
    ) -> Result<Option<EncodedList<'static>>> {
        self.encode_bounded(term, docs, freqs, Some(bounds))
    }

    /// The list of `term` as another processor encoded it with this index's codec (SIMD-BP128 only):
    /// `df` postings whose frequencies sum to `cf`, in `blocks` (each block's offset within `words`,
    /// its bound as [`ListEncoder::encode`] computes it) and `words`. They must be the words and
    /// blocks `encode` writes, bit for bit, which a build on such a processor promises (its tests
    /// compare the files); their shape is checked here, so that a malformed list fails the write.
    pub fn assemble<'a>(
        &self,
        term: &'a [u8],
        df: u32,
        cf: u64,
        words: &'a [u32],
        blocks: &'a [BlockMeta],
    ) -> Result<EncodedList<'a>> {
        let bad = |what: &str| {
            IndexError::Invalid(format!(
                "term '{}': the list the device encoded is malformed: {what}",
                String::from_utf8_lossy(term)
            ))
        };
        if self.codec != Codec::SimdBp {
            return Err(bad(&format!(
                "it is SIMD-BP128, the index's codec is {}",
                self.codec
            )));
        }
        if df == 0 || blocks.len() != (df as usize).div_ceil(BLOCK_LEN) {
            return Err(bad(&format!("{} blocks for {df} postings", blocks.len())));
        }
        let len_words = u32::try_from(words.len()).map_err(|_| bad("above 16 GiB"))?;
        let num_docs = self.lens.len() as u64;
        let mut list_max = 0f32;
        for (i, b) in blocks.iter().enumerate() {
            let end = blocks.get(i + 1).map_or(len_words, |next| next.offset);
            let ordered = match i {
                0 => b.offset == 0,
                _ => blocks[i - 1].last_doc < b.first_doc,
            };
            if !ordered
                || b.first_doc > b.last_doc
                || b.last_doc as u64 >= num_docs
                || b.offset >= end
                || b.freq_offset == 0
                || b.freq_offset > end - b.offset
            {
                return Err(bad(&format!("block {i}")));
            }
            list_max = list_max.max(b.max_score);
        }
        Ok(EncodedList {
            term: Cow::Borrowed(term),
            words: Cow::Borrowed(words),
            blocks: Cow::Borrowed(blocks),
            record: list_record(df, len_words, cf, list_max, ListParams::default()),
        })
    }

    fn encode_bounded(
        &self,
        term: &[u8],
        docs: &[u32],
        freqs: &[u32],
        bounds: Option<&[f32]>,
    ) -> Result<Option<EncodedList<'static>>> {
        let shown = || String::from_utf8_lossy(term).into_owned();
        if docs.len() != freqs.len() {
            return Err(IndexError::Invalid(format!(
                "term '{}': {} docIDs but {} frequencies",
                shown(),
                docs.len(),
                freqs.len()
            )));
        }
        if docs.is_empty() {
            return Ok(None);
        }
        let n = self.lens.len();
        if docs.windows(2).any(|w| w[0] >= w[1]) || docs[docs.len() - 1] as usize >= n {
            return Err(IndexError::Invalid(format!(
                "term '{}': docIDs must be strictly increasing and below the {n} documents",
                shown()
            )));
        }
        if freqs.contains(&0) {
            return Err(IndexError::Invalid(format!(
                "term '{}': a term frequency of 0",
                shown()
            )));
        }
        let df = u32::try_from(docs.len())
            .map_err(|_| IndexError::Invalid(format!("term '{}': list too long", shown())))?;
        if bounds.is_some_and(|b| b.len() != docs.len().div_ceil(BLOCK_LEN)) {
            return Err(IndexError::Invalid(format!(
                "term '{}': {} block bounds for {} blocks",
                shown(),
                bounds.map_or(0, |b| b.len()),
                docs.len().div_ceil(BLOCK_LEN)
            )));
        }
        let codec = self.codec;
        let params = codec.list_params(docs, freqs);
        let idf = self.bm25.idf(df as u64);
        let mut words = Vec::new();
        let mut blocks = Vec::with_capacity(docs.len().div_ceil(BLOCK_LEN));
        let mut list_max = 0f32;
        let mut cf = 0u64;
        for (b, (d, f)) in docs.chunks(BLOCK_LEN).zip(freqs.chunks(BLOCK_LEN)).enumerate() {
            let offset = words.len() as u32;
            let freq_offset = codec.encode_block(params, d, f, &mut words);
            cf += f.iter().map(|&tf| tf as u64).sum::<u64>();
            let max_score = match bounds {
                Some(bounds) => bounds[b],
                None => {
                    let mut block_max = 0f32;
                    for (&doc, &tf) in d.iter().zip(f) {
                        block_max = block_max.max(self.bm25.score(idf, tf, self.lens[doc as usize]));
                    }
                    loosen_bound(block_max)
                }
            };
            list_max = list_max.max(max_score);
            blocks.push(BlockMeta {
                first_doc: d[0],
                last_doc: d[d.len() - 1],
                offset,
                freq_offset,
                max_score,
            });
        }
        let len_words = u32::try_from(words.len())
            .map_err(|_| IndexError::Invalid(format!("term '{}': encoded list above 16 GiB", shown())))?;
        let record = list_record(df, len_words, cf, list_max, params);
        Ok(Some(EncodedList {
            term: Cow::Owned(term.to_owned()),
            words: Cow::Owned(words),
            blocks: Cow::Owned(blocks),
            record,
        }))
    }
}

/// The record of a list of `df` postings in `len_words` words, its place in the files (its first
/// block and word) given when it is appended.
fn list_record(df: u32, len_words: u32, cf: u64, max_score: f32, params: ListParams) -> TermRecord {
    TermRecord {
        df,
        len_words,
        cf,
        first_block: 0,
        offset_words: 0,
        max_score,
        doc_param: params.doc,
        freq_param: params.freq,
        reserved: [0; 2],
    }
}

/// An index being written. Terms must come in strictly increasing byte order.
pub struct IndexWriter {
    out: PathBuf,
    tmp: TmpDir,
    opts: WriterOptions,
    docs: DocTable,
    bm25: Bm25,
    total_doc_len: u64,
    lists: ListFiles,
    build_id: u64,
    stored: Option<crate::store::StoredDocs>,
    shard: Option<ShardOf>,
    shards: Option<Vec<ShardEntry>>,
}

impl IndexWriter {
    /// Starts writing an index to `out` for the documents in `docs`.
    pub fn create(out: &Path, opts: WriterOptions, docs: DocTable) -> Result<Self> {
        IndexWriter::create_with(out, opts, docs, None)
    }

    /// Starts writing shard `shard` of a sharded index to `out` for its documents `docs`: its bounds
    /// are computed with the collection's statistics (`shard.collection`), which its readers score
    /// with, so that they bound the single index's scores of these postings.
    pub fn create_shard(out: &Path, opts: WriterOptions, docs: DocTable, shard: ShardOf) -> Result<Self> {
        IndexWriter::create_with(out, opts, docs, Some(shard))
    }

    fn create_with(out: &Path, opts: WriterOptions, docs: DocTable, shard: Option<ShardOf>) -> Result<Self> {
        check_output(out, opts.force)?;
        let n = docs.lens.len();
        if docs.ids.len() != n
            || docs.static_scores.as_ref().is_some_and(|s| s.len() != n)
            || docs.global_scores.as_ref().is_some_and(|s| s.len() != n)
        {
            return Err(IndexError::Invalid(
                "document table columns differ in length".into(),
            ));
        }
        if n > u32::MAX as usize {
            return Err(IndexError::Invalid(format!(
                "{n} documents: at most {} fit 32-bit docIDs",
                u32::MAX
            )));
        }
        let tmp = TmpDir::beside(out)?;
        let total_doc_len: u64 = docs.lens.iter().map(|&l| l as u64).sum();
        let bm25 = match &shard {
            Some(s) => Bm25::for_collection(opts.bm25, s.collection.num_docs, s.collection.total_doc_len),
            None => Bm25::for_collection(opts.bm25, n as u64, total_doc_len),
        };
        let build_id = container::new_build_id();
        let file = |f: (&str, &[u8; 8])| ContainerWriter::create(&tmp.path.join(f.0), f.1, build_id);
        let fst_file = file(files::TERMS_FST)?;
        let terms_fst = fst::MapBuilder::new(fst_file).map_err(|e| fst_error(&tmp.path, e))?;
        Ok(IndexWriter {
            lists: ListFiles {
                dict: TermDict {
                    fst: terms_fst,
                    dir: tmp.path.clone(),
                    num_terms: 0,
                    last_term: None,
                },
                data: ListData {
                    terms: file(files::TERMS)?,
                    blocks: file(files::BLOCKS)?,
                    num_postings: 0,
                    num_blocks: 0,
                    offset_words: 0,
                },
                postings: file(files::POSTINGS)?,
            },
            out: out.to_owned(),
            tmp,
            opts,
            docs,
            bm25,
            total_doc_len,
            build_id,
            stored: None,
            shard,
            shards: None,
        })
    }

    /// The build identity every file of this index carries.
    pub fn build_id(&self) -> u64 {
        self.build_id
    }

    /// The temporary directory the index is written in until [`IndexWriter::finish`] puts it in
    /// place: a sharded index's head writes its shards inside it, so that they move with it.
    pub(crate) fn tmp_dir(&self) -> &Path {
        &self.tmp.path
    }

    /// Makes this index the head of a sharded index whose shards, in docID order, are `shards`
    /// (written inside [`IndexWriter::tmp_dir`]).
    pub(crate) fn set_shards(&mut self, shards: Vec<ShardEntry>) {
        self.shards = Some(shards);
    }

    /// Adds the head's record of `term` (a sharded index's head has no lists: its shards do): the
    /// collection's document frequency `df` (at least 1) and collection frequency `cf`.
    pub(crate) fn push_head(&mut self, term: &[u8], df: u32, cf: u64) -> Result<()> {
        self.lists.push_head(term, df, cf)
    }

    /// Stores `docs` (one per document, in docID order through their table) in `docs.bin`.
    pub fn set_stored_docs(&mut self, docs: crate::store::StoredDocs) {
        self.stored = Some(docs);
    }

    /// The BM25 function the stored bounds use.
    pub fn bm25(&self) -> &Bm25 {
        &self.bm25
    }

    /// The documents' lengths, by docID.
    pub fn doc_lens(&self) -> &[u32] {
        &self.docs.lens
    }

    /// Adds the posting list of `term`: docIDs strictly increasing and below the number of documents,
    /// frequencies at least 1. An empty list is skipped (the term cannot match anything).
    pub fn add_term(&mut self, term: &[u8], docs: &[u32], freqs: &[u32]) -> Result<()> {
        self.lists.check_order(term)?;
        match self.encoder().encode(term, docs, freqs)? {
            Some(list) => self.push(list),
            None => Ok(()),
        }
    }

    /// What encodes lists for this writer: [`ListEncoder::encode`] may run on many threads at once, the
    /// lists then go to [`IndexWriter::push`] in term order.
    pub fn encoder(&self) -> ListEncoder<'_> {
        ListEncoder {
            codec: self.opts.codec,
            bm25: self.bm25,
            lens: &self.docs.lens,
        }
    }

    /// Appends a list encoded by [`IndexWriter::encoder`]; terms must come in strictly increasing byte
    /// order.
    pub fn push(&mut self, list: EncodedList<'_>) -> Result<()> {
        self.lists.push(list)
    }

    /// Encodes `count` lists on every core, `encode(encoder, i)` giving the i-th in term order, and
    /// appends them in that order; `written(n)` after each window of `n` terms is appended. A window
    /// is appended (the term dictionary on one thread, the other files on another) while the next is
    /// encoded on the others, so that the appending does not leave the cores idle.
    pub fn push_all<'a>(
        &mut self,
        count: usize,
        encode: impl Fn(&ListEncoder<'_>, usize) -> Result<Option<EncodedList<'a>>> + Sync,
        mut written: impl FnMut(u64),
    ) -> Result<()> {
        let encoder = ListEncoder {
            codec: self.opts.codec,
            bm25: self.bm25,
            lens: &self.docs.lens,
        };
        let lists = &mut self.lists;
        let append = |window: Vec<Option<EncodedList<'a>>>, lists: &mut ListFiles| lists.append(window);
        let mut ready: Vec<Option<EncodedList<'a>>> = Vec::new();
        for lo in (0..count).step_by(WINDOW) {
            let hi = (lo + WINDOW).min(count);
            let appended = ready.len() as u64;
            let (next, pushed) = rayon::join(
                || {
                    (lo..hi)
                        .into_par_iter()
                        .map(|i| encode(&encoder, i))
                        .collect::<Result<Vec<_>>>()
                },
                || append(std::mem::take(&mut ready), lists),
            );
            pushed?;
            if appended > 0 {
                written(appended);
            }
            ready = next?;
        }
        let last = ready.len() as u64;
        append(ready, lists)?;
        if last > 0 {
            written(last);
        }
        Ok(())
    }

    /// Writes the remaining files and renames the directory into place.
    pub fn finish(self) -> Result<IndexMeta> {
        let IndexWriter {
            out,
            mut tmp,
            opts,
            docs,
            total_doc_len,
            lists:
                ListFiles {
                    dict:
                        TermDict {
                            fst: terms_fst,
                            num_terms,
                            ..
                        },
                    data:
                        ListData {
                            terms,
                            blocks,
                            num_postings,
                            ..
                        },
                    postings,
                },
            build_id,
            stored,
            shard,
            shards,
            ..
        } = self;
        let dir = tmp.path.clone();
        let n = docs.lens.len() as u64;
        let write =
            |f: (&str, &[u8; 8]), bytes: &[u8]| container::write_file(&dir.join(f.0), f.1, build_id, bytes);
        // Each file is completed and synced on a core of its own: the syncs overlap (the postings'
        // alone took some 0.4 s on an index of a gigabyte), and so do the document table's writes.
        let mut complete: Vec<Box<dyn FnOnce() -> Result<()> + Send + '_>> = vec![
            Box::new(|| terms_fst.into_inner().map_err(|e| fst_error(&dir, e))?.finish()),
            Box::new(|| terms.finish()),
            Box::new(|| blocks.finish()),
            Box::new(|| postings.finish()),
            Box::new(|| write(files::DOC_LENS, bytemuck::cast_slice(&docs.lens))),
            Box::new(|| {
                let mut id_bytes: Vec<u8> = bytemuck::cast_slice(&docs.ids.offsets).to_vec();
                if docs.ids.offsets.is_empty() {
                    id_bytes.extend_from_slice(&0u64.to_le_bytes());
                }
                id_bytes.extend_from_slice(&docs.ids.bytes);
                write(files::DOC_IDS, &id_bytes)
            }),
        ];
        if let Some(s) = &docs.static_scores {
            complete.push(Box::new(|| write(files::STATIC, bytemuck::cast_slice(s))));
        }
        if let Some(g) = &docs.global_scores {
            complete.push(Box::new(|| write(files::GLOBAL, bytemuck::cast_slice(g))));
        }
        if let Some(stored) = &stored {
            complete.push(Box::new(|| {
                let mut out = ContainerWriter::create(&dir.join(files::DOCS.0), files::DOCS.1, build_id)?;
                stored.write(&mut out, n)?;
                out.finish()
            }));
        }
        complete.into_par_iter().try_for_each(|file| file())?;
        let static_scores = docs.static_scores.as_deref().map(StaticRange::of);
        let meta = IndexMeta {
            format_version: FORMAT_VERSION,
            codec: opts.codec,
            analyzer: opts.analyzer,
            bm25: opts.bm25,
            num_docs: n,
            num_terms,
            num_postings,
            total_doc_len,
            avg_doc_len: mean_doc_len(total_doc_len, n),
            static_scores,
            doc_order: opts.doc_order,
            stored_docs: stored.is_some(),
            shard,
            shards,
        };
        crate::meta::write(&dir.join(files::META.0), &meta, build_id)?;
        // Another build may have put an index at `out` meanwhile: it too is replaced only with --force.
        check_output(&out, opts.force)?;
        replace_dir(&dir, &out)?;
        tmp.keep = true;
        Ok(meta)
    }
}

/// The files of an index's lists as they are appended, in term order: the dictionary, and the term
/// records, the block metadata and the postings.
struct ListFiles {
    dict: TermDict,
    data: ListData,
    postings: ContainerWriter,
}

/// The term dictionary (`terms.fst`) as it is appended: each term numbered in order.
struct TermDict {
    fst: fst::MapBuilder<ContainerWriter>,
    /// The directory the files are written in, for errors.
    dir: PathBuf,
    num_terms: u64,
    last_term: Option<Vec<u8>>,
}

/// The lists' term records and block metadata as they are appended.
struct ListData {
    terms: ContainerWriter,
    blocks: ContainerWriter,
    num_postings: u64,
    num_blocks: u64,
    offset_words: u64,
}

impl ListFiles {
    fn check_order(&self, term: &[u8]) -> Result<()> {
        self.dict.check_order(term)
    }

    fn push(&mut self, list: EncodedList<'_>) -> Result<()> {
        self.dict.check_order(&list.term)?;
        self.data.push(&list)?;
        self.postings.write(bytemuck::cast_slice(&list.words[..]))?;
        self.dict.insert(&list.term)
    }

    /// Appends a window of lists: the dictionary, the records and block metadata, and the postings
    /// each on a thread of its own (the dictionary's inserts alone took as long as the writes).
    fn append(&mut self, window: Vec<Option<EncodedList<'_>>>) -> Result<()> {
        let (dict, data, postings) = (&mut self.dict, &mut self.data, &mut self.postings);
        let lists = || window.iter().flatten();
        let (inserted, (recorded, written)) = rayon::join(
            || lists().try_for_each(|list| dict.insert(&list.term)),
            || {
                rayon::join(
                    || lists().try_for_each(|list| data.push(list)),
                    || lists().try_for_each(|list| postings.write(bytemuck::cast_slice(&list.words[..]))),
                )
            },
        );
        inserted.and(recorded).and(written)
    }

    fn push_head(&mut self, term: &[u8], df: u32, cf: u64) -> Result<()> {
        self.dict.check_order(term)?;
        let record = list_record(df, 0, cf, 0.0, ListParams::default());
        self.data.terms.write(bytemuck::bytes_of(&record))?;
        self.data.num_postings += df as u64;
        self.dict.insert(term)
    }
}

impl TermDict {
    fn check_order(&self, term: &[u8]) -> Result<()> {
        if self.last_term.as_deref().is_some_and(|last| last >= term) {
            return Err(IndexError::Invalid(format!(
                "term '{}' is out of order or repeated",
                String::from_utf8_lossy(term)
            )));
        }
        Ok(())
    }

    /// Numbers `term`, which must come after the last one.
    fn insert(&mut self, term: &[u8]) -> Result<()> {
        self.check_order(term)?;
        self.fst
            .insert(term, self.num_terms)
            .map_err(|e| fst_error(&self.dir, e))?;
        self.num_terms += 1;
        // The last term kept in the buffer of the one before: no allocation a term.
        match &mut self.last_term {
            Some(last) => {
                last.clear();
                last.extend_from_slice(term);
            }
            None => self.last_term = Some(term.to_vec()),
        }
        Ok(())
    }
}

impl ListData {
    fn push(&mut self, list: &EncodedList<'_>) -> Result<()> {
        let mut record = list.record;
        record.first_block = self.num_blocks;
        record.offset_words = self.offset_words;
        self.blocks.write(bytemuck::cast_slice(&list.blocks[..]))?;
        self.terms.write(bytemuck::bytes_of(&record))?;
        self.num_postings += record.df as u64;
        self.num_blocks += list.blocks.len() as u64;
        self.offset_words += list.words.len() as u64;
        Ok(())
    }
}

fn fst_error(path: &Path, e: fst::Error) -> IndexError {
    match e {
        fst::Error::Io(cause) => IndexError::Io {
            path: path.join(files::TERMS_FST.0),
            cause,
        },
        other => IndexError::Invalid(format!("term dictionary: {other}")),
    }
}

/// Fails early when `out` exists and may not be replaced: without `force`, or when it is not an index,
/// or when it holds anything an index does not (notes, folders, the input itself), which a replacement
/// would delete with the old index. First renames back an old index a killed replacement left aside
/// and removes leftovers of dead processes beside `out` ([`crate::replace`]).
pub fn check_output(out: &Path, force: bool) -> Result<()> {
    clean_stale(out)?;
    if !out.exists() {
        return Ok(());
    }
    if !force {
        return Err(IndexError::Invalid(format!(
            "{} already exists: choose another --output or pass --force to replace it",
            out.display()
        )));
    }
    if !out.join(files::META.0).exists() {
        return Err(IndexError::Invalid(format!(
            "{} exists and is not a warpsearch index: refusing to replace it even with --force",
            out.display()
        )));
    }
    let foreign = crate::replace::foreign_entries(out)?;
    if !foreign.is_empty() {
        return Err(IndexError::Invalid(format!(
            "{} holds what an index does not ({}): --force replaces the whole directory and would \
             delete it; move it elsewhere, or choose another --output",
            out.display(),
            crate::replace::show_names(&foreign)
        )));
    }
    Ok(())
}

/// Fails when one of `inputs` lies inside `out`, which a build replaces with its own directory.
pub(crate) fn check_inputs_outside(inputs: &[PathBuf], out: &Path) -> Result<()> {
    let Ok(out) = std::fs::canonicalize(out) else {
        return Ok(());
    };
    for input in inputs {
        if std::fs::canonicalize(input).is_ok_and(|i| i.starts_with(&out)) {
            return Err(IndexError::Invalid(format!(
                "the input {} lies inside the output {}, which the build replaces: move the input \
                 elsewhere, or choose another --output",
                input.display(),
                out.display()
            )));
        }
    }
    Ok(())
}
