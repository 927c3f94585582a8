//! `Index::for_each_query_term` (a per-thread cache of tokens) against the analyzer and the dictionary
//! without it: the same terms, ordinals and unknown terms, for every analyzer, with indexes alternating
//! on one thread, a call from inside another, a cache that fills, and real queries.

use std::path::Path;

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, Lookup, WriterOptions};

/// What the lookup should give: each term of `text` by the analyzer, then the dictionary.
fn expected(index: &Index, text: &str) -> Vec<Result<u32, String>> {
    let mut out = Vec::new();
    index.meta().analyzer.for_each_term(text, |t| {
        out.push(index.term_id(t).ok_or_else(|| t.to_owned()));
    });
    out
}

fn looked_up(index: &Index, text: &str) -> Vec<Result<u32, String>> {
    let mut out = Vec::new();
    index.for_each_query_term(text, |t| {
        out.push(match t {
            Lookup::Known(id) => Ok(id),
            Lookup::Unknown(t) => Err(t.to_owned()),
        })
    });
    out
}

const WORDS: &[&str] = &[
    "running",
    "runs",
    "runner",
    "ran",
    "John's",
    "Johns",
    "the",
    "and",
    "Café",
    "naïve",
    "3.14",
    "can't",
    "U.S.A.",
    "e-mail",
    "searching",
    "searches",
    "engines",
    "Engine's",
    "GPU",
    "gpus",
    "x_y",
    "ÉCOLE",
    "straße",
    "42",
    "über",
    "connection",
    "connected",
    "to",
    "be",
    "or",
    "not",
];

fn build(dir: &Path, name: &str, analyzer: AnalyzerConfig) -> Index {
    let docs: Vec<String> = (0..200)
        .map(|d| {
            let text: Vec<&str> = (0..12).map(|i| WORDS[(d * 7 + i * 13) % WORDS.len()]).collect();
            serde_json::json!({"id": format!("d{d}"), "contents": text.join(" ")}).to_string()
        })
        .collect();
    let input = dir.join(format!("{name}.jsonl"));
    std::fs::write(&input, docs.join("\n") + "\n").unwrap();
    let options = BuildOptions::new(WriterOptions {
        codec: Codec::PForDelta,
        analyzer,
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    });
    let out = dir.join(name);
    build_from_jsonl(&input, &out, &options).unwrap();
    Index::open(&out).unwrap()
}

fn indexes(dir: &Path) -> Vec<Index> {
    let mut porter2 = AnalyzerConfig::english();
    porter2.stemmer = warpsearch_index::analyzer::Stemmer::Porter2;
    vec![
        build(dir, "english", AnalyzerConfig::english()),
        build(dir, "porter2", porter2),
        build(dir, "whitespace", AnalyzerConfig::whitespace()),
    ]
}

/// Texts of known, unknown, repeated, stop and odd words, and a token past 255 characters.
fn texts() -> Vec<String> {
    let mut texts: Vec<String> = vec![
        String::new(),
        "   ".into(),
        "the and of".into(),
        "Running RUNS runner's ran".into(),
        "naïve café CAFÉ straße über 3.14 can't U.S.A. e-mail x_y".into(),
        "gpu gpu GPU gpus unknownword unknownword".into(),
        format!("{} engines", "a".repeat(300)),
    ];
    let mut state = 7u64;
    for _ in 0..300 {
        let n = 1 + (state % 6) as usize;
        let words: Vec<String> = (0..n)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                match state % 4 {
                    0 => format!("zz{}", state % 50),
                    _ => WORDS[(state as usize + i) % WORDS.len()].to_string(),
                }
            })
            .collect();
        texts.push(words.join(" "));
    }
    texts
}

#[test]
fn cached_lookups_equal_the_analyzer_and_the_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = indexes(dir.path());
    for round in 0..2 {
        // Indexes alternate on this thread: each switch starts the cache over for the other.
        for text in texts() {
            for index in &indexes {
                assert_eq!(
                    looked_up(index, &text),
                    expected(index, &text),
                    "round {round}: '{text}'"
                );
            }
        }
    }
    // The known terms are found (the test would pass vacuously on an empty dictionary).
    let known = looked_up(&indexes[0], "running engines gpu")
        .into_iter()
        .filter(Result::is_ok)
        .count();
    assert_eq!(known, 3);
}

#[test]
fn a_lookup_inside_another_and_a_full_cache() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = indexes(dir.path());
    let (a, b) = (&indexes[0], &indexes[1]);
    // A lookup from inside another's callback runs without the cache, with the same result.
    let mut inner = Vec::new();
    a.for_each_query_term("running café", |_| inner.push(looked_up(b, "searching engines")));
    assert_eq!(inner, vec![expected(b, "searching engines"); 2]);
    // More distinct tokens than a thread keeps: the cache starts over, the answers stay the same.
    let many: Vec<String> = (0..40_000).map(|i| format!("t{i} running")).collect();
    let text = many.join(" ");
    assert_eq!(looked_up(a, &text), expected(a, &text));
    assert_eq!(looked_up(a, &text), expected(a, &text));
}

#[test]
fn real_queries_look_up_as_without_the_cache() {
    let Some(path) = warpsearch_index::testdata::shared_data("queries/trec05-efficiency.txt") else {
        eprintln!("skipped: ../shared/data/queries/trec05-efficiency.txt not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let indexes = indexes(dir.path());
    let text = std::fs::read_to_string(path).unwrap();
    for line in text.lines().take(20_000) {
        for index in &indexes {
            assert_eq!(looked_up(index, line), expected(index, line), "'{line}'");
        }
    }
}
