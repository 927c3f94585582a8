//! Reading query files: `qid<TAB>text` lines or one query per line (the qid is then the line number).
//! Shared by every command that reads queries; analysis into terms is the query layer's business.

use std::io::{BufRead, BufReader, Read};

use crate::error::{IndexError, IoContext, Result};

/// One line of a query file.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryLine {
    /// The query id: the text before a tab, else the 1-based line number.
    pub qid: String,
    /// The query text.
    pub text: String,
    /// 1-based line number.
    pub line: usize,
}

/// Reads `qid<TAB>text` or plain lines. Bytes that are not UTF-8 are replaced by U+FFFD and the line is
/// named in a warning; a trailing `\r` is dropped; blank lines are kept as empty queries (their line
/// number stays a qid), except a final empty line.
pub fn read_queries(reader: impl Read, name: &str, warnings: &mut Vec<String>) -> Result<Vec<QueryLine>> {
    let mut out = Vec::new();
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).at(name)? == 0 {
            break;
        }
        line += 1;
        if line == 1 && buf.starts_with(crate::build::input::BOM) {
            buf.drain(..3);
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        let text = match std::str::from_utf8(&buf) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                warnings.push(format!(
                    "{name}:{line}: not valid UTF-8; invalid bytes were replaced by U+FFFD"
                ));
                String::from_utf8_lossy(&buf).into_owned()
            }
        };
        let (qid, text) = match text.split_once('\t') {
            Some((qid, rest)) if !qid.trim().is_empty() => (qid.trim().to_owned(), rest.to_owned()),
            _ => (line.to_string(), text),
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
        out.push(QueryLine { qid, text, line });
    }
    Ok(out)
}
