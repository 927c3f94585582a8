//! `warpsearch.Index`: build an index as `warpsearch index` does (the same library calls and options),
//! open one, and make searchers over it. Builds and opens run with the GIL released.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyUserWarning};
use pyo3::prelude::*;
use warpsearch_index::build::{build_from_jsonl, BuildOn, BuildOptions, BuildReport};
use warpsearch_index::shards::{ShardPart, ShardSplit, Sharding};
use warpsearch_index::{ciff, AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};

use crate::cache::CacheArgs;
use crate::errors::{index_error, open_error, value_error, warn};
use crate::searcher::{PySearcher, SearcherOptions};

/// An open index: its statistics, its analyzer, and searchers over it.
#[pyclass(name = "Index", module = "warpsearch", frozen)]
pub struct PyIndex {
    index: Arc<Index>,
    path: PathBuf,
    stored: crate::docs::Stored,
}

impl PyIndex {
    fn open_at(py: Python<'_>, path: PathBuf) -> PyResult<PyIndex> {
        let index = py
            .detach(|| Index::open(&path))
            .map_err(|e| open_error(e, &path))?;
        Ok(PyIndex {
            index: Arc::new(index),
            path,
            stored: crate::docs::Stored::new(),
        })
    }
}

#[pymethods]
impl PyIndex {
    /// Opens the index directory `path` (checksums and format checked; the files are memory-mapped).
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<PyIndex> {
        PyIndex::open_at(py, path)
    }

    /// Builds an index at `output` and opens it, from `input`: a collection file (.jsonl, .json or
    /// .tsv, plain, .gz or .zst: Pyserini's or BEIR's JSON lines, MS MARCO's `id<TAB>text`) or a
    /// directory of them, or any iterable of documents (dicts such as {'id', 'contents'}, {'docno',
    /// 'text'} or BEIR's {'_id', 'title', 'text'}; a generator is streamed); or from a CIFF file
    /// (`ciff`). The options of `warpsearch index`: `id_field` and `fields` (a list) name the fields
    /// to read, `store=True` keeps the documents for `Index.doc`, `shards=N` writes a sharded index
    /// (`--shards N`, docs/shards.md), and with it `part="head"` or `part=i` builds one part of it
    /// (`--part`: the head first, then each shard, by other processes or hosts; these return None, and
    /// the index opens once every shard is built). `build_on="gpu"` (or `"auto"`) inverts the postings
    /// on the first GPU (`--build-on`), within `gpu_memory_mb` of its memory where given, the same index
    /// byte for byte; without a usable GPU the CPU does, with a warning. `progress=True` shows a tqdm bar
    /// where tqdm is installed (notebooks too). What the command prints as notes (skipped lines,
    /// documents without terms) comes as `UserWarning`s.
    // One keyword argument per option of `warpsearch index`.
    #[allow(clippy::too_many_arguments)]
    #[staticmethod]
    #[pyo3(signature = (
        input=None, *, output, ciff=None, force=false, codec="simdbp", analyzer=None, stemmer="porter",
        keep_stopwords=false, title=false, k1=0.9, b=0.4, static_scores=None, doc_order="input",
        alpha=0.5, memory_mb=2048, skip_bad=false, progress=false, id_field=None, fields=None, store=false,
        shards=None, part=None, build_on="cpu", gpu_memory_mb=None
    ))]
    fn build(
        py: Python<'_>,
        input: Option<Bound<'_, PyAny>>,
        output: PathBuf,
        ciff: Option<PathBuf>,
        force: bool,
        codec: &str,
        analyzer: Option<&str>,
        stemmer: &str,
        keep_stopwords: bool,
        title: bool,
        k1: f32,
        b: f32,
        static_scores: Option<PathBuf>,
        doc_order: &str,
        alpha: f32,
        memory_mb: usize,
        skip_bad: bool,
        progress: bool,
        id_field: Option<String>,
        fields: Option<Vec<String>>,
        store: bool,
        shards: Option<usize>,
        part: Option<Bound<'_, PyAny>>,
        build_on: &str,
        gpu_memory_mb: Option<u64>,
    ) -> PyResult<Option<PyIndex>> {
        let build_on = BuildOn::by_name(build_on).map_err(value_error)?;
        if gpu_memory_mb.is_some() && build_on == BuildOn::Cpu {
            return Err(value_error(
                "gpu_memory_mb bounds the GPU build: use it with build_on='gpu' or 'auto'",
            ));
        }
        let part = match &part {
            None => ShardPart::All,
            Some(p) if shards.is_none() => {
                return Err(value_error(format!(
                    "part={p} needs shards=N: it names a part of a sharded index"
                )))
            }
            Some(p) => match p.extract::<usize>() {
                Ok(i) => ShardPart::Shard(i),
                Err(_) => p.extract::<String>()?.parse().map_err(value_error)?,
            },
        };
        let writer = WriterOptions {
            codec: codec.parse::<Codec>().map_err(value_error)?,
            analyzer: AnalyzerConfig::with_options(analyzer.unwrap_or("english"), stemmer, keep_stopwords)
                .map_err(value_error)?,
            bm25: Bm25Params::checked(k1, b).map_err(value_error)?,
            doc_order: DocOrder::Input,
            force,
        };
        let reorder_alpha = match doc_order {
            "input" => None,
            "global-score" => Some(alpha),
            other => {
                return Err(value_error(format!(
                    "unknown doc_order '{other}': expected input or global-score"
                )))
            }
        };
        match (input, ciff) {
            (Some(input), None) => {
                let mut opts = BuildOptions::new(writer);
                opts.include_title = title;
                opts.id_field = id_field;
                opts.fields = fields;
                opts.store = store;
                opts.memory_budget = memory_mb.saturating_mul(1 << 20);
                opts.skip_bad = skip_bad;
                opts.static_scores = static_scores;
                opts.reorder_alpha = reorder_alpha;
                opts.shards = shards.map(|n| Sharding {
                    split: ShardSplit::Count(n),
                    parallel: true,
                    part,
                });
                opts.build_on = build_on;
                if build_on != BuildOn::Cpu {
                    opts.device = Some(warpsearch_engine::devices::build_device(0, gpu_memory_mb));
                }
                let static_scores = opts.static_scores.is_some();
                let (report, input) = match input.extract::<PathBuf>() {
                    Ok(path) => {
                        let report =
                            crate::docs::with_progress(py, progress, total_bytes(&path), "B", opts, |o| {
                                build_from_jsonl(&path, &output, o)
                            })
                            .map_err(index_error)?;
                        (report, path)
                    }
                    Err(_) => {
                        let report = crate::docs::build_from_iterable(py, &input, &output, opts, progress)?;
                        (report, PathBuf::from("the documents"))
                    }
                };
                for note in build_notes(&report, &input, static_scores) {
                    warn::<PyUserWarning>(py, &note)?;
                }
            }
            (None, Some(path)) => {
                if id_field.is_some() || fields.is_some() || store {
                    return Err(value_error(
                        "id_field, fields and store apply to input only: a CIFF file holds postings, not \
                         documents",
                    ));
                }
                if shards.is_some() {
                    return Err(value_error(
                        "shards applies to input only: a sharded index is built from documents, not CIFF",
                    ));
                }
                if build_on != BuildOn::Cpu {
                    return Err(value_error(
                        "build_on applies to input only: a CIFF file's postings are inverted already",
                    ));
                }
                let opts = ciff::ImportOptions {
                    writer,
                    analyzer_override: analyzer.is_some(),
                };
                py.detach(|| ciff::import(&path, &output, opts))
                    .map_err(index_error)?;
            }
            _ => {
                return Err(value_error(
                    "give exactly one of input=<jsonl file or directory> or ciff=<file>",
                ))
            }
        }
        match part {
            ShardPart::All => PyIndex::open_at(py, output).map(Some),
            _ => Ok(None),
        }
    }

    /// A searcher over this index: `backend` auto, cpu, gpu or hybrid (as `warpsearch search
    /// --backend`); `ranking` bm25 or bm25-static (with `alpha`); `k1` and `b` (default: the index's);
    /// `algorithm` (the CPU engine's: auto, exhaustive, daat, maxscore, bmw, early); `max_k`, the
    /// largest k the GPU is prepared for (larger k are answered by the CPU); `threads`, CPU threads
    /// (default: every core); `gpu_memory`, the GPU memory the index may take, in bytes (as
    /// `--gpu-memory`); `gpus`, the GPUs to run on (as `--gpus`: "auto" for every device, a count, or
    /// device numbers "0,2"; one index on each, a sharded index's shards spread over them);
    /// `gpu_feeders`, threads feeding each GPU, each with a copy of the index (as `--gpu-feeders`);
    /// `max_query_terms`, the most distinct terms a query may have (a longer one is
    /// refused, as `--max-query-terms`); `shards`, of a sharded index, the shards (numbers from 0) this
    /// searcher answers for, with the collection's statistics and document numbers, so that answers of
    /// searchers over disjoint shards merge (score descending, ties to the smaller number) into the
    /// whole index's (AND and OR; and-or is the kept shards' own).
    ///
    /// For an index larger than that memory, `gpu_cache` (qtf, qtfdf, vfb or dynamic) keeps part of it
    /// on the GPU, filled from `gpu_cache_train` (a list of query texts, weighed as `gpu_cache_mode`
    /// queries of `gpu_cache_k` results), and the CPU completes exactly what the GPU lacks;
    /// `gpu_cache_ratio` (λ), `gpu_cache_buffer` (S_b, bytes) and `gpu_cache_complete` (auto, cpu or
    /// transfer) as `warpsearch search --gpu-cache-ratio`, `--gpu-cache-buffer` and
    /// `--gpu-cache-complete`. docs/gpu-cache.md says how to size it.
    // One keyword argument per engine option of `warpsearch search`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (
        backend="auto", *, ranking="bm25", alpha=None, k1=None, b=None, algorithm="auto", max_k=1000,
        threads=None, gpu_memory=None, gpu_cache=None, gpu_cache_train=None, gpu_cache_mode="or",
        gpu_cache_k=10, gpu_cache_ratio=None, gpu_cache_buffer=None, gpu_cache_complete="auto",
        max_query_terms=warpsearch_query::DEFAULT_MAX_QUERY_TERMS, shards=None, gpus="auto",
        gpu_feeders=1
    ))]
    fn searcher(
        &self,
        py: Python<'_>,
        backend: &str,
        ranking: &str,
        alpha: Option<f32>,
        k1: Option<f32>,
        b: Option<f32>,
        algorithm: &str,
        max_k: usize,
        threads: Option<usize>,
        gpu_memory: Option<usize>,
        gpu_cache: Option<&str>,
        gpu_cache_train: Option<Vec<String>>,
        gpu_cache_mode: &str,
        gpu_cache_k: usize,
        gpu_cache_ratio: Option<f64>,
        gpu_cache_buffer: Option<usize>,
        gpu_cache_complete: &str,
        max_query_terms: usize,
        shards: Option<Vec<usize>>,
        gpus: &str,
        gpu_feeders: u32,
    ) -> PyResult<PySearcher> {
        if max_query_terms == 0 {
            return Err(value_error("max_query_terms must be at least 1"));
        }
        let options = SearcherOptions {
            backend,
            ranking,
            alpha,
            k1,
            b,
            algorithm,
            max_k,
            threads,
            gpu_memory,
            max_query_terms,
            shards,
            gpus,
            gpu_feeders,
            cache: CacheArgs {
                policy: gpu_cache,
                train: gpu_cache_train,
                mode: gpu_cache_mode,
                k: gpu_cache_k,
                ratio: gpu_cache_ratio,
                buffer: gpu_cache_buffer,
                complete: gpu_cache_complete,
            },
        };
        PySearcher::new(py, self.index.clone(), options)
    }

    /// The id of the document numbered `number` (0 to num_docs - 1), as runs and hits name it; None
    /// for -1 (no hit, as `search_batch(..., as_arrays=True)` marks it).
    fn doc_id(&self, number: i64) -> PyResult<Option<String>> {
        if number == -1 {
            return Ok(None);
        }
        Ok(Some(self.index.doc_id(self.doc_number(number)?).to_owned()))
    }

    /// The stored document `id` (its id as a str, or its number as an int), as its collection line
    /// held it (the JSON object, or the `id<TAB>text` line); the index must be built with
    /// `store=True`. KeyError for an unknown id, IndexError for a number out of range.
    fn doc(&self, py: Python<'_>, id: Bound<'_, PyAny>) -> PyResult<String> {
        let mut texts = self
            .stored
            .get(py, &self.index, &self.path, std::slice::from_ref(&id))?;
        Ok(texts.pop().expect("one document asked"))
    }

    /// The stored documents of `ids` (any iterable of ids or numbers), in order, as `doc` gives them.
    fn docs(&self, py: Python<'_>, ids: Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let ids = ids.try_iter()?.collect::<PyResult<Vec<_>>>()?;
        self.stored.get(py, &self.index, &self.path, &ids)
    }

    /// Whether the index stores its documents (built with `store=True`).
    #[getter]
    fn stores_docs(&self) -> bool {
        self.index.store().is_some()
    }

    /// The ids of the documents `numbers` names (any sequence of ints, such as a row or a whole array of
    /// `search_batch(..., as_arrays=True)`'s docs, flattened), in order; None for -1 (no hit).
    fn doc_ids(&self, numbers: Vec<i64>) -> PyResult<Vec<Option<String>>> {
        numbers.into_iter().map(|n| self.doc_id(n)).collect()
    }

    /// The terms the index's analyzer makes of `text` (as `warpsearch analyze`).
    fn analyze(&self, text: &str) -> Vec<String> {
        self.index.meta().analyzer.terms(text)
    }

    /// The index directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Number of documents.
    #[getter]
    fn num_docs(&self) -> u64 {
        self.index.meta().num_docs
    }

    /// Number of distinct terms.
    #[getter]
    fn num_terms(&self) -> u64 {
        self.index.meta().num_terms
    }

    /// Number of postings.
    #[getter]
    fn num_postings(&self) -> u64 {
        self.index.meta().num_postings
    }

    /// Number of shards of a sharded index (built with `shards=N`), None for one index.
    #[getter]
    fn shards(&self) -> Option<usize> {
        self.index.is_sharded().then(|| self.index.shards().len())
    }

    /// Mean document length, in tokens.
    #[getter]
    fn avg_doc_len(&self) -> f64 {
        self.index.meta().avg_doc_len
    }

    /// The posting-list codec: pfor, ef, rice or simdbp.
    #[getter]
    fn codec(&self) -> &'static str {
        self.index.codec().name()
    }

    /// The analyzer documents went through (queries go through it too).
    #[getter]
    fn analyzer(&self) -> String {
        self.index.meta().analyzer.to_string()
    }

    /// BM25 k1 and b of the stored block bounds (searchers use them unless told otherwise).
    #[getter]
    fn bm25(&self) -> (f32, f32) {
        let p = self.index.meta().bm25;
        (p.k1, p.b)
    }

    fn __repr__(&self) -> String {
        let m = self.index.meta();
        format!(
            "Index('{}': {} documents, {} terms, {} postings, {}, {})",
            self.path.display(),
            m.num_docs,
            m.num_terms,
            m.num_postings,
            m.codec.name(),
            m.analyzer
        )
    }
}

impl PyIndex {
    /// `number` as a document of the index, or an IndexError that says the range.
    fn doc_number(&self, number: i64) -> PyResult<u32> {
        let n = self.index.num_docs();
        u32::try_from(number).ok().filter(|&d| d < n).ok_or_else(|| {
            PyIndexError::new_err(format!(
                "document number {number} is out of range: the index numbers its {n} documents 0 to {}",
                i64::from(n) - 1
            ))
        })
    }
}

/// The bytes of the input files at `path` (a file, or every file of a directory tree), for a progress
/// bar's total; None where they cannot be listed (the build then says why).
fn total_bytes(path: &std::path::Path) -> Option<u64> {
    let inputs = warpsearch_index::build::input::list_inputs(path).ok()?;
    Some(
        inputs
            .files
            .iter()
            .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
            .sum(),
    )
}

/// What `warpsearch index` says after a build, in the Python package's option names.
fn build_notes(report: &BuildReport, input: &std::path::Path, static_scores: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if report.skipped > 0 {
        notes.push(format!(
            "skipped {} bad lines (skip_bad=True); the first ones: {}",
            report.skipped,
            report.skip_reasons.join("; ")
        ));
    }
    if let Some(first) = report.skipped_files.first() {
        notes.push(format!(
            "{} files of {} were not read (not .jsonl/.json, plain, .zst or .gz), e.g. {}",
            report.skipped_files.len(),
            input.display(),
            first.display()
        ));
    }
    if report.empty_docs > 0 {
        notes.push(format!(
            "{} documents have no indexable terms; they are kept and never match",
            report.empty_docs
        ));
    }
    // What the command prints as `note:` lines: where the CPU stood in for the GPU, and why.
    notes.extend(report.notes.iter().cloned());
    if static_scores && (report.static_missing > 0 || report.static_unknown > 0) {
        notes.push(format!(
            "{} documents had no static score (0 used); {} static-score lines named unknown documents",
            report.static_missing, report.static_unknown
        ));
    }
    notes
}
