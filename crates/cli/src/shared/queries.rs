//! Query files as the commands read them: lines to requests, with warnings about queries that will
//! match little or nothing and about repeated ids, in bounded memory.

use std::fs::File;
use std::path::Path;

use anyhow::{bail, Context, Result};
use warpsearch_index::queries::{read_queries, QueryLine};
use warpsearch_index::Index;
use warpsearch_query::{Mode, Query, Request};

use crate::args::QueryArgs;

/// [`read_queries`] from a file, or standard input for `-`.
pub fn read_query_file(path: &Path, warnings: &mut Vec<String>) -> Result<Vec<QueryLine>> {
    if path == Path::new("-") {
        Ok(read_queries(std::io::stdin().lock(), "<stdin>", warnings)?)
    } else {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        Ok(read_queries(file, &path.display().to_string(), warnings)?)
    }
}

/// The query file of `a` (or its one `--query`), analysed into requests of `a`'s mode and k, with its
/// warnings printed (at most ten, then a count).
pub fn load_queries(a: &QueryArgs, index: &Index) -> Result<(Vec<QueryLine>, Vec<Request>)> {
    let mut warnings = Vec::new();
    let lines = match (&a.query, &a.queries) {
        (Some(text), _) => vec![QueryLine {
            qid: "1".into(),
            text: text.clone(),
            line: 1,
            numbered: true,
        }],
        (None, Some(path)) => read_query_file(path, &mut warnings)?,
        (None, None) => bail!("give --queries FILE or --query TEXT"),
    };
    let queries: Vec<Query> = lines.iter().map(|l| Query::parse(index, &l.text)).collect();
    let mut shown = Warnings::default();
    warnings.into_iter().for_each(|w| shown.push(w));
    let mut report = QueryReport::default();
    report.add(&lines, &queries);
    report.finish(a.mode, &mut shown);
    shown.print();
    let requests = queries
        .into_iter()
        .map(|q| Request::new(q, a.mode, a.k))
        .collect();
    Ok((lines, requests))
}

/// At most ten warnings kept to print, and how many there were.
#[derive(Default)]
pub struct Warnings {
    first: Vec<String>,
    total: usize,
}

impl Warnings {
    pub fn push(&mut self, w: String) {
        if self.first.len() < 10 {
            self.first.push(w);
        }
        self.total += 1;
    }

    /// Prints the first ten, then how many more there were.
    pub fn print(&self) {
        for w in &self.first {
            eprintln!("warning: {w}");
        }
        if self.total > 10 {
            eprintln!("warning: … and {} more", self.total - 10);
        }
    }
}

/// Query ids remembered to find duplicates: past this many, later ids go unchecked (and a warning
/// says so), so that memory stays bounded on an endless stream.
const MAX_TRACKED_QIDS: usize = 1_000_000;

/// Warnings about queries that will match little or nothing, summarised with examples, and about
/// repeated query ids, gathered chunk by chunk in bounded memory.
#[derive(Default)]
pub struct QueryReport {
    /// Queries without searchable terms: how many, and the first three as `qid (line n)`.
    empty: (usize, Vec<String>),
    /// Queries with terms the index does not have.
    unknown: (usize, Vec<String>),
    /// The first line of each query id given on its line, by a 64-bit hash of the id (about 20 bytes
    /// an id; two ids of one hash, under one chance in 10^7 among a million ids, would be named as a
    /// repeat). A line without an id is numbered: it is checked against these but not kept, as no
    /// other numbered line can have its number, so that a plain query log of any length costs nothing.
    seen: std::collections::HashMap<u64, usize>,
    /// Warnings about repeated ids: the first ten, and how many.
    repeated: Warnings,
    untracked: bool,
}

impl QueryReport {
    pub fn add(&mut self, lines: &[QueryLine], queries: &[Query]) {
        for (l, q) in lines.iter().zip(queries) {
            for (hit, (n, examples)) in [
                (q.is_empty(), &mut self.empty),
                (!q.unknown.is_empty(), &mut self.unknown),
            ] {
                if hit {
                    *n += 1;
                    if examples.len() < 3 {
                        examples.push(format!("{} (line {})", l.qid, l.line));
                    }
                }
            }
            let id = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                l.qid.hash(&mut h);
                h.finish()
            };
            if let Some(&first) = self.seen.get(&id) {
                self.repeated.push(format!(
                    "query id {} appears on lines {first} and {}; a TREC evaluation merges them",
                    l.qid, l.line
                ));
            } else if l.numbered {
                // Unique among numbered lines.
            } else if self.seen.len() < MAX_TRACKED_QIDS {
                self.seen.insert(id, l.line);
            } else {
                self.untracked = true;
            }
        }
    }

    /// Adds the summaries, then the repeated ids, to `warnings`.
    pub fn finish(self, mode: Mode, warnings: &mut Warnings) {
        let (empty, e) = self.empty;
        if empty > 0 {
            warnings.push(format!(
                "{empty} queries have no searchable terms after analysis (empty, only stopwords or \
                 punctuation) and return nothing, e.g. {}",
                e.join(", ")
            ));
        }
        let (unknown, e) = self.unknown;
        if unknown > 0 {
            let effect = match mode {
                Mode::Or => "they are ignored",
                _ => "AND finds nothing for them",
            };
            warnings.push(format!(
                "{unknown} queries contain terms the index does not have ({effect}), e.g. {}",
                e.join(", ")
            ));
        }
        let more = self.repeated.total - self.repeated.first.len();
        self.repeated.first.into_iter().for_each(|w| warnings.push(w));
        warnings.total += more;
        if self.untracked {
            warnings.push(format!(
                "query ids after the first {MAX_TRACKED_QIDS} distinct ones were not checked for repeats"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Repeated query ids are named in bounded memory: ids equal to their line numbers, and a numbered
    /// line whose number an earlier id took, included.
    #[test]
    fn repeated_query_ids_are_named() {
        let mut warnings = Vec::new();
        let lines = read_queries(&b"1\ta\n2\tb\n2\tc\n5\td\nplain\n"[..], "q", &mut warnings).unwrap();
        let queries = vec![Query::default(); lines.len()];
        let mut report = QueryReport::default();
        report.add(&lines, &queries);
        let mut shown = Warnings::default();
        report.finish(Mode::Or, &mut shown);
        let repeats: Vec<&String> = shown.first.iter().filter(|w| w.starts_with("query id")).collect();
        assert_eq!(repeats.len(), 2, "{:?}", shown.first);
        assert!(
            repeats[0].starts_with("query id 2 appears on lines 2 and 3"),
            "{}",
            repeats[0]
        );
        assert!(
            repeats[1].starts_with("query id 5 appears on lines 4 and 5"),
            "{}",
            repeats[1]
        );
    }

    #[test]
    fn query_lines_with_and_without_ids_and_bad_bytes() {
        let mut warnings = Vec::new();
        let input = b"q1\tcats and dogs\r\nplain query\n\n7\t\xffbad\n";
        let lines = read_queries(&input[..], "q.txt", &mut warnings).unwrap();
        let got: Vec<(&str, &str)> = lines.iter().map(|l| (l.qid.as_str(), l.text.as_str())).collect();
        assert_eq!(
            got,
            [
                ("q1", "cats and dogs"),
                ("2", "plain query"),
                ("3", ""),
                ("7", "\u{FFFD}bad")
            ]
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("q.txt:4:"), "{warnings:?}");
        assert!(read_queries(&b"a b\tx\n"[..], "q", &mut warnings).is_err());
    }

    /// A UTF-8 BOM at the start of a query file is not part of the first qid.
    #[test]
    fn bom_at_start_of_query_file_is_skipped() {
        let mut warnings = Vec::new();
        let lines = read_queries(&b"\xEF\xBB\xBF301\tcats\n302\tdogs\n"[..], "q", &mut warnings).unwrap();
        assert_eq!((lines[0].qid.as_str(), lines[0].text.as_str()), ("301", "cats"));
        let lines = read_queries(&b"\xEF\xBB\xBFcats\n"[..], "q", &mut warnings).unwrap();
        assert_eq!((lines[0].qid.as_str(), lines[0].text.as_str()), ("1", "cats"));
        assert!(warnings.is_empty());
    }
}
