//! Where early termination stopped the queries on an index in global-score order (docs/references.md#pruned-list-caching section
//! 3.2), for `search --stats` and `bench`. The list cache's VFB policy caches the blocks before those
//! stops, so the earlier queries stop, the more it can save over caching whole lists.

use anyhow::Result;
use serde_json::{json, Value};
use warpsearch_engine::Engine;
use warpsearch_query::Request;

/// How many queries stopped before their lists ended, and where, as a share of the docIDs.
pub struct Stops {
    queries: usize,
    /// The stopped queries' stops, in percent of the docIDs, ascending.
    shares: Vec<f64>,
}

impl Stops {
    /// Where `requests` stop on `engine`'s index; `None` where queries do not stop early (no
    /// global-score order for these options). The queries run again on the CPU.
    pub fn of(engine: &Engine, requests: &[Request]) -> Result<Option<Stops>> {
        let Some(stops) = engine.early_stops(requests)? else {
            return Ok(None);
        };
        let docs = engine.scorer().index().num_docs().max(1) as f64;
        let mut shares: Vec<f64> = stops.iter().flatten().map(|&d| d as f64 / docs * 100.0).collect();
        shares.sort_unstable_by(f64::total_cmp);
        Ok(Some(Stops {
            queries: requests.len(),
            shares,
        }))
    }

    /// The share (percent) at percentile `p` of the stopped queries (nearest rank; some stopped).
    fn at(&self, p: f64) -> f64 {
        crate::shared::stats::nearest_rank(&self.shares, p / 100.0).expect("some queries stopped")
    }

    fn mean(&self) -> f64 {
        self.shares.iter().sum::<f64>() / self.shares.len() as f64
    }

    /// One line for people.
    pub fn line(&self) -> String {
        let n = self.queries;
        if self.shares.is_empty() {
            return format!("early termination: none of {n} queries stopped before their lists ended");
        }
        format!(
            "early termination: {} of {n} queries stopped before their lists ended, at {:.1}% of the \
             docIDs on average (median {:.1}%, p90 {:.1}%)",
            self.shares.len(),
            self.mean(),
            self.at(50.0),
            self.at(90.0)
        )
    }

    /// For a JSON report: `queries`, `stopped`, and the stops' `mean`, `p50` and `p90` in percent of
    /// the docIDs (null when none stopped).
    pub fn json(&self) -> Value {
        let some = !self.shares.is_empty();
        json!({"queries": self.queries, "stopped": self.shares.len(),
               "stop_share_percent": some.then(|| json!({"mean": self.mean(), "p50": self.at(50.0),
                                                        "p90": self.at(90.0)}))})
    }
}
