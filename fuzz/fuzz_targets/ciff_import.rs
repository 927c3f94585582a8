//! CIFF import of arbitrary bytes: an index or an error, never a panic (nor an allocation the input
//! does not justify: libFuzzer's -rss_limit_mb catches those).
#![no_main]

use std::sync::OnceLock;

use warpsearch_index::ciff::{import, ImportOptions};
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, WriterOptions};

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap()).path();
    let (input, output) = (dir.join("in.ciff"), dir.join("out"));
    std::fs::write(&input, data).unwrap();
    let opts = ImportOptions {
        writer: WriterOptions {
            codec: Codec::ALL[data.first().copied().unwrap_or(0) as usize % 3],
            analyzer: AnalyzerConfig::whitespace(),
            bm25: Bm25Params::default(),
            doc_order: DocOrder::Input,
            force: true,
        },
        analyzer_override: false,
    };
    if import(&input, &output, opts).is_ok() {
        warpsearch_index::Index::open(&output).expect("an imported index opens");
    }
});
