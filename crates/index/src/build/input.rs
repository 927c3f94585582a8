//! Reading a collection's files: `.jsonl`, `.json` or `.tsv` files, plain or `.zst`/`.gz` compressed, or
//! a directory tree of them, as lines of bounded length. A UTF-8 byte-order mark at the start of a file
//! is skipped.
//!
//! Each non-blank line is one document: what it holds (a JSON object's fields, or `id<TAB>text`) is
//! [`Schema`]'s business, detected from the collection's first line.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{IndexError, IoContext, Result};

pub use super::schema::{Doc, FieldChoice, Schema};

/// File names (compared case-insensitively) a directory input reads.
const EXTENSIONS: [&str; 9] = [
    ".jsonl",
    ".json",
    ".tsv",
    ".jsonl.zst",
    ".json.zst",
    ".tsv.zst",
    ".jsonl.gz",
    ".json.gz",
    ".tsv.gz",
];

/// The input files of a collection: `path` itself, or every `.jsonl`, `.json` or `.tsv` file (optionally
/// `.zst` or `.gz` compressed; names compared case-insensitively) under the directory `path`, subfolders and
/// symbolic links included, in path order. Other files are returned apart (`skipped`), for the caller
/// to name.
pub fn list_inputs(path: &Path) -> Result<Inputs> {
    let meta = std::fs::metadata(path).at(path)?;
    if meta.is_file() {
        return Ok(Inputs {
            files: vec![path.to_owned()],
            skipped: Vec::new(),
        });
    }
    let mut inputs = Inputs::default();
    let mut visited = Vec::new();
    walk(path, &mut inputs, &mut visited)?;
    inputs.files.sort();
    inputs.skipped.sort();
    if inputs.files.is_empty() {
        return Err(IndexError::Invalid(format!(
            "{}: no .jsonl, .json or .tsv files (plain, .zst or .gz) in this directory or below it",
            path.display()
        )));
    }
    Ok(inputs)
}

/// The files of a directory input.
#[derive(Debug, Default)]
pub struct Inputs {
    /// The files to read, in path order.
    pub files: Vec<PathBuf>,
    /// Files ignored because of their names.
    pub skipped: Vec<PathBuf>,
}

fn walk(dir: &Path, inputs: &mut Inputs, visited: &mut Vec<PathBuf>) -> Result<()> {
    // A symbolic link back up the tree would loop forever: each real directory is read once.
    let real = std::fs::canonicalize(dir).at(dir)?;
    if visited.contains(&real) {
        return Ok(());
    }
    visited.push(real);
    for entry in std::fs::read_dir(dir).at(dir)? {
        let p = entry.at(dir)?.path();
        // `metadata` follows symbolic links.
        let Ok(meta) = std::fs::metadata(&p) else {
            inputs.skipped.push(p);
            continue;
        };
        let name = p.file_name().unwrap_or_default().to_string_lossy().to_lowercase();
        if meta.is_dir() {
            walk(&p, inputs, visited)?;
        } else if meta.is_file() && EXTENSIONS.iter().any(|e| name.ends_with(e)) {
            inputs.files.push(p);
        } else if !name.starts_with('.') {
            inputs.skipped.push(p);
        }
    }
    Ok(())
}

/// Whether `id` can be a document id: non-empty, no white space or control characters (a TREC run
/// separates its columns by white space, one result a line). The text says what is wrong.
pub fn check_doc_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("empty \"id\": every document needs a non-empty id".into());
    }
    if let Some(c) = id.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the document id {id:?} contains {c:?}: ids must not contain white space or control \
             characters, which a TREC run cannot hold"
        ));
    }
    Ok(())
}

/// The UTF-8 byte-order mark some editors put at the start of a file.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A line of input with where it came from.
pub struct Line {
    /// Index into the input file list.
    pub file: u32,
    /// 1-based line number.
    pub line: u64,
    /// The raw bytes, without the newline.
    pub bytes: Vec<u8>,
}

/// Counts bytes read from the underlying (possibly compressed) file, for progress.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Opens `path`, decompressing `.zst` (with the long windows `zstd --long=27` produces) and `.gz`.
/// Both decoders check their stream's checksum when read to the end (a reader must read to the end).
pub fn open_text(path: &Path, count: Arc<AtomicU64>) -> Result<Box<dyn BufRead + Send>> {
    let file = Counting {
        inner: File::open(path).at(path)?,
        count,
    };
    let ext = path.extension().map(|e| e.to_string_lossy().to_lowercase());
    if ext.as_deref() == Some("gz") {
        let decoder = flate2::read::MultiGzDecoder::new(file);
        Ok(Box::new(BufReader::with_capacity(1 << 20, decoder)))
    } else if ext.as_deref() == Some("zst") {
        let mut decoder = zstd::Decoder::new(file).at(path)?;
        decoder.window_log_max(31).at(path)?;
        Ok(Box::new(BufReader::with_capacity(1 << 20, decoder)))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
    }
}

/// The longest line [`read_batches`] reads by default: 64 MiB.
pub const DEFAULT_MAX_LINE: usize = 64 << 20;

/// Appends the next line of `reader` to `buf`, newline included, reading at most `max + 1` bytes:
/// `Ok(None)` at the end of the input, `Ok(Some(false))` for a line longer than `max` bytes (newline
/// excluded), whose rest is left unread. Memory stays bounded whatever the input holds (a compressed
/// file can expand to gigabytes without a newline).
pub fn read_line_within(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    let n = reader.take(max as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    Ok(Some(n <= max || buf.last() == Some(&b'\n')))
}

/// Reads all lines of `files` and hands them out in batches of about `batch` lines; a line longer
/// than `max_line` bytes is an error naming its file and line.
pub fn read_batches(
    files: &[PathBuf],
    batch: usize,
    max_line: usize,
    progress: Arc<AtomicU64>,
    mut sink: impl FnMut(Vec<Line>) -> bool,
) -> Result<()> {
    for (f, path) in files.iter().enumerate() {
        let mut reader = open_text(path, progress.clone())?;
        let mut lines = Vec::with_capacity(batch);
        let mut number = 0u64;
        loop {
            let mut bytes = Vec::new();
            let Some(whole) = read_line_within(&mut reader, &mut bytes, max_line).at(path)? else {
                break;
            };
            number += 1;
            if !whole {
                return Err(IndexError::Input {
                    path: path.clone(),
                    line: number,
                    what: format!(
                        "the line is longer than {}, the longest line read (each line holds one \
                         document): split the document, or raise the limit (--max-line-mb) if it is \
                         meant to be this long",
                        show_size(max_line)
                    ),
                });
            }
            if number == 1 && bytes.starts_with(BOM) {
                bytes.drain(..BOM.len());
            }
            while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                bytes.pop();
            }
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            lines.push(Line {
                file: f as u32,
                line: number,
                bytes,
            });
            if lines.len() >= batch && !sink(std::mem::replace(&mut lines, Vec::with_capacity(batch))) {
                return Ok(());
            }
        }
        if !lines.is_empty() && !sink(lines) {
            return Ok(());
        }
    }
    Ok(())
}

/// `64 MiB` for whole mebibytes, else `N bytes`.
fn show_size(bytes: usize) -> String {
    if bytes > 0 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// One line of Pyserini's JsonCollection (`id` and `contents`): its document, or what is wrong and what
/// to do. A leading byte-order mark (which [`read_batches`] strips from a file's first line) is named as
/// such. Collections of other shapes are read through the [`Schema`] their first line shows.
pub fn parse_line(bytes: &[u8]) -> Result<Doc<'_>, String> {
    Schema::json_collection(false).parse(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_or_explain() {
        let d = parse_line(br#"{"id": 7, "title": "T", "contents": "body", "extra": [1]}"#).unwrap();
        assert_eq!((d.id.as_str(), d.texts.len(), &*d.texts[0]), ("7", 1, "body"));
        assert!(parse_line(b"{\"id\": \"x\"")
            .unwrap_err()
            .contains("invalid JSON"));
        assert!(parse_line(br#"{"contents": "x"}"#)
            .unwrap_err()
            .contains("missing field \"id\""));
        assert!(parse_line(br#"{"id": "x"}"#)
            .unwrap_err()
            .contains("missing field \"contents\""));
        assert!(parse_line(b"{\"id\": \"x\", \"contents\": \"\xff\"}")
            .unwrap_err()
            .contains("UTF-8"));
        assert!(parse_line(br#"{"id": "", "contents": "x"}"#)
            .unwrap_err()
            .contains("empty"));
    }

    /// A document id with white space breaks a TREC run's line; a float id was
    /// reformatted.
    #[test]
    fn doc_ids_that_corrupt_runs_are_refused() {
        for bad in [
            r#""a b""#,
            r#""a\tb""#,
            r#""a\nb""#,
            r#""a\u0000""#,
            "1.5e3",
            "2.0",
        ] {
            let line = format!(r#"{{"id": {bad}, "contents": "x"}}"#);
            let err = parse_line(line.as_bytes()).unwrap_err();
            assert!(err.contains("id"), "{bad}: {err}");
        }
        assert_eq!(parse_line(br#"{"id": -12, "contents": "x"}"#).unwrap().id, "-12");
        assert_eq!(
            parse_line(br#"{"id": "d-1.5", "contents": "x"}"#).unwrap().id,
            "d-1.5"
        );
    }

    /// A BOM at the start of a JSONL file is skipped; one elsewhere is named.
    #[test]
    fn bom_at_start_of_jsonl_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jsonl");
        std::fs::write(&path, b"\xEF\xBB\xBF{\"id\": \"a\", \"contents\": \"x\"}\n").unwrap();
        let mut lines = Vec::new();
        read_batches(&[path], 10, DEFAULT_MAX_LINE, Default::default(), |b| {
            lines.extend(b);
            true
        })
        .unwrap();
        assert_eq!(parse_line(&lines[0].bytes).unwrap().id, "a");
        let err = parse_line(b"\xEF\xBB\xBF{}").unwrap_err();
        assert!(err.contains("byte-order mark"), "{err}");
    }
}
