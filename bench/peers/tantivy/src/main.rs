//! tantivy as a peer of warpsearch: index the same JSONL passages, run the same queries, report q/s and
//! latency, and write a TREC run so that the top-k agreement with warpsearch can be measured
//! (`bench/peers/overlap.py`).
//!
//! usage:
//!   tantivy-peer index <passages.jsonl> <index-dir>
//!   tantivy-peer search <index-dir> <queries.txt> <and|or> <k> <threads> <run.txt>
//!
//! Analysis is as close to warpsearch's as tantivy allows: Unicode-less simple tokenizer (alphanumeric
//! runs), lowercase, Lucene's 33 English stopwords, English stemmer (Snowball porter2; warpsearch uses
//! Porter). Indexes title + " " + contents, like `warpsearch index --title`. BM25's k1 and b are fixed in
//! tantivy at 1.2 and 0.75 (warpsearch: 0.9 and 0.4), so scores and some rankings differ.
//! Queries are built as boolean queries of term queries (Must for AND, Should for OR), not parsed, so
//! query syntax characters in the TREC log are plain text.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{doc, Index, TantivyDocument, Term};

/// Lucene's English stopwords (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`), as warpsearch removes them.
const STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
];

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(STOPWORDS.iter().map(|s| s.to_string())))
        .filter(Stemmer::new(Language::English))
        .build()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("index") if args.len() == 4 => index(&args[2], &args[3]),
        Some("search") if args.len() == 8 => search(&args[2..]),
        _ => bail!(
            "usage: tantivy-peer index <passages.jsonl> <index-dir>\n       \
             tantivy-peer search <index-dir> <queries.txt> <and|or> <k> <threads> <run.txt>"
        ),
    }
}

fn index(input: &str, dir: &str) -> Result<()> {
    let mut sb = Schema::builder();
    let id = sb.add_text_field("id", STRING | STORED);
    let body_options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("warpsearch_en")
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let body = sb.add_text_field("body", body_options);
    std::fs::create_dir_all(dir)?;
    let index = Index::create_in_dir(dir, sb.build()).with_context(|| format!("creating {dir}"))?;
    index.tokenizers().register("warpsearch_en", analyzer());
    let mut writer = index.writer::<TantivyDocument>(1 << 30)?;
    let started = Instant::now();
    let mut n = 0u64;
    for line in BufReader::new(std::fs::File::open(input).with_context(|| format!("opening {input}"))?).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let text = format!(
            "{} {}",
            v["title"].as_str().unwrap_or(""),
            v["contents"].as_str().unwrap_or("")
        );
        writer.add_document(doc!(id => v["id"].as_str().unwrap_or(""), body => text))?;
        n += 1;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    eprintln!("tantivy: indexed {n} documents in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn search(a: &[String]) -> Result<()> {
    let (dir, queries_path, mode, k, threads, out) = (&a[0], &a[1], &a[2], a[3].parse::<usize>()?, a[4].parse::<usize>()?, &a[5]);
    let index = Index::open_in_dir(dir)?;
    index.tokenizers().register("warpsearch_en", analyzer());
    let schema = index.schema();
    let (id, body) = (schema.get_field("id")?, schema.get_field("body")?);
    let searcher = index.reader()?.searcher();
    let occur = match mode.as_str() {
        "and" => Occur::Must,
        "or" => Occur::Should,
        _ => bail!("mode must be and or or, not {mode}"),
    };
    let texts: Vec<String> = std::fs::read_to_string(queries_path)?.lines().map(str::to_owned).collect();
    let queries: Vec<Option<Box<dyn Query>>> = texts
        .iter()
        .map(|t| {
            let mut analyzer = analyzer();
            let mut stream = analyzer.token_stream(t);
            let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
            while stream.advance() {
                let term = Term::from_field_text(body, &stream.token().text);
                clauses.push((occur, Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))));
            }
            (!clauses.is_empty()).then(|| Box::new(BooleanQuery::new(clauses)) as Box<dyn Query>)
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let run = || -> Result<(Vec<Vec<(f32, tantivy::DocAddress)>>, Vec<Duration>, Duration)> {
        let started = Instant::now();
        let results: Vec<(Vec<(f32, tantivy::DocAddress)>, Duration)> = pool.install(|| {
            queries
                .par_iter()
                .with_max_len(1)
                .map(|q| {
                    let t = Instant::now();
                    let hits = match q {
                        Some(q) => searcher.search(q.as_ref(), &TopDocs::with_limit(k)).unwrap_or_default(),
                        None => Vec::new(),
                    };
                    (hits, t.elapsed())
                })
                .collect()
        });
        let wall = started.elapsed();
        let (hits, lat): (Vec<_>, Vec<_>) = results.into_iter().unzip();
        Ok((hits, lat, wall))
    };
    run()?; // warm-up
    let (hits, mut lat, wall) = run()?;
    lat.sort_unstable();
    let pct = |p: f64| {
        let rank = ((p / 100.0) * lat.len() as f64).ceil().max(1.0) as usize;
        lat[rank.min(lat.len()) - 1].as_secs_f64() * 1e3
    };
    println!(
        "tantivy {} queries, {threads} threads, mode {mode}, k {k}: {:.0} queries/s; latency ms p50 {:.3} \
         p95 {:.3} p99 {:.3} p99.9 {:.3}",
        queries.len(),
        queries.len() as f64 / wall.as_secs_f64(),
        pct(50.0),
        pct(95.0),
        pct(99.0),
        pct(99.9)
    );
    let mut w = BufWriter::new(std::fs::File::create(out)?);
    for (qi, hits) in hits.iter().enumerate() {
        for (rank, (score, addr)) in hits.iter().enumerate() {
            let d: TantivyDocument = searcher.doc(*addr)?;
            let docid = d.get_first(id).and_then(|v| v.as_str()).unwrap_or("");
            writeln!(w, "{} Q0 {docid} {} {score:.6} tantivy", qi + 1, rank + 1)?;
        }
    }
    w.flush()?;
    Ok(())
}
