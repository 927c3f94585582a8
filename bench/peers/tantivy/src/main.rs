//! tantivy as a peer of warpsearch: index the same JSONL passages, run the same queries, report q/s and
//! latency, and write a TREC run so that the top-k agreement with warpsearch can be measured
//! (`bench/peers/overlap.py`).
//!
//! usage:
//!   tantivy-peer index <passages.jsonl> <index-dir> [threads]
//!   tantivy-peer search <index-dir> <queries.txt> <and|or> <k> <threads> <run.txt>
//!   tantivy-peer index-pisa <export-dir> <index-dir> <threads> [merge]
//!   tantivy-peer search-terms <index-dir> <analyzed.tsv> <and|or> <k> <threads> <run.txt> <export-dir>
//!
//! `index-pisa` indexes a collection that exists only as posting lists (the synthetic one): the PISA
//! binary collection that `warpsearch export --pisa DIR --terms-from QUERIES` writes. The lists are
//! inverted into documents in memory, and each document is fed to tantivy as a compact "term count" text
//! that a counting tokenizer expands into `count` tokens of `term` without allocating them one by one.
//! A filler term makes up the rest of each document's length, so that tantivy's length normalisation
//! sees the collection's own document lengths (tantivy stores them as one-byte field norms). With
//! `merge`, the segments of the parallel writers are merged into one. `search-terms` runs
//! `warpsearch analyze` output (`qid<TAB>term term …`): each term is a term query as is, a repeated term
//! counts as often as it occurs, and document ids come from the export's `fwd.documents`.
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
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to",
    "was", "will", "with",
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
        Some("index") if args.len() == 4 => index(&args[2], &args[3], None),
        Some("index") if args.len() == 5 => index(&args[2], &args[3], Some(args[4].parse()?)),
        Some("search") if args.len() == 8 => search(&args[2..]),
        Some("index-pisa") if args.len() == 5 || args.len() == 6 => {
            index_pisa(&args[2], &args[3], args[4].parse()?, args.get(5).map(String::as_str) == Some("merge"))
        }
        Some("search-terms") if args.len() == 9 => search_terms(&args[2..]),
        _ => bail!(
            "usage: tantivy-peer index <passages.jsonl> <index-dir>\n       \
             tantivy-peer search <index-dir> <queries.txt> <and|or> <k> <threads> <run.txt>\n       \
             tantivy-peer index-pisa <export-dir> <index-dir> <threads> [merge]\n       \
             tantivy-peer search-terms <index-dir> <analyzed.tsv> <and|or> <k> <threads> <run.txt> <export-dir>"
        ),
    }
}

/// Creates an index in `dir` whose schema is `sb` plus the text field "body" (frequencies, no positions)
/// analyzed by `tokenizer`, registered as `name`.
fn create_index<T>(
    dir: &str,
    mut sb: tantivy::schema::SchemaBuilder,
    name: &str,
    tokenizer: T,
) -> Result<(Index, tantivy::schema::Field)>
where
    TextAnalyzer: From<T>,
{
    let body_options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(name)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let body = sb.add_text_field("body", body_options);
    std::fs::create_dir_all(dir)?;
    let index = Index::create_in_dir(dir, sb.build()).with_context(|| format!("creating {dir}"))?;
    index.tokenizers().register(name, tokenizer);
    Ok((index, body))
}

/// Indexes the passages' title and contents. With `threads`: that many indexing threads (512 MiB of
/// memory each), fed by lines parsed on as many threads, as a user after tantivy's fastest build would
/// write it; without: tantivy's default writer fed by this thread (the documents in input order).
fn index(input: &str, dir: &str, threads: Option<usize>) -> Result<()> {
    let mut sb = Schema::builder();
    let id = sb.add_text_field("id", STRING | STORED);
    let (index, body) = create_index(dir, sb, "warpsearch_en", analyzer())?;
    let mut writer = match threads {
        Some(t) => index.writer_with_num_threads::<TantivyDocument>(t, t * (512 << 20))?,
        None => index.writer::<TantivyDocument>(1 << 30)?,
    };
    let started = Instant::now();
    let lines =
        BufReader::new(std::fs::File::open(input).with_context(|| format!("opening {input}"))?).lines();
    let add = |line: std::io::Result<String>| -> Result<()> {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let text = format!(
            "{} {}",
            v["title"].as_str().unwrap_or(""),
            v["contents"].as_str().unwrap_or("")
        );
        writer.add_document(doc!(id => v["id"].as_str().unwrap_or(""), body => text))?;
        Ok(())
    };
    let n = match threads {
        Some(t) => {
            use rayon::iter::{ParallelBridge, ParallelIterator};
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
            pool.install(|| lines.par_bridge().map(add).collect::<Result<Vec<()>>>())?.len() as u64
        }
        None => {
            let mut n = 0u64;
            for line in lines {
                add(line)?;
                n += 1;
            }
            n
        }
    };
    writer.commit()?;
    writer.wait_merging_threads()?;
    eprintln!(
        "tantivy: indexed {n} documents in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn occur_of(mode: &str) -> Result<Occur> {
    match mode {
        "and" => Ok(Occur::Must),
        "or" => Ok(Occur::Should),
        _ => bail!("mode must be and or or, not {mode}"),
    }
}

/// A boolean query of one term query per term (a repeated term is a repeated clause), or none.
fn term_query(
    body: tantivy::schema::Field,
    terms: impl Iterator<Item = String>,
    occur: Occur,
) -> Option<Box<dyn Query>> {
    let clauses: Vec<(Occur, Box<dyn Query>)> = terms
        .map(|t| {
            let q: Box<dyn Query> = Box::new(TermQuery::new(
                Term::from_field_text(body, &t),
                IndexRecordOption::WithFreqs,
            ));
            (occur, q)
        })
        .collect();
    (!clauses.is_empty()).then(|| Box::new(BooleanQuery::new(clauses)) as Box<dyn Query>)
}

/// `<index-dir> <queries> <and|or> <k> <threads> <run.txt>`, the arguments both searches start with.
fn search_args(a: &[String]) -> Result<(&str, &str, &str, usize, usize, &str)> {
    let k = a[3]
        .parse()
        .with_context(|| format!("k must be a number, not {}", a[3]))?;
    let threads = a[4]
        .parse()
        .with_context(|| format!("threads must be a number, not {}", a[4]))?;
    Ok((&a[0], &a[1], &a[2], k, threads, &a[5]))
}

fn search(a: &[String]) -> Result<()> {
    let (dir, queries_path, mode, k, threads, out) = search_args(a)?;
    let index = Index::open_in_dir(dir)?;
    index.tokenizers().register("warpsearch_en", analyzer());
    let schema = index.schema();
    let (id, body) = (schema.get_field("id")?, schema.get_field("body")?);
    let searcher = index.reader()?.searcher();
    let occur = occur_of(mode)?;
    let texts: Vec<String> = std::fs::read_to_string(queries_path)?
        .lines()
        .map(str::to_owned)
        .collect();
    let queries: Vec<(String, Option<Box<dyn Query>>)> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut analyzer = analyzer();
            let mut stream = analyzer.token_stream(t);
            let mut terms = Vec::new();
            while stream.advance() {
                terms.push(stream.token().text.clone());
            }
            ((i + 1).to_string(), term_query(body, terms.into_iter(), occur))
        })
        .collect();
    let doc_id = |addr: tantivy::DocAddress| -> Result<String> {
        let d: TantivyDocument = searcher.doc(addr)?;
        Ok(d.get_first(id).and_then(|v| v.as_str()).unwrap_or("").to_owned())
    };
    run_queries(&searcher, &queries, mode, k, threads, out, doc_id)
}

fn search_terms(a: &[String]) -> Result<()> {
    let (dir, queries_path, mode, k, threads, out) = search_args(a)?;
    let export = &a[6];
    let index = Index::open_in_dir(dir)?;
    index.tokenizers().register("counts", CountsTokenizer);
    let schema = index.schema();
    let body = schema.get_field("body")?;
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let occur = occur_of(mode)?;
    let queries: Vec<(String, Option<Box<dyn Query>>)> = std::fs::read_to_string(queries_path)
        .with_context(|| format!("reading {queries_path}"))?
        .lines()
        .enumerate()
        .map(|(n, line)| {
            let (qid, terms) = line
                .split_once('\t')
                .with_context(|| format!("{queries_path}:{}: expected qid<TAB>terms", n + 1))?;
            Ok((
                qid.to_owned(),
                term_query(body, terms.split_whitespace().map(str::to_owned), occur),
            ))
        })
        .collect::<Result<_>>()?;
    let names: Vec<String> = std::fs::read_to_string(format!("{export}/fwd.documents"))
        .with_context(|| format!("reading {export}/fwd.documents"))?
        .lines()
        .map(str::to_owned)
        .collect();
    let segments = searcher.segment_readers();
    let ords: Vec<_> = segments
        .iter()
        .map(|s| s.fast_fields().u64("ord"))
        .collect::<tantivy::Result<_>>()?;
    eprintln!(
        "tantivy index {dir}: {} segments, {} documents",
        segments.len(),
        searcher.num_docs()
    );
    let doc_id = |addr: tantivy::DocAddress| -> Result<String> {
        let ord = ords[addr.segment_ord as usize].values.get_val(addr.doc_id) as usize;
        Ok(names.get(ord).cloned().unwrap_or_default())
    };
    run_queries(&searcher, &queries, mode, k, threads, out, doc_id)
}

fn run_queries(
    searcher: &tantivy::Searcher,
    queries: &[(String, Option<Box<dyn Query>>)],
    mode: &str,
    k: usize,
    threads: usize,
    out: &str,
    doc_id: impl Fn(tantivy::DocAddress) -> Result<String>,
) -> Result<()> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    type Hits = Vec<Vec<(f32, tantivy::DocAddress)>>;
    let run = || -> Result<(Hits, Vec<Duration>, Duration)> {
        let started = Instant::now();
        let results: Vec<(Vec<(f32, tantivy::DocAddress)>, Duration)> = pool.install(|| {
            queries
                .par_iter()
                .with_max_len(1)
                .map(|(_, q)| {
                    let t = Instant::now();
                    let hits = match q {
                        Some(q) => searcher
                            .search(q.as_ref(), &TopDocs::with_limit(k))
                            .unwrap_or_default(),
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
    let _ = searcher;
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
    for ((qid, _), hits) in queries.iter().zip(&hits) {
        for (rank, (score, addr)) in hits.iter().enumerate() {
            writeln!(w, "{qid} Q0 {} {} {score:.6} tantivy", doc_id(*addr)?, rank + 1)?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Expands "term count" lines into `count` tokens of `term`, reusing one token.
#[derive(Clone)]
struct CountsTokenizer;

struct CountsStream<'a> {
    lines: std::str::Split<'a, char>,
    token: tantivy::tokenizer::Token,
    left: u32,
}

impl tantivy::tokenizer::Tokenizer for CountsTokenizer {
    type TokenStream<'a> = CountsStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> CountsStream<'a> {
        CountsStream {
            lines: text.split('\n'),
            token: Default::default(),
            left: 0,
        }
    }
}

impl tantivy::tokenizer::TokenStream for CountsStream<'_> {
    fn advance(&mut self) -> bool {
        while self.left == 0 {
            let Some(line) = self.lines.next() else {
                return false;
            };
            let Some((term, count)) = line.rsplit_once(' ') else {
                continue;
            };
            self.left = count.parse().unwrap_or(0);
            self.token.text.clear();
            self.token.text.push_str(term);
        }
        self.left -= 1;
        self.token.position = self.token.position.wrapping_add(1);
        true
    }
    fn token(&self) -> &tantivy::tokenizer::Token {
        &self.token
    }
    fn token_mut(&mut self) -> &mut tantivy::tokenizer::Token {
        &mut self.token
    }
}

/// A mapped file of little-endian u32s (the machines here are little-endian) as a slice.
fn u32s(m: &memmap2::Mmap) -> &[u32] {
    // SAFETY: any bit pattern is a valid u32, and align_to only yields the aligned middle.
    let (head, body, _) = unsafe { m.align_to::<u32>() };
    assert!(head.is_empty(), "a mapping is page-aligned");
    body
}

/// The filler term: never a query term (the analyzers never produce a control character).
const FILLER: &str = "\u{1}filler";

fn index_pisa(export: &str, dir: &str, threads: usize, merge: bool) -> Result<()> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let started = Instant::now();
    let map = |name: &str| -> Result<memmap2::Mmap> {
        let path = format!("{export}/{name}");
        let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
        // SAFETY: the export is not modified while this reads it.
        unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("mapping {path}"))
    };
    let (docs_map, freqs_map, sizes_map) = (map("inv.docs")?, map("inv.freqs")?, map("inv.sizes")?);
    let (inv_docs, inv_freqs, sizes) = (u32s(&docs_map), u32s(&freqs_map), u32s(&sizes_map));
    let names: Vec<String> = std::fs::read_to_string(format!("{export}/fwd.terms"))?
        .lines()
        .map(str::to_owned)
        .collect();
    let n = *sizes.first().context("empty inv.sizes")? as usize;
    let sizes = &sizes[1..];
    if inv_docs.get(..2) != Some(&[1, n as u32]) || sizes.len() != n {
        bail!("{export} is not a PISA binary collection of {n} documents");
    }
    // Lists: (start of docIDs in inv.docs, df); a term's frequencies start 2 words earlier in inv.freqs.
    let mut lists = Vec::with_capacity(names.len());
    let mut at = 2usize;
    while at < inv_docs.len() {
        let df = inv_docs[at] as usize;
        lists.push((at + 1, df));
        at += 1 + df;
    }
    if lists.len() != names.len() || names.len() > 1 << 16 {
        bail!(
            "{} lists for {} terms (at most 65,536 supported)",
            lists.len(),
            names.len()
        );
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    // Invert: count per document, then place (term << 16 | tf) at each document's next slot.
    let counts: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    pool.install(|| {
        lists.par_iter().for_each(|&(s, df)| {
            for &d in &inv_docs[s..s + df] {
                counts[d as usize].fetch_add(1, Relaxed);
            }
        })
    });
    let mut offsets = Vec::with_capacity(n + 1);
    let mut total = 0u64;
    offsets.push(0u64);
    for c in &counts {
        total += c.swap(0, Relaxed) as u64;
        offsets.push(total);
    }
    let packed: Vec<AtomicU32> = (0..total).map(|_| AtomicU32::new(0)).collect();
    let too_big = AtomicU32::new(0);
    pool.install(|| {
        lists.par_iter().enumerate().for_each(|(t, &(s, df))| {
            for (&d, &f) in inv_docs[s..s + df].iter().zip(&inv_freqs[s - 2..s - 2 + df]) {
                if f >= 1 << 16 {
                    too_big.store(f, Relaxed);
                }
                let slot = offsets[d as usize] + counts[d as usize].fetch_add(1, Relaxed) as u64;
                packed[slot as usize].store((t as u32) << 16 | f.min(0xffff), Relaxed);
            }
        })
    });
    if too_big.load(Relaxed) != 0 {
        bail!(
            "a frequency of {} does not fit this peer's 16 bits",
            too_big.load(Relaxed)
        );
    }
    eprintln!(
        "tantivy: inverted {total} postings of {n} documents in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut sb = Schema::builder();
    let ord = sb.add_u64_field("ord", tantivy::schema::FAST);
    let (index, body) = create_index(dir, sb, "counts", CountsTokenizer)?;
    let mut writer = index.writer_with_num_threads::<TantivyDocument>(threads, threads * (3 << 30))?;
    writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
    let failed = pool.install(|| {
        (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|d| {
                let mut text = String::with_capacity(256);
                let mut query_tokens = 0u64;
                for p in &packed[offsets[d] as usize..offsets[d + 1] as usize] {
                    let v = p.load(Relaxed);
                    let (t, f) = ((v >> 16) as usize, v & 0xffff);
                    query_tokens += f as u64;
                    text.push_str(&names[t]);
                    text.push(' ');
                    text.push_str(&f.to_string());
                    text.push('\n');
                }
                let rest = (sizes[d] as u64).saturating_sub(query_tokens);
                if rest > 0 {
                    text.push_str(FILLER);
                    text.push(' ');
                    text.push_str(&rest.to_string());
                }
                writer.add_document(doc!(ord => d as u64, body => text)).is_err()
            })
            .filter(|&failed| failed)
            .count()
    });
    if failed > 0 {
        bail!("tantivy refused {failed} documents");
    }
    writer.commit()?;
    eprintln!(
        "tantivy: indexed {n} documents in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if merge {
        let ids = index.searchable_segment_ids()?;
        let count = ids.len();
        writer.merge(&ids).wait()?;
        eprintln!(
            "tantivy: merged {count} segments in {:.1} s (total)",
            started.elapsed().as_secs_f64()
        );
    }
    writer.wait_merging_threads()?;
    Ok(())
}
