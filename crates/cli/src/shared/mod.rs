//! What the commands share, so that no command imports another: the engine as they open and call it
//! ([`engine`]), query files ([`queries`]), where results go ([`output`]), the numbers of a run
//! ([`stats`]), the engine's counters as lines and JSON ([`report`], [`early`]) and where a report
//! was measured ([`provenance`]).

pub mod early;
pub mod engine;
pub mod output;
pub mod provenance;
pub mod queries;
pub mod report;
pub mod stats;
