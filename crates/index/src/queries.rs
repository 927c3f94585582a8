//! Reading query files, in the format their first non-blank line shows:
//!
//! - `qid<TAB>text` lines, or one query per line (the qid is then the line number);
//! - TREC topic files: `<top>` blocks with `<num>` (the qid, after an optional `Number:`) and `<title>`
//!   (the query, after an optional `Topic:`); `<desc>`, `<narr>` and other fields are ignored;
//! - JSON lines (BEIR's `queries.jsonl`): an object a line with the id in `_id`, `id`, `qid` or
//!   `query_id` and the text in `text`, `query` or `title` (the first of each a line has).
//!
//! A file of one format never passes for another: TREC markup in a line-per-query file, or text outside a
//! topic, is an error naming the line. Shared by every command that reads queries; analysis into terms is
//! the query layer's business.

use std::collections::VecDeque;
use std::io::{BufReader, Read};

use crate::error::{IndexError, IoContext, Result};

/// The longest query line read: 16 MiB (a longer one is an error naming its line, so that a stream
/// without newlines cannot take all memory). A TREC topic may span lines up to this length in all.
pub const MAX_QUERY_LINE: usize = 16 << 20;

/// Id fields of a JSON query line, in the order they are looked for.
pub const QUERY_ID_FIELDS: [&str; 4] = ["_id", "id", "qid", "query_id"];
/// Text fields of a JSON query line, in the order they are looked for.
pub const QUERY_TEXT_FIELDS: [&str; 3] = ["text", "query", "title"];

/// One query of a query file.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryLine {
    /// The query id: the text before a tab, the topic's `<num>`, the JSON id; else the 1-based line
    /// number.
    pub qid: String,
    /// The query text.
    pub text: String,
    /// 1-based line number (of a topic's `<top>`).
    pub line: usize,
    /// Whether the line gave no id (the qid is the line number).
    pub numbered: bool,
}

/// The format of a query file.
#[derive(Debug, Clone, PartialEq)]
enum Format {
    /// `qid<TAB>text` or plain lines.
    Lines,
    /// `<top>` blocks.
    Trec,
    /// A JSON object a line, with these id and text fields.
    Json { id: String, text: String },
}

/// Reads a query file one query at a time, as its lines arrive. In a line-per-query file, bytes that are
/// not UTF-8 are replaced by U+FFFD and the line is named in a warning, a trailing `\r` is dropped, and
/// blank lines are kept as empty queries (their line number stays a qid), except a final empty line.
pub struct QueryReader<R> {
    reader: BufReader<R>,
    name: String,
    line: usize,
    buf: Vec<u8>,
    format: Option<Format>,
    /// Lines read while the format was detected, to be answered first (blank lines before the first
    /// query of a line-per-query file).
    pending: VecDeque<QueryLine>,
}

impl<R: Read> QueryReader<R> {
    /// Reads from `reader`; `name` names it in errors and warnings.
    pub fn new(reader: R, name: &str) -> Self {
        QueryReader {
            reader: BufReader::with_capacity(1 << 16, reader),
            name: name.to_owned(),
            line: 0,
            buf: Vec::new(),
            format: None,
            pending: VecDeque::new(),
        }
    }

    fn error(&self, line: usize, what: impl Into<String>) -> IndexError {
        IndexError::Input {
            path: self.name.clone().into(),
            line: line as u64,
            what: what.into(),
        }
    }

    /// The next line as text (a trailing `\r` dropped, a leading byte-order mark too), `Ok(None)` at the
    /// end of the input.
    fn next_text(&mut self, warnings: &mut Vec<String>) -> Result<Option<String>> {
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
            return Err(self.error(
                line,
                format!(
                    "the line is longer than {} MiB, the longest query read: one query per line",
                    MAX_QUERY_LINE >> 20
                ),
            ));
        }
        if line == 1 && buf.starts_with(crate::build::input::BOM) {
            buf.drain(..3);
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        Ok(Some(match std::str::from_utf8(buf) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                warnings.push(format!(
                    "{name}:{line}: not valid UTF-8; invalid bytes were replaced by U+FFFD"
                ));
                String::from_utf8_lossy(buf).into_owned()
            }
        }))
    }

    /// The next query, `Ok(None)` at the end of the input; a warning about the line goes to `warnings`.
    pub fn next_line(&mut self, warnings: &mut Vec<String>) -> Result<Option<QueryLine>> {
        if let Some(q) = self.pending.pop_front() {
            return Ok(Some(q));
        }
        let format = match &self.format {
            Some(f) => f.clone(),
            None => {
                // Blank lines before the first query are queries of a line-per-query file, or nothing.
                let mut blanks = Vec::new();
                let first = loop {
                    match self.next_text(warnings)? {
                        Some(t) if t.trim().is_empty() => blanks.push((self.line, t)),
                        other => break other,
                    }
                };
                let format = match &first {
                    Some(t) if t.trim_start().starts_with("<top>") => Format::Trec,
                    Some(t) if t.trim_start().starts_with('{') => self.detect_json(t)?,
                    _ => Format::Lines,
                };
                self.format = Some(format.clone());
                if format == Format::Lines {
                    for (line, text) in blanks {
                        let q = self.plain(line, text)?;
                        self.pending.push_back(q);
                    }
                }
                let Some(first) = first else {
                    return Ok(self.pending.pop_front());
                };
                let q = self.query(&format, self.line, first, warnings)?;
                self.pending.extend(q);
                return Ok(self.pending.pop_front());
            }
        };
        loop {
            let Some(text) = self.next_text(warnings)? else {
                return Ok(None);
            };
            if let Some(q) = self.query(&format, self.line, text, warnings)? {
                return Ok(Some(q));
            }
        }
    }

    /// The query that line `line` (`text`) starts, if any (a blank line of a topic or JSON file holds
    /// none).
    fn query(
        &mut self,
        format: &Format,
        line: usize,
        text: String,
        warnings: &mut Vec<String>,
    ) -> Result<Option<QueryLine>> {
        match format {
            Format::Lines => self.plain(line, text).map(Some),
            Format::Trec => self.topic(line, text, warnings),
            Format::Json { id, text: field } if !text.trim().is_empty() => {
                let (id, field) = (id.clone(), field.clone());
                self.json(line, &text, &id, &field).map(Some)
            }
            Format::Json { .. } => Ok(None),
        }
    }

    fn plain(&self, line: usize, text: String) -> Result<QueryLine> {
        let start = text.trim_start();
        if ["<top>", "</top>", "<num>"].iter().any(|t| start.starts_with(t)) {
            return Err(self.error(
                line,
                "TREC topic markup in a file read one query a line: a TREC topic file must start with \
                 <top> (its first line does not)",
            ));
        }
        let (qid, text, numbered) = match text.split_once('\t') {
            Some((qid, rest)) if !qid.trim().is_empty() => (qid.trim().to_owned(), rest.to_owned(), false),
            _ => (line.to_string(), text, true),
        };
        self.check_qid(line, &qid)?;
        Ok(QueryLine {
            qid,
            text,
            line,
            numbered,
        })
    }

    fn check_qid(&self, line: usize, qid: &str) -> Result<()> {
        if qid.is_empty() {
            return Err(self.error(line, "the query id is empty"));
        }
        if qid.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(self.error(
                line,
                format!(
                    "the query id {qid:?} contains white space or a control character, which a TREC run \
                     cannot hold"
                ),
            ));
        }
        Ok(())
    }

    /// The topic whose `<top>` is line `line` (`text`), read to its `</top>`.
    fn topic(&mut self, line: usize, text: String, warnings: &mut Vec<String>) -> Result<Option<QueryLine>> {
        let start = text.trim_start();
        if start.is_empty() {
            return Ok(None);
        }
        if !start.starts_with("<top>") {
            return Err(self.error(line, "text outside a <top> … </top> topic in a TREC topic file"));
        }
        let mut block = text;
        while !block.contains("</top>") {
            if block.len() > MAX_QUERY_LINE {
                return Err(self.error(
                    line,
                    format!("the topic is longer than {} MiB", MAX_QUERY_LINE >> 20),
                ));
            }
            match self.next_text(warnings)? {
                Some(t) => {
                    block.push('\n');
                    block.push_str(&t);
                }
                None => return Err(self.error(line, "the topic starting here has no </top>")),
            }
        }
        let (topic, rest) = block.split_once("</top>").expect("contains </top>");
        if !rest.trim().is_empty() {
            return Err(self.error(self.line, "text after </top> on its line"));
        }
        let fields = tags(topic);
        let field = |name: &str| fields.iter().find(|(t, _)| t == name).map(|(_, v)| v.as_str());
        let Some(num) = field("num") else {
            return Err(self.error(line, "the topic starting here has no <num>"));
        };
        let num = strip_label(num, "number:");
        let qid = num.split_whitespace().collect::<Vec<_>>().join(" ");
        self.check_qid(line, &qid)?;
        let Some(title) = field("title") else {
            return Err(self.error(line, format!("topic {qid} has no <title>")));
        };
        let title = strip_label(title, "topic:");
        Ok(Some(QueryLine {
            qid,
            text: title.split_whitespace().collect::<Vec<_>>().join(" "),
            line,
            numbered: false,
        }))
    }

    /// The id and text fields of a JSON query file, from its first line.
    fn detect_json(&self, text: &str) -> Result<Format> {
        let object = self.object(self.line, text)?;
        let find = |names: &[&str]| {
            names
                .iter()
                .find(|n| object.contains_key(**n))
                .map(|n| n.to_string())
        };
        let keys: Vec<String> = object.keys().map(|k| format!("{k:?}")).collect();
        let what = |kind: &str, names: &[&str]| {
            format!(
                "a JSON query line needs {kind} field ({}); this one has {}",
                names.join(", "),
                keys.join(", ")
            )
        };
        let id =
            find(&QUERY_ID_FIELDS).ok_or_else(|| self.error(self.line, what("an id", &QUERY_ID_FIELDS)))?;
        let text = find(&QUERY_TEXT_FIELDS)
            .ok_or_else(|| self.error(self.line, what("a text", &QUERY_TEXT_FIELDS)))?;
        Ok(Format::Json { id, text })
    }

    fn object(&self, line: usize, text: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
        serde_json::from_str(text).map_err(|e| {
            self.error(
                line,
                format!(
                    "invalid JSON ({e}): the file is JSON lines (its first line is), one query object a line"
                ),
            )
        })
    }

    fn json(&self, line: usize, text: &str, id: &str, field: &str) -> Result<QueryLine> {
        let object = self.object(line, text)?;
        let qid = match object.get(id) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
            Some(_) => return Err(self.error(line, format!("the id field {id:?} is not a string"))),
            None => return Err(self.error(line, format!("missing field {id:?}"))),
        };
        self.check_qid(line, &qid)?;
        let text = match object.get(field) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Null) | None => {
                return Err(self.error(line, format!("missing field {field:?}")))
            }
            Some(_) => return Err(self.error(line, format!("the field {field:?} is not a string"))),
        };
        Ok(QueryLine {
            qid,
            text,
            line,
            numbered: false,
        })
    }
}

/// The fields of a topic: each `<tag>` with the text up to the next tag (closing tags end a field too).
fn tags(topic: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut rest = topic;
    let mut open: Option<String> = None;
    while let Some(start) = rest.find('<') {
        let Some(len) = rest[start..].find('>') else {
            break;
        };
        let tag = &rest[start + 1..start + len];
        let plain_tag = !tag.is_empty()
            && tag
                .trim_start_matches('/')
                .chars()
                .all(|c| c.is_ascii_alphanumeric());
        if !plain_tag {
            // A '<' in the text: part of the field.
            if let Some(f) = fields.last_mut().filter(|_| open.is_some()) {
                f.1.push_str(&rest[..start + 1]);
            }
            rest = &rest[start + 1..];
            continue;
        }
        if let Some(f) = fields.last_mut().filter(|_| open.is_some()) {
            f.1.push_str(&rest[..start]);
        }
        open = None;
        if !tag.starts_with('/') {
            fields.push((tag.to_ascii_lowercase(), String::new()));
            open = Some(tag.to_owned());
        }
        rest = &rest[start + len + 1..];
    }
    if let Some(f) = fields.last_mut().filter(|_| open.is_some()) {
        f.1.push_str(rest);
    }
    fields
}

/// `text` trimmed, without a leading `label` (compared case-insensitively, e.g. `Number:`).
fn strip_label<'a>(text: &'a str, label: &str) -> &'a str {
    let t = text.trim();
    match t.get(..label.len()) {
        Some(head) if head.eq_ignore_ascii_case(label) => t[label.len()..].trim(),
        _ => t,
    }
}

/// Reads every query of `reader` with a [`QueryReader`].
pub fn read_queries(reader: impl Read, name: &str, warnings: &mut Vec<String>) -> Result<Vec<QueryLine>> {
    let mut reader = QueryReader::new(reader, name);
    let mut out = Vec::new();
    while let Some(line) = reader.next_line(warnings)? {
        out.push(line);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str) -> Result<Vec<(String, String, usize)>> {
        let mut warnings = Vec::new();
        let lines = read_queries(input.as_bytes(), "q", &mut warnings)?;
        Ok(lines.into_iter().map(|l| (l.qid, l.text, l.line)).collect())
    }

    fn pairs(input: &str) -> Vec<(String, String)> {
        read(input).unwrap().into_iter().map(|(q, t, _)| (q, t)).collect()
    }

    fn owned(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    /// TREC topic files (Robust04's layout, one with closing tags and titles over two lines) are read as
    /// topics, `<title>` the query: `<top>` became a query of its own.
    #[test]
    fn trec_topic_files_are_read_as_topics_not_lines() {
        let robust = "<top>\n<num> Number: 301\n<title> International Organized Crime\n\n<desc> Description:\nIdentify organizations.\n\n<narr> Narrative:\nA relevant document.\n</top>\n\n\n<top>\n<num> Number: 302 \n<title> Poliomyelitis and Post-Polio\n\n<desc> Description:\nIs the disease.\n</top>\n";
        assert_eq!(
            read(robust).unwrap(),
            [
                ("301".into(), "International Organized Crime".into(), 1),
                ("302".into(), "Poliomyelitis and Post-Polio".into(), 13)
            ]
        );
        let closed = "\n<top>\n<num>7</num><title>Topic: black\n bears</title>\n<desc>x < y</desc>\n</top>\n<top> <num> 8 </num> <title> cats </title> </top>\n";
        assert_eq!(pairs(closed), owned(&[("7", "black bears"), ("8", "cats")]));
        let cases = [
            (
                "<top>\n<title> x\n</top>\n",
                "q:1: the topic starting here has no <num>",
            ),
            ("<top>\n<num> 1\n</top>\n", "q:1: topic 1 has no <title>"),
            (
                "<top>\n<num> 1\n<title> x\n",
                "q:1: the topic starting here has no </top>",
            ),
            ("<top><num>1<title>x</top>\nstray\n", "q:2: text outside a <top>"),
            ("<top><num>1 2<title>x</top>\n", "white space"),
            ("1\tfirst\n<top>\n<num> 2\n", "q:2: TREC topic markup"),
        ];
        for (input, expected) in cases {
            let err = read(input).unwrap_err().to_string();
            assert!(err.contains(expected), "{input:?}: {err}");
        }
    }

    /// BEIR's queries.jsonl and ir_datasets' `query_id`: the id and text fields of the first line.
    #[test]
    fn json_query_lines_are_read_by_their_fields() {
        let beir = "{\"_id\": \"q1\", \"text\": \"what is a bear\", \"metadata\": {}}\n\n{\"_id\": 2, \"text\": \"cats\"}\n";
        assert_eq!(
            read(beir).unwrap(),
            [
                ("q1".into(), "what is a bear".into(), 1),
                ("2".into(), "cats".into(), 3)
            ]
        );
        assert_eq!(
            pairs("{\"query_id\": \"a\", \"query\": \"x\"}\n"),
            owned(&[("a", "x")])
        );
        for (input, expected) in [
            ("{\"name\": \"a\", \"text\": \"x\"}\n", "needs an id field"),
            ("{\"_id\": \"a\", \"body\": \"x\"}\n", "needs a text field"),
            ("{\"_id\": \"a\", \"text\": \"x\"}\nplain\n", "q:2: invalid JSON"),
            (
                "{\"_id\": \"a\", \"text\": \"x\"}\n{\"_id\": \"b\"}\n",
                "q:2: missing field \"text\"",
            ),
        ] {
            let err = read(input).unwrap_err().to_string();
            assert!(err.contains(expected), "{input:?}: {err}");
        }
    }

    /// Plain files keep their leading blank lines as empty queries numbered by their lines.
    #[test]
    fn leading_blank_lines_of_a_plain_file_stay_queries() {
        assert_eq!(
            read("\n\nbears\n").unwrap(),
            [
                ("1".into(), "".into(), 1),
                ("2".into(), "".into(), 2),
                ("3".into(), "bears".into(), 3)
            ]
        );
        assert_eq!(
            read("\n\n<top><num>5<title>x</top>\n").unwrap(),
            [("5".into(), "x".into(), 3)]
        );
        assert!(read("").unwrap().is_empty());
    }
}
