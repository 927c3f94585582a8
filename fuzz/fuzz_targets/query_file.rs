//! A query file, then each query through both analyzers: never a panic; accepted qids have no white
//! space, and the byte-order mark never reaches a qid.
#![no_main]

use warpsearch_index::AnalyzerConfig;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut warnings = Vec::new();
    let Ok(lines) = warpsearch_index::queries::read_queries(data, "fuzz", &mut warnings) else {
        return;
    };
    for l in &lines {
        assert!(!l.qid.is_empty() && !l.qid.contains(char::is_whitespace));
        assert!(!l.qid.starts_with('\u{feff}'));
        for analyzer in [AnalyzerConfig::english(), AnalyzerConfig::whitespace()] {
            analyzer.for_each_term(&l.text, |t| assert!(!t.is_empty()));
        }
    }
});
