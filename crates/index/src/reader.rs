//! Opening an index directory and reading its posting lists.
//!
//! Every file is opened relative to one directory handle, memory-mapped and checked (magic, kind,
//! version, build identity, length, CRC) when the index opens. Then the structure behind the checksums
//! is checked, in time linear in the files (as the CRC already is): the term dictionary node by node,
//! every term record against the files it points into, every block's skip data. A reader can trust
//! offsets, docIDs and dictionary lookups afterwards, and a damaged index never panics. Block contents
//! are still decoded defensively: a damaged block is an error naming its term.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use warpsearch_codec::{Codec, BLOCK_LEN};

use crate::bm25::{mean_doc_len, Bm25};
use crate::container::FORMAT_VERSION;
use crate::container::{self, Payload};
use crate::error::{corrupt, IndexError, IoContext, Result};
use crate::format::{files, BlockMeta, DocOrder, IndexMeta, StaticRange, TermRecord};
use crate::store::Store;
use crate::termdict::{self, term_name, term_text};

/// An open, read-only index.
pub struct Index {
    /// This open index's number in the process ([`Index::uid`]).
    uid: u64,
    /// The documents in the order of their ids, made at the first [`Index::find_doc`].
    by_id: std::sync::OnceLock<Vec<u32>>,
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
    /// `docs.bin`, where the index stores its documents.
    store: Option<Store>,
    /// A sharded index's shards, in docID order (none for an index of one directory).
    shards: Vec<Shard>,
}

/// Marks a head term that a shard lacks in [`Shard::local_term`]'s map.
pub(crate) const ABSENT: u32 = u32::MAX;

/// One shard of an open sharded index: its index, where its documents start in the collection, and
/// the head's term ordinals in its dictionary (opened and checked by [`crate::shards`]).
pub struct Shard {
    pub(crate) index: std::sync::Arc<Index>,
    pub(crate) first_doc: u32,
    /// The shard's ordinal of each head term ([`ABSENT`] where it has none).
    pub(crate) local: Vec<u32>,
}

impl Shard {
    /// The shard's index (document numbers from 0: add [`Shard::first_doc`] for the collection's).
    pub fn index(&self) -> &std::sync::Arc<Index> {
        &self.index
    }

    /// The collection docID of the shard's document 0.
    pub fn first_doc(&self) -> u32 {
        self.first_doc
    }

    /// The shard's ordinal of the head's term `id`, if the shard has the term.
    pub fn local_term(&self, id: u32) -> Option<u32> {
        self.local.get(id as usize).copied().filter(|&l| l != ABSENT)
    }
}

/// How often [`Index::open`] starts over when the files it opened turn out to come from two builds (or
/// one vanished), i.e. when the index was replaced while it was being opened.
const OPEN_ATTEMPTS: u32 = 5;

/// The index directory, opened once; every file is opened relative to this handle, so a rename of
/// another index onto the path between two opens cannot mix the files of two builds.
struct DirHandle {
    path: PathBuf,
    #[cfg(unix)]
    fd: rustix::fd::OwnedFd,
}

impl DirHandle {
    fn open(path: &Path) -> Result<DirHandle> {
        #[cfg(unix)]
        {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = rustix::fs::open(path, flags, Mode::empty())
                .map_err(std::io::Error::from)
                .at(path)?;
            Ok(DirHandle {
                path: path.to_owned(),
                fd,
            })
        }
        #[cfg(not(unix))]
        Ok(DirHandle {
            path: path.to_owned(),
        })
    }

    /// Opens file `name` of the directory; `Ok(None)` when it does not exist. Anything but a regular
    /// file (a FIFO, a device, a directory) is refused, without waiting on it: the open does not block
    /// (`O_NONBLOCK`, which changes nothing for a regular file's reads and mappings).
    fn file(&self, name: &str) -> Result<Option<std::fs::File>> {
        let path = self.path.join(name);
        #[cfg(unix)]
        let opened = {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
            rustix::fs::openat(&self.fd, name, flags, Mode::empty())
                .map(std::fs::File::from)
                .map_err(std::io::Error::from)
        };
        #[cfg(not(unix))]
        let opened = match std::fs::metadata(&path) {
            Ok(m) if !m.is_file() => Err(std::io::Error::other("not a regular file")),
            _ => std::fs::File::open(&path),
        };
        let file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at(path),
        };
        if !file.metadata().at(&path)?.is_file() {
            return Err(corrupt(
                path,
                "not a regular file (a FIFO, a device or a directory): an index holds regular files \
                 only; rebuild the index",
            ));
        }
        Ok(Some(file))
    }
}

/// Checks file `f` (opened as `file`, named `path` in errors) and returns its payload: `postings.bin`
/// memory-mapped, every other file read into memory. The open-time check vouches for the structure
/// (offsets, skip data, the dictionary, the id table) that readers then trust without checking, so
/// that structure must not change under an open index: held in memory, it cannot. Posting blocks are
/// decoded defensively on every use, so they can stay in the mapping, shared with the page cache
/// (they are most of an index), where a change is caught by [`Index::check_unchanged`].
///
/// `docs.bin`, the stored documents, is mapped too: its tables are copied out of the mapping when
/// checked, and its blocks are decompressed defensively on every use.
fn load(file: std::fs::File, path: &Path, f: (&str, &[u8; 8])) -> Result<Payload> {
    if f.0 == files::POSTINGS.0 || f.0 == files::DOCS.0 {
        container::open_file(file, path, f.1)
    } else {
        container::read_file(file, path, f.1)
    }
}

/// Why one attempt at opening failed: for good, or because the index changed underneath.
enum Attempt {
    Failed(IndexError),
    Raced(IndexError),
}

impl From<IndexError> for Attempt {
    fn from(e: IndexError) -> Self {
        Attempt::Failed(e)
    }
}

impl Index {
    /// Opens and checks the index in `dir` as [`Index::open`] does, a shard included, without opening
    /// a head's shards.
    pub(crate) fn open_member(dir: &Path) -> Result<Index> {
        crate::replace::recover(dir);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Index::open_once(dir) {
                Ok(index) => return Ok(index),
                Err(Attempt::Failed(e)) => return Err(e),
                Err(Attempt::Raced(e)) if attempt >= OPEN_ATTEMPTS => return Err(e),
                Err(Attempt::Raced(_)) => {
                    std::thread::sleep(std::time::Duration::from_millis(5 * attempt as u64))
                }
            }
        }
    }

    fn open_once(dir: &Path) -> std::result::Result<Index, Attempt> {
        let not_index = || {
            IndexError::Invalid(format!(
                "{} is not a warpsearch index (no {}): build one with `warpsearch index`",
                dir.display(),
                files::META.0
            ))
        };
        if !dir.is_dir() {
            return Err(Attempt::Failed(not_index()));
        }
        let handle = DirHandle::open(dir)?;
        let Some(meta_file) = handle.file(files::META.0)? else {
            return Err(Attempt::Failed(not_index()));
        };
        let meta_path = dir.join(files::META.0);
        let meta_file = crate::meta::read(meta_file, &meta_path)?;
        let version = crate::meta::expected_version(&meta_file, &meta_path)?;
        let crate::meta::MetaFile { meta, build_id, .. } = meta_file;
        if meta.format_version != version {
            return Err(Attempt::Failed(corrupt(
                &meta_path,
                format!(
                    "format_version {}; this build reads version {FORMAT_VERSION} (and {} in the binary \
                     envelope): rebuild the index",
                    meta.format_version,
                    crate::meta::ENVELOPED_VERSION
                ),
            )));
        }
        // A file missing here is damage, or the directory being removed after a replacement: the
        // latter is a race, tried again from the path.
        let optional = |f: (&str, &[u8; 8])| -> std::result::Result<Option<Payload>, Attempt> {
            let Some(file) = handle.file(f.0)? else {
                return Ok(None);
            };
            let path = dir.join(f.0);
            let payload = load(file, &path, f)?;
            if payload.build_id() != build_id {
                return Err(Attempt::Raced(corrupt(
                    &path,
                    format!(
                        "belongs to another build than {} (files copied between indexes, or the index \
                         was replaced while it was opened): rebuild the index",
                        files::META.0
                    ),
                )));
            }
            // One build writes one version; a file of another beside the same identity was edited.
            if payload.version() != version {
                return Err(Attempt::Failed(corrupt(
                    &path,
                    format!(
                        "format version {}, {} says {version}: rebuild the index",
                        payload.version(),
                        files::META.0
                    ),
                )));
            }
            Ok(Some(payload))
        };
        let open = |f: (&str, &[u8; 8])| -> std::result::Result<Payload, Attempt> {
            optional(f)?.ok_or_else(|| {
                Attempt::Raced(corrupt(
                    dir.join(f.0),
                    "missing: the index is incomplete (or was replaced while it was opened); rebuild it",
                ))
            })
        };
        let store = match (meta.stored_docs, optional(files::DOCS)?) {
            (_, Some(payload)) => Some(Store::open(payload, &dir.join(files::DOCS.0), meta.num_docs)?),
            (true, None) => {
                open(files::DOCS)?;
                None
            }
            (false, None) => None,
        };
        let fst_path = dir.join(files::TERMS_FST.0);
        let fst_payload = open(files::TERMS_FST)?;
        let terms_fst = termdict::open(fst_payload, &fst_path)?;
        let index = Index {
            terms: open(files::TERMS)?,
            blocks: open(files::BLOCKS)?,
            postings: open(files::POSTINGS)?,
            doc_lens: open(files::DOC_LENS)?,
            doc_ids: open(files::DOC_IDS)?,
            static_scores: if meta.static_scores.is_some() {
                Some(open(files::STATIC)?)
            } else {
                optional(files::STATIC)?
            },
            global_scores: if matches!(meta.doc_order, DocOrder::GlobalScore { .. }) {
                Some(open(files::GLOBAL)?)
            } else {
                optional(files::GLOBAL)?
            },
            terms_fst,
            store,
            shards: Vec::new(),
            uid: next_uid(),
            by_id: std::sync::OnceLock::new(),
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
        if m.num_docs > u32::MAX as u64 || m.num_terms > u32::MAX as u64 {
            return Err(corrupt(
                path(files::META),
                "counts beyond 32-bit docIDs or term ordinals",
            ));
        }
        // BM25 scores with the stored mean: one that is not the mean scores every document wrongly.
        let mean = mean_doc_len(m.total_doc_len, m.num_docs);
        if m.avg_doc_len.to_bits() != mean.to_bits() {
            return Err(corrupt(
                path(files::META),
                format!(
                    "avg_doc_len {} is not total_doc_len / num_docs = {} / {} = {mean}",
                    m.avg_doc_len, m.total_doc_len, m.num_docs
                ),
            ));
        }
        sized(&self.terms, size_of::<TermRecord>(), m.num_terms, files::TERMS)?;
        sized(&self.doc_lens, 4, m.num_docs, files::DOC_LENS)?;
        let total: u64 = self.doc_lens().par_iter().map(|&l| l as u64).sum();
        if total != m.total_doc_len {
            return Err(corrupt(
                path(files::DOC_LENS),
                format!(
                    "the lengths sum to {total}, {} says total_doc_len {}",
                    files::META.0,
                    m.total_doc_len
                ),
            ));
        }
        for (p, f) in [
            (&self.static_scores, files::STATIC),
            (&self.global_scores, files::GLOBAL),
        ] {
            if let Some(p) = p {
                sized(p, 4, m.num_docs, f)?;
                let scores: &[f32] = bytemuck::cast_slice(p.bytes());
                if scores.iter().any(|s| !s.is_finite()) {
                    return Err(corrupt(path(f), "a score is not a finite number"));
                }
            }
        }
        if let Some(scores) = self.static_scores() {
            // Static scores are normalised by the stored range: the range must be theirs.
            let range = StaticRange::of(scores);
            if m.static_scores != Some(range) {
                return Err(corrupt(
                    path(files::STATIC),
                    format!(
                        "the scores range from {} to {}, {} says {}",
                        range.min,
                        range.max,
                        files::META.0,
                        m.static_scores
                            .map_or("none".into(), |r| format!("{} to {}", r.min, r.max))
                    ),
                ));
            }
        }
        if let Some(scores) = self.global_scores() {
            // Early termination stops on this order: scores that rise would stop it too soon.
            if let Some(d) = scores.par_windows(2).position_first(|w| w[0] < w[1]) {
                return Err(corrupt(
                    path(files::GLOBAL),
                    format!(
                        "global scores must not increase with the docID; document {} has {}, document {} \
                         has {}",
                        d,
                        scores[d],
                        d + 1,
                        scores[d + 1]
                    ),
                ));
            }
        }
        termdict::check(&self.terms_fst, m.num_terms, &path(files::TERMS_FST))?;
        if !self.blocks.bytes().len().is_multiple_of(size_of::<BlockMeta>()) {
            return Err(corrupt(
                path(files::BLOCKS),
                format!(
                    "{} bytes: not a whole number of {}-byte records",
                    self.blocks.bytes().len(),
                    size_of::<BlockMeta>()
                ),
            ));
        }
        if !self.postings.bytes().len().is_multiple_of(4) {
            return Err(corrupt(
                path(files::POSTINGS),
                format!(
                    "{} bytes: not a whole number of 4-byte words",
                    self.postings.bytes().len()
                ),
            ));
        }
        // A head's own structure (no lists) is checked with its shards ([`crate::shards::check_head`]).
        if m.shards.is_some() {
            return self.check_doc_ids();
        }
        let (num_blocks, num_words) = (self.block_metas().len() as u64, self.words().len() as u64);
        let records = self.term_records();
        // Where list `id` must start: lists are written back to back in term order, and anything
        // else is damage. (A list whose end overflows is itself refused, at a lower ordinal.)
        let start = |id: usize| -> (u64, u64) {
            id.checked_sub(1).map_or((0, 0), |p| {
                let p = &records[p];
                (
                    p.first_block.wrapping_add(p.num_blocks() as u64),
                    p.offset_words.wrapping_add(p.len_words as u64),
                )
            })
        };
        // Every list and its skip data, on all cores (14 million lists and 57 million blocks on the
        // 25M collection: a second of one thread at every open); the lowest damaged ordinal is
        // reported, as a serial pass would.
        let damage = (0..records.len())
            .into_par_iter()
            .with_min_len(1024)
            .find_map_first(|id| {
                let r = &records[id];
                let (next_block, next_word) = start(id);
                let blocks_end = r.first_block.checked_add(r.num_blocks() as u64);
                let words_end = r.offset_words.checked_add(r.len_words as u64);
                if r.df == 0
                    || r.first_block != next_block
                    || r.offset_words != next_word
                    || blocks_end.is_none_or(|e| e > num_blocks)
                    || words_end.is_none_or(|e| e > num_words)
                    || !(r.max_score.is_finite() && r.max_score >= 0.0)
                {
                    return Some(corrupt(
                        path(files::TERMS),
                        format!("{} points outside the posting files", self.term_name(id as u32)),
                    ));
                }
                self.check_blocks(id as u32, r).err()
            });
        if let Some(e) = damage {
            return Err(e);
        }
        if start(records.len()) != (num_blocks, num_words) {
            return Err(corrupt(
                path(files::TERMS),
                "the lists do not cover the posting files",
            ));
        }
        let postings: u64 = records.par_iter().map(|r| r.df as u64).sum();
        if postings != m.num_postings {
            return Err(corrupt(
                path(files::TERMS),
                "posting count differs from the metadata",
            ));
        }
        self.check_doc_ids()
    }

    /// The id table: offsets from 0, not decreasing, ending at the text's length, on character
    /// boundaries of UTF-8 text.
    fn check_doc_ids(&self) -> Result<()> {
        let m = &self.meta;
        let ids = self.doc_ids.bytes();
        let n = m.num_docs as usize;
        let offsets_ok = ids.len() >= 8 * (n + 1) && {
            let offsets: &[u64] = bytemuck::cast_slice(&ids[..8 * (n + 1)]);
            let text = &ids[8 * (n + 1)..];
            offsets[0] == 0
                && offsets.windows(2).all(|w| w[0] <= w[1])
                && offsets[n] as usize == text.len()
                && std::str::from_utf8(text)
                    .is_ok_and(|t| offsets.iter().all(|&o| t.is_char_boundary(o as usize)))
        };
        if !offsets_ok {
            return Err(corrupt(
                self.dir.join(files::DOC_IDS.0),
                "document id table is inconsistent",
            ));
        }
        Ok(())
    }

    /// The skip data of one list: docIDs increasing across blocks and below the number of documents,
    /// block offsets increasing inside the list, bounds finite and below the list's.
    fn check_blocks(&self, id: u32, r: &TermRecord) -> Result<()> {
        let first = r.first_block as usize;
        let blocks = &self.block_metas()[first..first + r.num_blocks()];
        let mut previous: Option<&BlockMeta> = None;
        for (i, b) in blocks.iter().enumerate() {
            let end = blocks.get(i + 1).map_or(r.len_words, |n| n.offset);
            let ok = b.first_doc <= b.last_doc
                && (b.last_doc as u64) < self.meta.num_docs
                && previous.is_none_or(|p| p.last_doc < b.first_doc)
                && (i > 0 || b.offset == 0)
                && b.offset <= end
                && end <= r.len_words
                && b.freq_offset <= end - b.offset
                && b.max_score.is_finite()
                && b.max_score >= 0.0
                && b.max_score <= r.max_score;
            if !ok {
                return Err(corrupt(
                    self.dir.join(files::BLOCKS.0),
                    format!("skip data of {}, block {i}, is inconsistent", self.term_name(id)),
                ));
            }
            previous = Some(b);
        }
        Ok(())
    }

    /// An error when a memory-mapped file of the index (`postings.bin`) was written in place or
    /// truncated since the index was opened: answers computed since may be wrong (and a truncation can
    /// kill the process with SIGBUS before this can tell). One `fstat`: check once per batch of
    /// queries, after it, before its answers are used. The other files are held in memory and cannot
    /// change.
    pub fn check_unchanged(&self) -> Result<()> {
        self.postings.check_unchanged(&self.dir.join(files::POSTINGS.0))?;
        for shard in &self.shards {
            shard.index().check_unchanged()?;
        }
        match &self.store {
            Some(store) => store.check_unchanged(&self.dir.join(files::DOCS.0)),
            None => Ok(()),
        }
    }

    /// `term 'TEXT'` for ordinal `id` (a scan of the dictionary: for messages only).
    pub fn term_name(&self, id: u32) -> String {
        term_name(&self.terms_fst, id)
    }

    /// The build identity every file of this index carries.
    pub(crate) fn build_id(&self) -> u64 {
        self.terms.build_id()
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

    /// BM25 with the index's parameters and the statistics it scores with: its own, or a shard's
    /// collection's.
    pub fn bm25(&self) -> Bm25 {
        let (num_docs, avg_doc_len) = match &self.meta.shard {
            Some(s) => (s.collection.num_docs, s.collection.avg_doc_len),
            None => (self.meta.num_docs, self.meta.avg_doc_len),
        };
        Bm25 {
            params: self.meta.bm25,
            num_docs,
            avg_doc_len: avg_doc_len as f32,
        }
    }

    /// The range `bm25-static` normalises static scores by: the index's own, or a shard's
    /// collection's (None without static scores).
    pub fn static_range(&self) -> Option<StaticRange> {
        match &self.meta.shard {
            Some(s) => s.collection.static_scores,
            None => self.meta.static_scores,
        }
    }

    /// A sharded index's shards, in docID order; empty for an index of one directory. A sharded
    /// index's head has no posting lists (its term records hold the collection's document
    /// frequencies only): queries are answered by its shards.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// A head with its shards, opened and checked ([`crate::shards::open_shards`]).
    pub(crate) fn with_shards(self, shards: Vec<Shard>) -> Index {
        Index { shards, ..self }
    }

    /// Whether this is the head of a sharded index.
    pub fn is_sharded(&self) -> bool {
        self.meta.shards.is_some()
    }

    /// A number no other index opened by this process has: caches of what an index holds key on it.
    pub fn uid(&self) -> u64 {
        self.uid
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

    /// The posting list of term `id` (an index with lists: a sharded index's head has none, its
    /// shards do, and this panics on it).
    pub fn postings(&self, id: u32) -> PostingList<'_> {
        let record = self.term_records()[id as usize];
        let first = record.first_block as usize;
        let start = record.offset_words as usize;
        PostingList {
            codec: self.meta.codec,
            num_docs: self.num_docs(),
            term: id,
            terms_fst: &self.terms_fst,
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
        let (offsets, text) = self.id_table();
        let bytes = &text[offsets[doc as usize] as usize..offsets[doc as usize + 1] as usize];
        // Checked as UTF-8 as a whole at open; an id boundary inside a character is still possible in
        // a damaged file, so fall back to a visible marker instead of panicking.
        std::str::from_utf8(bytes).unwrap_or("\u{FFFD}")
    }

    /// Calls `f` with the id of each of `docs`, in order, as [`Index::doc_id`] gives it, until `f`
    /// fails. Each id costs two cache misses in a large table (its offsets, then its text), and
    /// checking one id's text waits for both; here the offsets of 16 ids are read first, then the first
    /// byte of each text, then the texts are checked, so that the misses of a batch overlap (a server
    /// writes 10 to 1,000 ids a query).
    pub fn try_for_each_doc_id<E>(
        &self,
        docs: impl IntoIterator<Item = u32>,
        mut f: impl FnMut(&str) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        const AHEAD: usize = 16;
        let (offsets, text) = self.id_table();
        let mut docs = docs.into_iter().peekable();
        while docs.peek().is_some() {
            let mut spans = [(0, 0); AHEAD];
            let mut k = 0;
            for (span, doc) in spans.iter_mut().zip(docs.by_ref()) {
                *span = (offsets[doc as usize] as usize, offsets[doc as usize + 1] as usize);
                k += 1;
            }
            let mut first = 0u8;
            for &(start, _) in &spans[..k] {
                first ^= text.get(start).copied().unwrap_or(0);
            }
            // The loads above must happen (their value is not needed).
            std::hint::black_box(first);
            for &(start, end) in &spans[..k] {
                // As in `doc_id`: checked at open; a damaged file shows a marker, never panics.
                f(std::str::from_utf8(&text[start..end]).unwrap_or("\u{FFFD}"))?;
            }
        }
        Ok(())
    }

    /// The id table: each document's offset into the ids' text (one more than the documents), and the
    /// text.
    fn id_table(&self) -> (&[u64], &[u8]) {
        let ids = self.doc_ids.bytes();
        let n = self.meta.num_docs as usize;
        let (offsets, text) = ids.split_at(8 * (n + 1));
        (bytemuck::cast_slice(offsets), text)
    }

    /// The stored documents (`index --store`), if the index has them.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// The stored input line of document `doc` (its JSON object, or its `id<TAB>text` line): `Ok(None)`
    /// where the index stores no documents, an error for a number out of range or a damaged block.
    pub fn doc(&self, doc: u32) -> Result<Option<String>> {
        self.store.as_ref().map(|s| s.get(doc)).transpose()
    }

    /// The number of the document whose external id is `id`, if any: a binary search of the
    /// documents ordered by id (ids are unique: a build refuses a repeated one). The order, four
    /// bytes a document, is sorted on all cores at the first lookup and kept, so that a server's or a
    /// program's lookups each cost O(log n) instead of a scan of every id.
    pub fn find_doc(&self, id: &str) -> Option<u32> {
        let (offsets, text) = self.id_table();
        let id_of = |d: u32| {
            let (s, e) = (offsets[d as usize] as usize, offsets[d as usize + 1] as usize);
            text.get(s..e).unwrap_or_default()
        };
        let order = self.by_id.get_or_init(|| {
            let mut order: Vec<u32> = (0..self.num_docs()).collect();
            order.par_sort_unstable_by(|&a, &b| id_of(a).cmp(id_of(b)));
            order
        });
        let id = id.as_bytes();
        let at = order.binary_search_by(|&d| id_of(d).cmp(id)).ok()?;
        Some(order[at])
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
    terms_fst: &'a fst::Map<Payload>,
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

    fn error(&self, block: usize, cause: warpsearch_codec::CodecError) -> IndexError {
        IndexError::Codec {
            term: term_text(self.terms_fst, self.term),
            block,
            cause,
        }
    }
}

static NEXT_UID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A number no other index opened by this process has (never 0).
fn next_uid() -> u64 {
    NEXT_UID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
