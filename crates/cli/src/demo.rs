//! `warpsearch demo`: the whole pipeline on a collection generated here, with no download; the GPU engine
//! runs too where a CUDA device is present.
//!
//! Documents are drawn from a Zipf-distributed vocabulary of pronounceable pseudo-words (deterministic
//! by seed), written as JSONL into a temporary directory, indexed, then queried in AND and OR mode on
//! all cores. Queries are 1 to 4 words drawn from the same vocabulary, skipping the most common words
//! as real queries mostly do.

use std::io::{BufWriter, Write};
use std::time::Instant;

use std::sync::Arc;

use anyhow::Result;
use warpsearch_engine::{BackendChoice, Engine, EngineOptions, GpuOptions};
use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, DocOrder, Index, WriterOptions};
use warpsearch_query::{Algorithm, Answer, Mode, Query, Request, Scored, Scorer, SearchOptions};

use crate::args::DemoArgs;
use crate::shared::stats::Rng;

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ren", "tu", "sha", "vo", "pel", "dra", "quin", "bo", "za", "nit", "fe", "gor", "hu",
    "jas", "wy", "xel", "cor", "ma", "ti", "sen", "lu",
];

fn word(mut i: usize) -> String {
    let mut w = String::new();
    loop {
        w.push_str(SYLLABLES[i % SYLLABLES.len()]);
        i /= SYLLABLES.len();
        if i == 0 {
            return w;
        }
    }
}

/// Samples ranks from a Zipf(1) distribution over `v` words.
struct Zipf(Vec<f64>);

impl Zipf {
    fn new(v: usize) -> Self {
        let mut acc = 0.0;
        Zipf(
            (1..=v)
                .map(|r| {
                    acc += 1.0 / r as f64;
                    acc
                })
                .collect(),
        )
    }
    fn sample(&self, rng: &mut Rng) -> usize {
        let x = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * self.0[self.0.len() - 1];
        self.0.partition_point(|&c| c < x)
    }
}

/// Runs the demo.
pub fn run(a: DemoArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("docs.jsonl");
    let vocab: Vec<String> = (0..50_000).map(word).collect();
    let zipf = Zipf::new(vocab.len());
    let mut rng = Rng(a.seed);
    let started = Instant::now();
    {
        let mut out = BufWriter::new(std::fs::File::create(&input)?);
        let mut text = String::new();
        for d in 0..a.docs {
            text.clear();
            for _ in 0..20 + rng.below(180) {
                text.push_str(&vocab[zipf.sample(&mut rng)]);
                text.push(' ');
            }
            writeln!(
                out,
                "{}",
                serde_json::json!({ "id": format!("doc{d}"), "contents": text })
            )?;
        }
        out.flush()?;
    }
    println!(
        "generated {} documents in {:.2} s",
        a.docs,
        started.elapsed().as_secs_f64()
    );

    let analyzer = AnalyzerConfig::english();
    let writer = WriterOptions {
        codec: a.codec,
        analyzer,
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    };
    let index_dir = dir.path().join("index");
    let started = Instant::now();
    let report = build_from_jsonl(&input, &index_dir, &BuildOptions::new(writer))?;
    let m = &report.meta;
    println!(
        "indexed {} docs, {} terms, {} postings ({} codec) in {:.2} s",
        m.num_docs,
        m.num_terms,
        m.num_postings,
        m.codec,
        started.elapsed().as_secs_f64()
    );
    let index = Arc::new(Index::open(&index_dir)?);

    let queries: Vec<String> = (0..a.queries)
        .map(|_| {
            let n = 1 + rng.below(4) as usize;
            (0..n)
                .map(|_| vocab[50 + zipf.sample(&mut rng) % (vocab.len() - 50)].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let parsed: Vec<Query> = queries.iter().map(|q| Query::parse(&index, q)).collect();
    let engine = |algorithm: Algorithm, backend: BackendChoice| -> Result<Engine> {
        let options = SearchOptions {
            algorithm,
            ..SearchOptions::new(&index)
        };
        let scorer = Arc::new(Scorer::new(index.clone(), options)?);
        let gpu = GpuOptions {
            max_k: a.k.min(GpuOptions::default().max_k),
            ..GpuOptions::default()
        };
        Ok(Engine::new(
            scorer,
            EngineOptions {
                backend,
                gpu,
                ..EngineOptions::default()
            },
        )?)
    };
    let gpu = engine(Algorithm::Auto, BackendChoice::Gpu);
    println!(
        "backends: cpu on {} threads; gpu: {}. Every fast result is checked against the exhaustive oracle",
        rayon::current_num_threads(),
        match &gpu {
            Ok(g) => g.describe(),
            Err(e) => format!("skipped ({e})"),
        }
    );
    let gpu = gpu.ok();
    for mode in [Mode::And, Mode::Or] {
        let requests: Vec<Request> = parsed
            .iter()
            .map(|q| Request::new(q.clone(), mode, a.k))
            .collect();
        let mut results = Vec::new();
        for algorithm in [Algorithm::Auto, Algorithm::Exhaustive] {
            let searcher = engine(algorithm, BackendChoice::Cpu)?;
            let label = format!("{} top-{} ({})", mode.name(), a.k, algorithm.name());
            results.push(timed(&label, || searcher.search_batch(&requests))?);
        }
        if results[0] != results[1] {
            anyhow::bail!("{} results differ from the exhaustive oracle", mode.name());
        }
        if let Some(gpu) = &gpu {
            gpu.search_batch(&requests); // warm-up
            let label = format!("{} top-{} (gpu)", mode.name(), a.k);
            let answers = timed(&label, || gpu.search_batch(&requests))?;
            if answers != results[1] {
                anyhow::bail!("{} GPU results differ from the exhaustive oracle", mode.name());
            }
            for note in gpu.take_notes() {
                println!("  gpu: {note}");
            }
        }
        let results = &results[0];
        for (q, r) in queries.iter().zip(results).take(3) {
            let top: Vec<String> = r
                .iter()
                .take(3)
                .map(|s| format!("{} ({:.3})", index.doc_id(s.doc), s.score))
                .collect();
            println!(
                "  {q:<40} -> {}",
                if top.is_empty() {
                    "no match".into()
                } else {
                    top.join(", ")
                }
            );
        }
    }
    Ok(())
}

/// Runs one batch, prints its speed and how many queries found documents, and returns the hits.
fn timed(
    label: &str,
    run: impl FnOnce() -> Vec<warpsearch_index::Result<Answer>>,
) -> Result<Vec<Vec<Scored>>> {
    let started = Instant::now();
    let answers = run()
        .into_iter()
        .map(|r| r.map(|a| a.hits))
        .collect::<Result<Vec<_>, _>>()?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label}: {} queries in {secs:.3} s = {:.0} queries/s; {} of them found documents",
        answers.len(),
        answers.len() as f64 / secs,
        answers.iter().filter(|r| !r.is_empty()).count()
    );
    Ok(answers)
}
