//! `warpsearch.Searcher`: one [`Engine`] made as `warpsearch search` makes it, and its answers as Python
//! objects. The engine runs with the GIL released (query analysis too, on the engine's threads); only
//! turning answers into Python objects holds it. While the engine works, the calling thread looks at
//! Python's signals every [`SIGNALS`]: Ctrl-C drops the queries not yet started (on the CPU and hybrid
//! backends; the GPU backend finishes its call) and raises KeyboardInterrupt at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyRuntimeWarning, PyUserWarning};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use rayon::prelude::*;
use warpsearch_engine::{
    Backend, Collect, Engine, EngineConfig, GpuConfig, HybridConfig, ScoringConfig, TrainLog,
};
use warpsearch_index::{Index, IndexError};
use warpsearch_query::{Answer, Mode, Query, Request, Scorer, MAX_K};

use crate::arrays::arrays;
use crate::cache::CacheArgs;
use crate::errors::{engine_error, index_error, value_error, warn};
use crate::frame::Frame;
use crate::hits::{hit_lists, DocIds};
use crate::notes::QueryNotes;
use crate::pool::on_pool;

/// How many of the engine's chunks of queries are analysed in one parallel pass.
const PARSE_CHUNKS: usize = 16;

/// How often a call waiting for the engine looks at Python's signals (Ctrl-C).
const SIGNALS: Duration = Duration::from_millis(50);

/// A chunk's answers, one per query, and the engine's notes.
type Answered = (Vec<warpsearch_index::Result<Answer>>, Vec<String>);

/// How a searcher is made: the engine options of `warpsearch search`, by name.
pub struct SearcherOptions<'a> {
    pub backend: &'a str,
    pub ranking: &'a str,
    pub alpha: Option<f32>,
    pub k1: Option<f32>,
    pub b: Option<f32>,
    pub algorithm: &'a str,
    pub max_k: usize,
    pub threads: Option<usize>,
    /// `--gpu-memory`, bytes.
    pub gpu_memory: Option<usize>,
    /// `--max-query-terms`: the most distinct terms a query may have.
    pub max_query_terms: usize,
    /// Of a sharded index, the shards the searcher answers for (None: every one).
    pub shards: Option<Vec<usize>>,
    /// `--gpus`: auto, a count, or device numbers.
    pub gpus: &'a str,
    /// `--gpu-feeders`: threads feeding each GPU.
    pub gpu_feeders: u32,
    /// The GPU list cache's arguments.
    pub cache: CacheArgs<'a>,
}

impl SearcherOptions<'_> {
    /// The engine's configuration these arguments describe, and the cache's training log.
    fn config(self) -> PyResult<(EngineConfig, Option<TrainLog>)> {
        let (cache, train) = self.cache.config()?;
        let config = EngineConfig {
            backend: warpsearch_query::named("backend", self.backend).map_err(value_error)?,
            threads: self.threads.unwrap_or(0),
            shards: self.shards,
            scoring: ScoringConfig {
                ranking: warpsearch_query::named("ranking", self.ranking).map_err(value_error)?,
                alpha: self.alpha,
                k1: self.k1,
                b: self.b,
                algorithm: warpsearch_query::named("algorithm", self.algorithm).map_err(value_error)?,
                max_query_terms: u32::try_from(self.max_query_terms).unwrap_or(u32::MAX),
            },
            gpu: GpuConfig {
                memory: self.gpu_memory,
                gpus: self
                    .gpus
                    .parse()
                    .map_err(|e: String| value_error(format!("gpus={:?}: {e}", self.gpus)))?,
                feeders: self.gpu_feeders,
                ..GpuConfig::default()
            },
            hybrid: HybridConfig {
                workers: self.threads,
                ..HybridConfig::default()
            },
            cache,
        };
        Ok((config, train))
    }
}

/// Answers queries on one index with fixed options; `search` and `search_batch` take a query's mode
/// and k. Safe to share between Python threads (the engine takes their calls' queries side by side).
#[pyclass(name = "Searcher", module = "warpsearch", frozen)]
pub struct PySearcher {
    engine: Engine,
    /// The engine's scorer and backend, read without waiting for the engine.
    scorer: Arc<Scorer>,
    backend: Backend,
    index: Arc<Index>,
    /// The threads asked for, for analysis and output (None: rayon's global pool, every core); the
    /// engine's CPU backend has as many of its own.
    pool: Option<rayon::ThreadPool>,
    /// Queries per engine call ([`Engine::batch_hint`]).
    batch_hint: usize,
    describe: String,
    choice: Option<String>,
    /// The index's document ids, ready to be prefetched; made by the first batch.
    doc_ids: OnceLock<DocIds>,
}

impl PySearcher {
    /// The engine `o` asks for on `index`, its options checked before any query runs (as the binary's
    /// `open_engine`), with the binary's note when k1 and b make it slow.
    pub fn new(py: Python<'_>, index: Arc<Index>, o: SearcherOptions) -> PyResult<PySearcher> {
        let (threads, max_k) = (o.threads, o.max_k);
        let (config, train) = o.config()?;
        let pool = match threads {
            None => None,
            Some(n) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| PyRuntimeError::new_err(format!("starting {n} threads: {e}")))?,
            ),
        };
        // Settings are named as Python's arguments spell them.
        let name = |n: &str| n.replace('-', "_");
        let engine = py
            .detach(|| config.open_with(index.clone(), Mode::AndOr, max_k, train, &name))
            .map_err(engine_error)?;
        if let Some(note) = config.bm25_note(&index) {
            warn::<PyUserWarning>(py, &note)?;
        }
        Ok(PySearcher {
            scorer: engine.scorer().clone(),
            backend: engine.backend(),
            batch_hint: engine.batch_hint(),
            describe: engine.describe(),
            choice: engine.choice().map(str::to_owned),
            engine,
            doc_ids: OnceLock::new(),
            index,
            pool,
        })
    }

    /// The request shape `mode` and `k` name, checked against the searcher's options.
    fn shape(&self, mode: &str, k: i64) -> PyResult<(Mode, usize)> {
        let mode: Mode = warpsearch_query::named("mode", mode).map_err(value_error)?;
        // A negative k is out of range as 0 is; the message names the k given.
        let k_checked = usize::try_from(k).unwrap_or(0);
        self.scorer
            .check(&Request::new(Query::default(), mode, k_checked))
            .map_err(|e| match k_checked {
                0 => value_error(format!("k = {k} is out of range: use 1 to {MAX_K}")),
                _ => index_error(e),
            })?;
        Ok((mode, k_checked))
    }

    /// Analyses and answers `texts` on the engine without the GIL, in chunks of the engine's batch size,
    /// and hands each chunk's answers to `take` (with the GIL, in order). Chunks run on a thread of their
    /// own while `take` turns the previous chunk into Python objects (which only the thread holding the
    /// GIL can make), so that this work overlaps the engine's instead of following it. What the engine
    /// noted (a GPU failure answered on the CPU) becomes a Python warning.
    fn answer_chunks(
        &self,
        py: Python<'_>,
        texts: &[String],
        mode: Mode,
        k: usize,
        mut take: impl FnMut(Vec<Answer>) -> PyResult<()>,
    ) -> PyResult<()> {
        let notes = QueryNotes::default();
        self.answer_chunks_noted(py, texts, mode, k, &notes, &mut take)?;
        notes.warn(py, texts)
    }

    /// [`Self::answer_chunks`], with what the queries' analysis found counted in `notes`.
    fn answer_chunks_noted(
        &self,
        py: Python<'_>,
        texts: &[String],
        mode: Mode,
        k: usize,
        notes: &QueryNotes,
        mut take: impl FnMut(Vec<Answer>) -> PyResult<()>,
    ) -> PyResult<()> {
        let chunk = self.batch_hint.max(1);
        let mut done = 0;
        // Set by Ctrl-C: the engine drops the queries it has not started.
        let stop = Arc::new(AtomicBool::new(false));
        let mut hand_over = |(answers, notes): Answered| -> PyResult<()> {
            for note in notes {
                warn::<PyRuntimeWarning>(py, &format!("warpsearch: {note}"))?;
            }
            let answers = answers
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    let i = done + i;
                    a.map_err(|e| value_error(format!("query {} ('{}'): {e}", i + 1, texts[i])))
                })
                .collect::<PyResult<Vec<Answer>>>()?;
            done += answers.len();
            take(answers)
        };
        if texts.len() <= chunk {
            // Analysed a part at a time, Python's signals looked at between parts.
            let mut requests = Vec::with_capacity(texts.len());
            for (i, part) in texts.chunks(4096 * PARSE_CHUNKS).enumerate() {
                requests.extend(py.detach(|| self.parse(part, mode, k, i * 4096 * PARSE_CHUNKS, notes)));
                py.check_signals()?;
            }
            let answers = self.wait_interruptibly(py, requests, &stop)?;
            hand_over((answers, self.engine.take_notes()))?;
            return self.check_unchanged();
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<PyResult<Answered>>(1);
        let result = std::thread::scope(|scope| {
            let stopped = stop.clone();
            let engine = scope.spawn(move || {
                // Queries are analysed PARSE_CHUNKS chunks at a time: each parallel pass costs its
                // start and its slowest thread again (on 16 cores, 13 passes of 4,096 queries took 36 ms
                // of a 50,000-query call, one pass of all of them 7-10 ms).
                'texts: for (i, texts) in texts.chunks(chunk * PARSE_CHUNKS).enumerate() {
                    let requests = self.parse(texts, mode, k, i * chunk * PARSE_CHUNKS, notes);
                    for requests in requests.chunks(chunk) {
                        if stopped.load(Ordering::Relaxed) {
                            break 'texts;
                        }
                        let answered = self.run_requests(requests, &stopped);
                        let failed = answered.is_err();
                        // The receiver is gone when `take` failed or Ctrl-C came: stop.
                        if tx.send(answered).is_err() || failed {
                            break 'texts;
                        }
                    }
                }
            });
            // A Mutex only to make the receiver shareable with the GIL-free closure below.
            let rx = Mutex::new(rx);
            let mut result = Ok(());
            loop {
                match py.detach(|| rx.lock().expect("one user").recv_timeout(SIGNALS)) {
                    Ok(answered) => {
                        result = answered.and_then(&mut hand_over);
                        if result.is_err() {
                            break;
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        if let Err(e) = py.check_signals() {
                            stop.store(true, Ordering::Relaxed);
                            result = Err(e);
                            break;
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            drop(rx);
            py.detach(|| engine.join())
                .map_err(|_| PyRuntimeError::new_err("the engine's thread panicked"))?;
            result
        });
        result?;
        self.check_unchanged()
    }

    /// An error where the index's postings file was truncated or rewritten since it was opened: the
    /// answers just given may have read other bytes (one look a call, off the per-query path).
    fn check_unchanged(&self) -> PyResult<()> {
        self.index.check_unchanged().map_err(index_error)
    }

    /// `requests` answered on the engine while this thread looks at Python's signals; Ctrl-C drops
    /// the queries not yet started (`stop`) and raises KeyboardInterrupt once the engine lets go of
    /// the rest. The GPU backend answers a call whole, so its signals are looked at when it returns.
    fn wait_interruptibly(
        &self,
        py: Python<'_>,
        requests: Vec<Request>,
        stop: &Arc<AtomicBool>,
    ) -> PyResult<Vec<warpsearch_index::Result<Answer>>> {
        if self.backend == Backend::Gpu {
            let answers = py.detach(|| self.engine.search_batch(&requests));
            py.check_signals()?;
            return Ok(answers);
        }
        let sink = interruptible(requests.len(), stop);
        py.detach(|| self.engine.submit(0, requests, None, sink.clone()));
        loop {
            if let Some(answers) = py.detach(|| sink.wait_within(Some(SIGNALS))) {
                return Ok(dropped_as_errors(answers));
            }
            if let Err(e) = py.check_signals() {
                stop.store(true, Ordering::Relaxed);
                py.detach(|| sink.wait_for());
                return Err(e);
            }
        }
    }

    /// The index's document ids as [`hit_lists`] reads them, made (without the GIL) by the first batch.
    fn doc_ids(&self, py: Python<'_>) -> &DocIds {
        match self.doc_ids.get() {
            Some(ids) => ids,
            None => py.detach(|| self.doc_ids.get_or_init(|| DocIds::new(self.index.clone()))),
        }
    }

    /// Analyses `texts` (from position `offset` of the call's) on the searcher's threads, counting
    /// empty and unknown-term queries in `notes`.
    fn parse(
        &self,
        texts: &[String],
        mode: Mode,
        k: usize,
        offset: usize,
        notes: &QueryNotes,
    ) -> Vec<Request> {
        let requests: Vec<Request> = on_pool(self.pool.as_ref(), || {
            texts
                .par_iter()
                .map(|t| Request::new(Query::parse(&self.index, t), mode, k))
                .collect()
        });
        notes.add(offset, &requests);
        requests
    }

    /// Answers `requests` on the engine, with what the engine noted meanwhile; once `stop` is set
    /// (Ctrl-C) the engine drops those not yet started (the GPU backend answers its call whole).
    fn run_requests(&self, requests: &[Request], stop: &Arc<AtomicBool>) -> PyResult<Answered> {
        let answers = if self.backend == Backend::Gpu {
            self.engine.search_batch(requests)
        } else {
            let sink = interruptible(requests.len(), stop);
            let owned = if requests.len() > 4096 {
                on_pool(self.pool.as_ref(), || requests.par_iter().cloned().collect())
            } else {
                requests.to_vec()
            };
            self.engine.submit(0, owned, None, sink.clone());
            dropped_as_errors(sink.wait_for())
        };
        Ok((answers, self.engine.take_notes()))
    }
}

/// A call's answers, waited for in steps (so that the caller can look at Python's signals between
/// them) and no longer wanted once `stop` is set (Ctrl-C).
fn interruptible(n: usize, stop: &Arc<AtomicBool>) -> Arc<Collect> {
    Arc::new(Collect::new(n).stopped_by(stop.clone()))
}

/// The answers of an interruptible call, those the engine dropped as errors.
fn dropped_as_errors(
    answers: Vec<Option<warpsearch_index::Result<Answer>>>,
) -> Vec<warpsearch_index::Result<Answer>> {
    let dropped = || Err(IndexError::Invalid("interrupted: the query was dropped".into()));
    answers.into_iter().map(|a| a.unwrap_or_else(dropped)).collect()
}

#[pymethods]
impl PySearcher {
    /// The top `k` documents for `text` under `mode` (and, or, and-or), best first: a list of
    /// `(docid, score)`. Scores are the engine's `f32`, exactly.
    #[pyo3(signature = (text, k=10, mode="or"))]
    fn search<'py>(&self, py: Python<'py>, text: String, k: i64, mode: &str) -> PyResult<Bound<'py, PyList>> {
        let (mode, k) = self.shape(mode, k)?;
        // One query's hits: the table is not worth making for them, but serves where a batch made it.
        let plain;
        let ids = match self.doc_ids.get() {
            Some(ids) => ids,
            None => {
                plain = DocIds::plain(self.index.clone());
                &plain
            }
        };
        let mut hits = PyList::empty(py);
        self.answer_chunks(py, std::slice::from_ref(&text), mode, k, |answers| {
            hit_lists(py, ids, &answers, |list| {
                hits = list;
                Ok(())
            })
        })?;
        Ok(hits)
    }

    /// The top `k` of every query of `texts` at once, in order: a list of lists of `(docid, score)`.
    /// The GIL is released while the queries are analysed and answered (on every core, or `threads`).
    /// With `as_frame=True`: one pandas DataFrame with columns qid, docid, rank (from 1) and score
    /// (float32), qids from `qids` or "1", "2", … (a query file's line numbers). With `as_arrays=True`:
    /// `(docs, scores)`, numpy arrays of one row per query and `k` columns, best first: the documents'
    /// numbers (int64, -1 past a query's last hit; `Index.doc_ids` gives their ids) and scores
    /// (float32, NaN past the last hit), made without an object per hit (bm25s's shape).
    #[pyo3(signature = (texts, k=10, mode="or", *, qids=None, as_frame=false, as_arrays=false))]
    #[allow(clippy::too_many_arguments)]
    fn search_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        k: i64,
        mode: &str,
        qids: Option<&Bound<'py, PyAny>>,
        as_frame: bool,
        as_arrays: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (mode, k) = self.shape(mode, k)?;
        let texts = crate::texts::query_texts(texts)?;
        let qids = qids.map(crate::texts::qid_strings).transpose()?;
        if as_arrays && (as_frame || qids.is_some()) {
            return Err(value_error(
                "as_arrays=True returns (docs, scores) in query order, without qids: \
                 leave out as_frame and qids, or use as_frame=True for a table with qids",
            ));
        }
        if as_arrays {
            let mut all = Vec::with_capacity(texts.len());
            self.answer_chunks(py, &texts, mode, k, |answers| {
                all.extend(answers);
                Ok(())
            })?;
            return Ok(arrays(py, &all, k, self.pool.as_ref())?.into_any());
        }
        if let Some(q) = &qids {
            if q.len() != texts.len() {
                return Err(value_error(format!(
                    "qids has {} entries for {} queries: give one per query",
                    q.len(),
                    texts.len()
                )));
            }
        }
        if qids.is_some() && !as_frame {
            return Err(value_error(
                "qids= names the rows of as_frame=True's table, and only there: add as_frame=True, or \
                 leave qids out (the lists come in the order of texts)",
            ));
        }
        if as_frame {
            let qids = match qids {
                Some(q) => q,
                None => (1..=texts.len())
                    .map(|i| PyString::new(py, &i.to_string()))
                    .collect(),
            };
            let mut frame = Frame::new(py, qids)?;
            self.answer_chunks(py, &texts, mode, k, |answers| frame.push(answers))?;
            return frame.finish(&self.index, self.pool.as_ref());
        }
        let ids = self.doc_ids(py);
        let out = PyList::empty(py);
        self.answer_chunks(py, &texts, mode, k, |answers| {
            hit_lists(py, ids, &answers, |list| out.append(list))
        })?;
        Ok(out.into_any())
    }

    /// The backend that runs queries: cpu, gpu or hybrid.
    #[getter]
    fn backend(&self) -> &'static str {
        match self.backend {
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
            Backend::Hybrid => "hybrid",
        }
    }

    /// What backend="auto" (or a hybrid without a GPU) chose and why, in one line; None otherwise.
    #[getter]
    fn choice(&self) -> Option<String> {
        self.choice.clone()
    }

    fn __repr__(&self) -> String {
        format!("Searcher({})", self.describe)
    }
}
