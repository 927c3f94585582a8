//! Reading query files: `qid<TAB>text` lines or one query per line (the qid is then the line number).
//! Shared by every command that reads queries; analysis into terms is the query layer's business.

use std::io::{BufReader, Read};

use crate::error::{IndexError, IoContext, Result};

/// The longest query line read: 16 MiB (a longer one is an error naming its line, so that a stream
/// without newlines cannot take all memory).
pub const MAX_QUERY_LINE: usize = 16 << 20;

/// One line of a query file.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryLine {
    /// The query id: the text before a tab, else the 1-based line number.
    pub qid: String,
    /// The query text.
    pub text: String,
    /// 1-based line number.
    pub line: usize,
    /// Whether the line gave no id (the qid is the line number).
    pub numbered: bool,
}

/// Reads `qid<TAB>text` or plain lines one at a time, as they arrive. Bytes that are not UTF-8 are
/// replaced by U+FFFD and the line is named in a warning; a trailing `\r` is dropped; blank lines are
/// kept as empty queries (their line number stays a qid), except a final empty line.
pub struct QueryReader<R> {
    reader: BufReader<R>,
    name: String,
    line: usize,
    buf: Vec<u8>,
}

impl<R: Read> QueryReader<R> {
    /// Reads from `reader`; `name` names it in errors and warnings.
    pub fn new(reader: R, name: &str) -> Self {
        QueryReader {
            reader: BufReader::with_capacity(1 << 16, reader),
            name: name.to_owned(),
            line: 0,
            buf: Vec::new(),
        }
    }

    /// The next query, `Ok(None)` at the end of the input; a warning about the line goes to `warnings`.
    pub fn next_line(&mut self, warnings: &mut Vec<String>) -> Result<Option<QueryLine>> {
        let (name, buf) = (&self.name, &mut self.buf);
        buf.clear();
        let Some(whole) =
            crate::build::input::read_line_within(&mut self.reader, buf, MAX_QUERY_LINE).at(name)?
        else {
            return Ok(None);
        };
        self.line += 1;
        let line = self.line;
        if !whole {
            return Err(IndexError::Input {
                path: name.into(),
                line: line as u64,
                what: format!(
                    "the line is longer than {} MiB, the longest query read: one query per line",
                    MAX_QUERY_LINE >> 20
                ),
            });
        }
        if line == 1 && buf.starts_with(crate::build::input::BOM) {
            buf.drain(..3);
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        let text = match std::str::from_utf8(buf) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                warnings.push(format!(
                    "{name}:{line}: not valid UTF-8; invalid bytes were replaced by U+FFFD"
                ));
                String::from_utf8_lossy(buf).into_owned()
            }
        };
        let (qid, text, numbered) = match text.split_once('\t') {
            Some((qid, rest)) if !qid.trim().is_empty() => (qid.trim().to_owned(), rest.to_owned(), false),
            _ => (line.to_string(), text, true),
        };
        if qid.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(IndexError::Input {
                path: name.into(),
                line: line as u64,
                what: format!(
                    "the query id {qid:?} contains white space or a control character, which a TREC run \
                     cannot hold"
                ),
            });
        }
        Ok(Some(QueryLine {
            qid,
            text,
            line,
            numbered,
        }))
    }
}

/// Reads every line of `reader` with a [`QueryReader`].
pub fn read_queries(reader: impl Read, name: &str, warnings: &mut Vec<String>) -> Result<Vec<QueryLine>> {
    let mut reader = QueryReader::new(reader, name);
    let mut out = Vec::new();
    while let Some(line) = reader.next_line(warnings)? {
        out.push(line);
    }
    Ok(out)
}
