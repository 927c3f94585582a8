//! The CPU engine's threads for the server. Requests wait in one queue, first come, first served (a
//! request's queries never overtake an earlier request's: letting them doubled the p99); every free
//! thread claims the next query of the oldest request with one atomic step, so that a request of 1,000
//! queries is answered by all threads at once. Against a pool task per query (rayon's injector, an
//! `Arc` per query) this leaves a query's overhead at one shared counter.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use warpsearch_cpu::CpuSearcher;
use warpsearch_query::Request;

use super::gather::{Answered, Gather};
use super::searcher::lock;

/// One request's queries.
struct Job {
    requests: Vec<Request>,
    /// The next query to claim (beyond the last: every query claimed).
    next: AtomicUsize,
    gather: Arc<Gather>,
}

impl Job {
    fn claimed(&self) -> bool {
        self.next.load(Ordering::Relaxed) >= self.requests.len()
    }
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
}

#[derive(Default)]
struct State {
    /// Requests with queries to claim, oldest first (a claimed one is dropped when reached).
    jobs: VecDeque<Arc<Job>>,
    /// Set when the [`Workers`] are dropped: the threads finish the queue and stop.
    closed: bool,
}

/// The threads and their queue.
pub struct Workers {
    queue: Arc<Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    /// `threads` threads answering on `cpu`.
    pub fn start(cpu: &CpuSearcher, threads: usize) -> std::io::Result<Workers> {
        let queue = Arc::new(Queue::default());
        let threads = (0..threads.max(1))
            .map(|t| {
                let (queue, cpu) = (queue.clone(), cpu.clone());
                std::thread::Builder::new()
                    .name(format!("warpsearch-cpu-{t}"))
                    .spawn(move || work(&queue, &cpu))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Workers { queue, threads })
    }

    /// Queues `requests`; each answer goes to `gather` under its index.
    pub fn submit(&self, requests: Vec<Request>, gather: Arc<Gather>) {
        if requests.is_empty() {
            return;
        }
        // As many threads as the request has queries (a busy thread looks at the queue again when
        // its query is answered): a request of 2 queries wakes 2 of 16 sleeping threads, not all.
        let wake = requests.len().min(self.threads.len());
        let job = Arc::new(Job {
            requests,
            next: AtomicUsize::new(0),
            gather,
        });
        lock(&self.queue.state).jobs.push_back(job);
        for _ in 0..wake {
            self.queue.ready.notify_one();
        }
    }
}

/// Answers what is queued, then stops the threads.
impl Drop for Workers {
    fn drop(&mut self) {
        lock(&self.queue.state).closed = true;
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Queue {
    /// The oldest request with a query to claim; None once closed and empty.
    fn oldest(&self) -> Option<Arc<Job>> {
        let mut state = lock(&self.state);
        loop {
            while state.jobs.front().is_some_and(|j| j.claimed()) {
                state.jobs.pop_front();
            }
            if let Some(job) = state.jobs.front() {
                return Some(job.clone());
            }
            if state.closed {
                return None;
            }
            state = self.ready.wait(state).expect("no thread panics under this lock");
        }
    }
}

/// A thread's loop: claims queries from its request until it has none left, then takes the oldest
/// (which is the next request: a request is only reached once every older one is claimed).
fn work(queue: &Queue, cpu: &CpuSearcher) {
    let mut current: Option<Arc<Job>> = None;
    loop {
        let job = match current.take() {
            Some(job) => job,
            None => match queue.oldest() {
                Some(job) => job,
                None => return,
            },
        };
        let i = job.next.fetch_add(1, Ordering::Relaxed);
        let Some(request) = job.requests.get(i) else {
            continue;
        };
        let run = std::panic::AssertUnwindSafe(|| cpu.answer(request));
        let result = match std::panic::catch_unwind(run) {
            Ok(answer) => answer.map_err(|e| e.to_string()),
            Err(_) => Err("the query panicked".to_string()),
        };
        let answered = Answered {
            result,
            latency: job.gather.started.elapsed(),
            served_by: None,
            missed_deadline: false,
        };
        job.gather.put(i, answered);
        current = Some(job);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::sync::oneshot;
    use warpsearch_index::build::{build_from_jsonl, BuildOptions};
    use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};
    use warpsearch_query::{Mode, Query, Scorer, SearchOptions};

    use super::*;

    /// 500 documents over 12 words, some frequent, some rare.
    fn searcher(dir: &std::path::Path) -> CpuSearcher {
        let mut lines = String::new();
        for d in 0..500u32 {
            let words: Vec<String> = (0..12u32)
                .filter(|w| (d * 7 + w * 13) % (w + 2) == 0)
                .map(|w| format!("w{w}"))
                .collect();
            let text = words.join(" ");
            lines.push_str(&format!("{{\"id\": \"d{d}\", \"contents\": \"{text} x\"}}\n"));
        }
        std::fs::write(dir.join("in.jsonl"), lines).unwrap();
        let opts = BuildOptions::new(WriterOptions {
            codec: Codec::SimdBp,
            analyzer: AnalyzerConfig::whitespace(),
            bm25: Bm25Params::default(),
            doc_order: DocOrder::Input,
            force: true,
        });
        build_from_jsonl(&dir.join("in.jsonl"), &dir.join("idx"), &opts).unwrap();
        let index = Arc::new(Index::open(dir.join("idx")).unwrap());
        let options = SearchOptions::new(&index);
        CpuSearcher::new(Arc::new(Scorer::new(index, options).unwrap()))
    }

    #[test]
    fn every_query_of_every_request_is_answered_as_alone_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = searcher(dir.path());
        let index = cpu.scorer().index().clone();
        let request = |i: usize| {
            let text = format!("w{} w{} nosuchword", i % 12, (i * 5) % 12);
            let mode = [Mode::And, Mode::Or][i % 2];
            Request::new(Query::parse(&index, &text), mode, 1 + i % 7)
        };
        let workers = Workers::start(&cpu, 3).unwrap();
        let sizes = [1, 17, 0, 64, 2];
        let mut pending = Vec::new();
        for (r, &n) in sizes.iter().enumerate() {
            let requests: Vec<Request> = (0..n).map(|i| request(r * 100 + i)).collect();
            let (tx, rx) = oneshot::channel();
            let gather = Arc::new(Gather::new(Instant::now(), n, tx));
            workers.submit(requests.clone(), gather);
            pending.push((requests, rx));
        }
        for (requests, rx) in pending {
            let answers = rx.blocking_recv().expect("every request answered");
            assert_eq!(answers.len(), requests.len());
            for (request, answered) in requests.iter().zip(answers) {
                let alone = cpu.answer(request).unwrap().hits;
                assert_eq!(answered.result.unwrap().hits, alone, "{request:?}");
            }
        }
        drop(workers); // joins the threads: returns only if every thread stops
    }

    #[test]
    fn dropped_workers_answer_what_is_queued_first() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = searcher(dir.path());
        let index = cpu.scorer().index().clone();
        let workers = Workers::start(&cpu, 2).unwrap();
        let mut pending = Vec::new();
        for r in 0..20 {
            let requests: Vec<Request> = (0..50)
                .map(|i| Request::new(Query::parse(&index, &format!("w{} x", (r + i) % 12)), Mode::Or, 5))
                .collect();
            let (tx, rx) = oneshot::channel();
            workers.submit(requests, Arc::new(Gather::new(Instant::now(), 50, tx)));
            pending.push(rx);
        }
        drop(workers);
        for rx in pending {
            let answers = rx.blocking_recv().expect("answered before the threads stopped");
            assert!(answers
                .iter()
                .all(|a| a.result.as_ref().is_ok_and(|r| !r.hits.is_empty())));
        }
    }
}
