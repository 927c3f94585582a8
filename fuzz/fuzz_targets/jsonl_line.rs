//! One JSONL line of a collection: a document or an error, never a panic; an accepted id is one a TREC
//! run can hold.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = warpsearch_index::build::input::parse_line(data) {
        assert!(!doc.id.is_empty() && !doc.id.contains(char::is_whitespace));
    }
});
