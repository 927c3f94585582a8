//! Reading a Pyserini JsonCollection: `.jsonl`, `.json` or `.jsonl.zst` files, or a directory of them.
//!
//! Each non-blank line is one JSON object with a string (or number) `id` and a string `contents`;
//! an optional `title` is indexed before the contents; other fields are ignored.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Deserialize;

use crate::error::{IndexError, IoContext, Result};

/// The input files of a collection, in name order.
pub fn list_inputs(path: &Path) -> Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path).at(path)?;
    if meta.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).at(path)? {
        let p = entry.at(path)?.path();
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        if p.is_file()
            && [".jsonl", ".json", ".jsonl.zst", ".json.zst"]
                .iter()
                .any(|e| name.ends_with(e))
        {
            files.push(p);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(IndexError::Invalid(format!(
            "{}: no .jsonl, .json or .jsonl.zst files in this directory",
            path.display()
        )));
    }
    Ok(files)
}

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

/// Opens `path`, decompressing `.zst` (with the long windows `zstd --long=27` produces).
pub fn open_text(path: &Path, count: Arc<AtomicU64>) -> Result<Box<dyn BufRead + Send>> {
    let file = Counting {
        inner: File::open(path).at(path)?,
        count,
    };
    if path.extension().is_some_and(|e| e == "zst") {
        let mut decoder = zstd::Decoder::new(file).at(path)?;
        decoder.window_log_max(31).at(path)?;
        Ok(Box::new(BufReader::with_capacity(1 << 20, decoder)))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
    }
}

/// Reads all lines of `files` and hands them out in batches of about `batch` lines.
pub fn read_batches(
    files: &[PathBuf],
    batch: usize,
    progress: Arc<AtomicU64>,
    mut sink: impl FnMut(Vec<Line>) -> bool,
) -> Result<()> {
    for (f, path) in files.iter().enumerate() {
        let mut reader = open_text(path, progress.clone())?;
        let mut lines = Vec::with_capacity(batch);
        let mut number = 0u64;
        loop {
            let mut bytes = Vec::new();
            let n = reader.read_until(b'\n', &mut bytes).at(path)?;
            if n == 0 {
                break;
            }
            number += 1;
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

#[derive(Deserialize)]
#[serde(untagged)]
enum Id {
    Text(String),
    Number(serde_json::Number),
}

#[derive(Deserialize)]
struct JsonDoc {
    id: Option<Id>,
    contents: Option<String>,
    title: Option<String>,
}

/// A parsed document.
#[derive(Debug)]
pub struct RawDoc {
    /// External id.
    pub id: String,
    /// Title, if any.
    pub title: Option<String>,
    /// Body text.
    pub contents: String,
}

/// Parses one JSONL line; the error text says what is wrong and what to do.
pub fn parse_line(bytes: &[u8]) -> Result<RawDoc, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "invalid UTF-8 at byte {} of the line: re-encode the file as UTF-8",
            e.valid_up_to()
        )
    })?;
    let doc: JsonDoc = serde_json::from_str(text).map_err(|e| {
        format!(
            "invalid JSON ({e}): each line must be one object like {{\"id\": \"d1\", \"contents\": \"...\"}}"
        )
    })?;
    let id = match doc.id {
        Some(Id::Text(s)) => s,
        Some(Id::Number(n)) => n.to_string(),
        None => return Err("missing field \"id\": every document needs a string id".into()),
    };
    if id.is_empty() {
        return Err("empty \"id\": every document needs a non-empty id".into());
    }
    let contents = doc
        .contents
        .ok_or("missing field \"contents\": put the document text in \"contents\"")?;
    Ok(RawDoc {
        id,
        title: doc.title,
        contents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_or_explain() {
        let d = parse_line(br#"{"id": 7, "title": "T", "contents": "body", "extra": [1]}"#).unwrap();
        assert_eq!(
            (d.id.as_str(), d.title.as_deref(), d.contents.as_str()),
            ("7", Some("T"), "body")
        );
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
}
