//! Common Index File Format (CIFF) import and export.
//!
//! A CIFF file is a sequence of length-delimited protobuf messages: one `Header`, then
//! `num_postings_lists` `PostingsList`s (docIDs gap-coded), then `num_doc_records` `DocRecord`s
//! (the definition is osirrc/ciff's `CommonIndexFileFormat.proto`; the messages are declared here with
//! `prost` derives, so no protobuf compiler is needed). `.gz` and `.zst` files are read transparently.
//!
//! Import reads the file twice: first to check it and collect document records (they come last, but
//! the block-max scores need document lengths), then to stream the lists into the index writer. The
//! first pass reads to the end of the file, so a compressed stream's checksum and length are checked,
//! and nothing is allocated from the header's counts or a length prefix before the bytes are there:
//! memory follows the size of the input, whatever a damaged or hostile file claims.
//! Terms must be in byte order (as Anserini and PISA write them) unless the file is uncompressed, in
//! which case the lists are visited in sorted order by seeking.
//!
//! Export writes every list and document. Static scores and the global-score table are not part of
//! CIFF; the analyzer, BM25 parameters and docID order travel in the header's description as JSON,
//! so `export` then `import` gives back an identical index for indexes without static scores.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prost::Message;
use serde::{Deserialize, Serialize};

use crate::analyzer::AnalyzerConfig;
use crate::bm25::Bm25Params;
use crate::error::{corrupt, IndexError, IoContext, Result};
use crate::format::{DocOrder, IndexMeta};
use crate::reader::Index;
use crate::writer::{check_output, DocTable, IndexWriter, WriterOptions};

/// CIFF header.
#[derive(Clone, PartialEq, Message)]
pub struct Header {
    /// Format version.
    #[prost(int32, tag = "1")]
    pub version: i32,
    /// PostingsList messages that follow.
    #[prost(int32, tag = "2")]
    pub num_postings_lists: i32,
    /// DocRecord messages that follow the lists.
    #[prost(int32, tag = "3")]
    pub num_doc_records: i32,
    /// Vocabulary size of the collection.
    #[prost(int32, tag = "4")]
    pub total_postings_lists: i32,
    /// Documents in the collection.
    #[prost(int32, tag = "5")]
    pub total_docs: i32,
    /// Sum of document lengths.
    #[prost(int64, tag = "6")]
    pub total_terms_in_collection: i64,
    /// Mean document length.
    #[prost(double, tag = "7")]
    pub average_doclength: f64,
    /// Free text.
    #[prost(string, tag = "8")]
    pub description: String,
}

/// One posting; `docid` is a gap from the previous posting's docID (the first is absolute).
#[derive(Clone, PartialEq, Message)]
pub struct Posting {
    /// DocID gap.
    #[prost(int32, tag = "1")]
    pub docid: i32,
    /// Term frequency.
    #[prost(int32, tag = "2")]
    pub tf: i32,
}

/// One term's list.
#[derive(Clone, PartialEq, Message)]
pub struct PostingsList {
    /// The term.
    #[prost(string, tag = "1")]
    pub term: String,
    /// Document frequency.
    #[prost(int64, tag = "2")]
    pub df: i64,
    /// Collection frequency.
    #[prost(int64, tag = "3")]
    pub cf: i64,
    /// Postings.
    #[prost(message, repeated, tag = "4")]
    pub postings: Vec<Posting>,
}

/// One document.
#[derive(Clone, PartialEq, Message)]
pub struct DocRecord {
    /// Internal docID.
    #[prost(int32, tag = "1")]
    pub docid: i32,
    /// External id.
    #[prost(string, tag = "2")]
    pub collection_docid: String,
    /// Length in tokens.
    #[prost(int32, tag = "3")]
    pub doclength: i32,
}

/// What warpsearch puts in the description so a round trip loses nothing.
#[derive(Serialize)]
struct Description {
    warpsearch: DescriptionBody,
}

/// The settings of a header's `description` when it holds warpsearch's (a JSON object with a
/// `warpsearch` key); `None` for anything else (free text, another tool's JSON). A setting that is
/// missing or of the wrong type is an error naming it, and the BM25 parameters must be ones an index
/// can be searched with: an import never silently drops a setting, nor writes an index no search
/// accepts.
fn description_settings(text: &str, path: &Path) -> Result<Option<DescriptionBody>> {
    let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(text) else {
        return Ok(None);
    };
    let Some(settings) = fields.remove("warpsearch") else {
        return Ok(None);
    };
    let bad = |what: String| {
        corrupt(
            path,
            format!("the header's description: {what}: correct the setting, or remove it"),
        )
    };
    let body: DescriptionBody = serde_path_to_error::deserialize(settings).map_err(|e| {
        let at = e.path().to_string();
        let name = if at == "." {
            "warpsearch".to_owned()
        } else {
            format!("warpsearch.{at}")
        };
        bad(format!("{name}: {}", e.inner()))
    })?;
    Bm25Params::checked(body.bm25.k1, body.bm25.b).map_err(|e| bad(format!("warpsearch.bm25: {e}")))?;
    Ok(Some(body))
}

#[derive(Serialize, Deserialize)]
struct DescriptionBody {
    analyzer: AnalyzerConfig,
    bm25: Bm25Params,
    doc_order: DocOrder,
}

/// Reads length-delimited messages, tracking the byte offset.
struct MessageReader<R> {
    input: R,
    path: PathBuf,
    offset: u64,
    buf: Vec<u8>,
}

impl MessageReader<Box<dyn BufRead + Send>> {
    fn open(path: &Path) -> Result<Self> {
        let name = path.to_string_lossy();
        let input: Box<dyn BufRead + Send> = if name.ends_with(".gz") {
            Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(
                File::open(path).at(path)?,
            )))
        } else {
            crate::build::input::open_text(path, Arc::new(AtomicU64::new(0)))?
        };
        Ok(MessageReader {
            input,
            path: path.to_owned(),
            offset: 0,
            buf: Vec::new(),
        })
    }
}

/// Whether the file can be read at arbitrary offsets (not compressed).
fn seekable(path: &Path) -> bool {
    let name = path.to_string_lossy();
    !name.ends_with(".gz") && !name.ends_with(".zst")
}

impl<R: BufRead> MessageReader<R> {
    /// Reads to the end of the input, which must hold nothing more: a compressed stream's checksum and
    /// length are checked only there.
    fn expect_end(&mut self) -> Result<()> {
        let mut rest = Vec::new();
        let extra = (&mut self.input)
            .take(1 << 16)
            .read_to_end(&mut rest)
            .map_err(|e| corrupt(&self.path, format!("after the last document record: {e}")))?;
        if extra > 0 {
            return Err(corrupt(
                &self.path,
                format!(
                    "unexpected bytes after the last document record (byte {}): the header's counts \
                     do not match the file",
                    self.offset
                ),
            ));
        }
        Ok(())
    }

    fn next<M: Message + Default>(&mut self, what: &str) -> Result<M> {
        let mut len = 0u64;
        for shift in (0..64).step_by(7) {
            let mut byte = [0u8];
            let read = self
                .input
                .read(&mut byte)
                .map_err(|e| corrupt(&self.path, format!("reading {what}: {e}")))?;
            if read == 0 {
                return Err(corrupt(
                    &self.path,
                    format!("file ends before {what} (truncated CIFF?)"),
                ));
            }
            self.offset += 1;
            len |= ((byte[0] & 0x7f) as u64) << shift;
            if byte[0] < 0x80 {
                break;
            }
        }
        if len > 1 << 31 {
            return Err(corrupt(&self.path, format!("{what} claims {len} bytes")));
        }
        // Read what is there rather than allocate what the prefix claims: memory follows the input.
        self.buf.clear();
        let got = (&mut self.input)
            .take(len)
            .read_to_end(&mut self.buf)
            .map_err(|e| corrupt(&self.path, format!("reading {what}: {e}")))?;
        if (got as u64) < len {
            return Err(corrupt(
                &self.path,
                format!("file ends inside {what} (truncated CIFF?)"),
            ));
        }
        self.offset += len;
        M::decode(self.buf.as_slice())
            .map_err(|e| corrupt(&self.path, format!("{what} at byte {}: {e}", self.offset)))
    }
}

/// Options for [`import`].
#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    /// Codec, BM25 parameters, force. Analyzer and docID order come from the file's description when
    /// warpsearch wrote it, else from here.
    pub writer: WriterOptions,
    /// Use `writer.analyzer` even when the description names one.
    pub analyzer_override: bool,
}

/// Imports the CIFF file `path` as an index at `output`.
pub fn import(path: &Path, output: &Path, opts: ImportOptions) -> Result<IndexMeta> {
    check_output(output, opts.writer.force)?;
    crate::writer::check_inputs_outside(&[path.to_owned()], output)?;
    // Pass 1: header, list offsets (checked for order), document records.
    let mut r = MessageReader::open(path)?;
    let header: Header = r.next("the header")?;
    let count = |v: i32, what: &str| {
        usize::try_from(v).map_err(|_| corrupt(path, format!("header gives a negative {what} ({v})")))
    };
    let num_lists = count(header.num_postings_lists, "number of postings lists")?;
    let num_docs = count(header.num_doc_records, "number of document records")?;
    // The header's counts are untrusted: nothing is allocated from them, vectors grow with what is read.
    let mut offsets: Vec<(String, u64)> = Vec::new();
    let mut sorted = true;
    for i in 0..num_lists {
        let start = r.offset;
        let list: PostingsList = r.next(&format!("postings list {i}"))?;
        if offsets
            .last()
            .is_some_and(|(t, _)| t.as_bytes() >= list.term.as_bytes())
        {
            sorted = false;
        }
        offsets.push((list.term, start));
    }
    let mut records: Vec<DocRecord> = Vec::new();
    for i in 0..num_docs {
        let d: DocRecord = r.next(&format!("document record {i}"))?;
        crate::build::input::check_doc_id(&d.collection_docid)
            .map_err(|what| corrupt(path, format!("document record {i}: {what}")))?;
        records.push(d);
    }
    r.expect_end()?;
    // num_docs records were read, so these are as large as the input.
    let mut lens = vec![u32::MAX; num_docs];
    let mut ids: Vec<String> = vec![String::new(); num_docs];
    for (i, d) in records.into_iter().enumerate() {
        let slot = usize::try_from(d.docid)
            .ok()
            .filter(|&s| s < num_docs)
            .ok_or_else(|| {
                corrupt(
                    path,
                    format!("document record {i} has docid {} outside 0..{num_docs}", d.docid),
                )
            })?;
        if lens[slot] != u32::MAX {
            return Err(corrupt(
                path,
                format!("docid {} has two document records", d.docid),
            ));
        }
        lens[slot] = u32::try_from(d.doclength).map_err(|_| {
            corrupt(
                path,
                format!("docid {} has negative length {}", d.docid, d.doclength),
            )
        })?;
        ids[slot] = d.collection_docid;
    }
    drop(r);
    // A run names documents by these ids: two documents of one id would be one in every run.
    let mut first_of: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(num_docs);
    for (docid, id) in ids.iter().enumerate() {
        if let Some(first) = first_of.insert(id, docid) {
            return Err(corrupt(
                path,
                format!(
                    "the document id '{id}' is given to docids {first} and {docid}: document ids must be \
                     unique"
                ),
            ));
        }
    }
    drop(first_of);
    if !sorted {
        offsets.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        if let Some(w) = offsets.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(corrupt(path, format!("term '{}' has two postings lists", w[0].0)));
        }
        if !seekable(path) {
            return Err(IndexError::Invalid(format!(
                "{}: terms are not in byte order; decompress the file so it can be read in sorted order",
                path.display()
            )));
        }
    }

    let description = description_settings(&header.description, path)?;
    let mut writer_opts = opts.writer;
    if let Some(d) = &description {
        if !opts.analyzer_override {
            writer_opts.analyzer = d.analyzer;
        }
        writer_opts.doc_order = d.doc_order;
        writer_opts.bm25 = d.bm25;
    }
    let mut table = DocTable {
        lens,
        ..Default::default()
    };
    for id in &ids {
        table.ids.push(id);
    }
    let mut writer = IndexWriter::create(output, writer_opts, table)?;

    // Pass 2: the lists, in byte order.
    let mut r = MessageReader::open(path)?;
    let _: Header = r.next("the header")?;
    let mut file = if sorted {
        None
    } else {
        Some(File::open(path).at(path)?)
    };
    let (mut docs, mut freqs) = (Vec::new(), Vec::new());
    for (i, (term, offset)) in offsets.iter().enumerate() {
        let list: PostingsList = match &mut file {
            None => r.next(&format!("postings list {i}"))?,
            Some(f) => {
                f.seek(SeekFrom::Start(*offset)).at(path)?;
                let input = BufReader::with_capacity(1 << 16, &mut *f);
                MessageReader {
                    input,
                    path: path.to_owned(),
                    offset: *offset,
                    buf: Vec::new(),
                }
                .next(&format!("postings list of '{term}'"))?
            }
        };
        decode_list(&list, num_docs, path, &mut docs, &mut freqs)?;
        writer.add_term(list.term.as_bytes(), &docs, &freqs)?;
    }
    writer.finish()
}

/// Checks one list and turns its gaps into docIDs.
fn decode_list(
    list: &PostingsList,
    num_docs: usize,
    path: &Path,
    docs: &mut Vec<u32>,
    freqs: &mut Vec<u32>,
) -> Result<()> {
    let bad = |what: String| corrupt(path, format!("postings list of '{}': {what}", list.term));
    if list.df != list.postings.len() as i64 {
        return Err(bad(format!(
            "df is {} but it holds {} postings",
            list.df,
            list.postings.len()
        )));
    }
    docs.clear();
    freqs.clear();
    let mut doc = 0i64;
    for (i, p) in list.postings.iter().enumerate() {
        if p.docid < 0 || (i > 0 && p.docid == 0) {
            return Err(bad(format!(
                "posting {i} has docid gap {}: docIDs must increase",
                p.docid
            )));
        }
        doc += p.docid as i64;
        if doc >= num_docs as i64 {
            return Err(bad(format!("docID {doc} is not below the {num_docs} documents")));
        }
        if p.tf < 1 {
            return Err(bad(format!("posting {i} has term frequency {}", p.tf)));
        }
        docs.push(doc as u32);
        freqs.push(p.tf as u32);
    }
    let cf: i64 = freqs.iter().map(|&f| f as i64).sum();
    if list.cf != cf {
        return Err(bad(format!("cf is {} but the frequencies sum to {cf}", list.cf)));
    }
    Ok(())
}

/// Writes `index` as a CIFF file at `path` (plain, or compressed when the name ends in `.gz`/`.zst`).
pub fn export(index: &Index, path: &Path) -> Result<()> {
    let m = index.meta();
    let too_big = |what: &str| IndexError::Invalid(format!("{what} exceeds CIFF's 32-bit limits"));
    let num_terms = i32::try_from(m.num_terms).map_err(|_| too_big("the vocabulary"))?;
    let num_docs = i32::try_from(m.num_docs).map_err(|_| too_big("the number of documents"))?;
    let description = Description {
        warpsearch: DescriptionBody {
            analyzer: m.analyzer,
            bm25: m.bm25,
            doc_order: m.doc_order,
        },
    };
    let header = Header {
        version: 1,
        num_postings_lists: num_terms,
        num_doc_records: num_docs,
        total_postings_lists: num_terms,
        total_docs: num_docs,
        total_terms_in_collection: m.total_doc_len as i64,
        average_doclength: m.avg_doc_len,
        description: serde_json::to_string(&description).expect("description serialises"),
    };
    // Written as `.NAME.tmp-PID` and renamed when complete (removed on failure, and by a later export
    // to the same path if this process is killed).
    crate::replace::write_file_atomically(path, |file| {
        let name = path.to_string_lossy().to_lowercase();
        let buffered = BufWriter::with_capacity(1 << 20, file);
        let mut out = if name.ends_with(".gz") {
            Sink::Gz(flate2::write::GzEncoder::new(
                buffered,
                flate2::Compression::default(),
            ))
        } else if name.ends_with(".zst") {
            Sink::Zst(zstd::Encoder::new(buffered, 3).at(path)?)
        } else {
            Sink::Plain(buffered)
        };
        write_messages(index, &header, &mut out, path)?;
        out.finish().at(path)
    })
}

/// Where [`export`] writes: a compressed stream must be finished explicitly, so its errors are seen.
enum Sink<W: Write> {
    Plain(W),
    Gz(flate2::write::GzEncoder<W>),
    Zst(zstd::Encoder<'static, W>),
}

impl<W: Write> Sink<W> {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Plain(w) => w,
            Sink::Gz(w) => w,
            Sink::Zst(w) => w,
        }
    }

    fn finish(self) -> std::io::Result<()> {
        let mut inner = match self {
            Sink::Plain(w) => w,
            Sink::Gz(w) => w.finish()?,
            Sink::Zst(w) => w.finish()?,
        };
        inner.flush()
    }
}

fn write_messages<W: Write>(index: &Index, header: &Header, out: &mut Sink<W>, path: &Path) -> Result<()> {
    let mut buf = Vec::new();
    let mut put = |msg: &dyn MessageLike, out: &mut Sink<W>| -> Result<()> {
        buf.clear();
        msg.encode_delimited(&mut buf);
        out.writer().write_all(&buf).at(path)
    };
    put(header, out)?;
    for (term, id) in index.terms() {
        let (docs, freqs) = index.postings(id).decode_all()?;
        let mut previous = 0u32;
        let postings = docs
            .iter()
            .zip(&freqs)
            .map(|(&d, &f)| {
                let gap = d - previous;
                previous = d;
                Posting {
                    docid: gap as i32,
                    tf: f as i32,
                }
            })
            .collect();
        let record = index.term_records()[id as usize];
        let list = PostingsList {
            term: String::from_utf8(term).map_err(|_| corrupt(index.dir(), "a term is not UTF-8"))?,
            df: record.df as i64,
            cf: record.cf as i64,
            postings,
        };
        put(&list, out)?;
    }
    for (d, &len) in index.doc_lens().iter().enumerate() {
        let record = DocRecord {
            docid: d as i32,
            collection_docid: index.doc_id(d as u32).to_owned(),
            doclength: len as i32,
        };
        put(&record, out)?;
    }
    Ok(())
}

trait MessageLike {
    fn encode_delimited(&self, buf: &mut Vec<u8>);
}

impl<M: Message> MessageLike for M {
    fn encode_delimited(&self, buf: &mut Vec<u8>) {
        self.encode_length_delimited(buf).expect("a Vec grows as needed");
    }
}
