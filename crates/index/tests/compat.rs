//! Indexes of format version 1 (`meta.json` in the binary envelope), written by a build of that
//! version from `tests/compat/docs.jsonl` (`warpsearch index --input docs.jsonl --output v1 --store`,
//! and `--output v1-shards --shards 2`), still open, and hold what this build writes for the same input
//! but for `meta.json`'s envelope and the version in the binary files' headers.

use std::path::{Path, PathBuf};

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::container::{FOOTER_LEN, FORMAT_VERSION, HEADER_LEN};
use warpsearch_index::meta::ENVELOPED_VERSION;
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, IndexMeta, WriterOptions};

fn compat(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/compat")
        .join(name)
}

/// The index this build writes from the golden input, with the options version 1's was built with
/// (the CLI's defaults).
fn build_now(out: &Path, store: bool, shards: usize) -> Index {
    let mut opts = BuildOptions::new(WriterOptions {
        codec: Codec::SimdBp,
        analyzer: AnalyzerConfig::english(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force: false,
    });
    opts.store = store;
    if shards > 1 {
        opts.shards = Some(warpsearch_index::shards::Sharding {
            split: warpsearch_index::shards::ShardSplit::Count(shards),
            parallel: true,
            part: warpsearch_index::shards::ShardPart::All,
        });
    }
    build_from_jsonl(&compat("docs.jsonl"), out, &opts).unwrap();
    Index::open(out).unwrap()
}

/// `meta` with this build's version, the one field versions 1 and 2 differ in.
fn as_current(meta: &IndexMeta) -> IndexMeta {
    let mut m = meta.clone();
    m.format_version = FORMAT_VERSION;
    m.shard = m.shard.map(|mut s| {
        s.set = 0;
        s
    });
    m
}

/// Every binary file of the two directories (shards included) holds the same payload.
fn same_payloads(old: &Path, new: &Path) {
    for entry in std::fs::read_dir(old).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if entry.path().is_dir() {
            same_payloads(&entry.path(), &new.join(&name));
            continue;
        }
        if name == "meta.json" {
            continue;
        }
        let payload = |p: &Path| {
            let b = std::fs::read(p).unwrap();
            b[HEADER_LEN..b.len() - FOOTER_LEN].to_vec()
        };
        assert!(
            payload(&entry.path()) == payload(&new.join(&name)),
            "{name:?} differs"
        );
    }
}

#[test]
fn a_version_one_index_opens_and_holds_what_this_build_writes() {
    let dir = tempfile::tempdir().unwrap();
    let old = Index::open(compat("v1")).unwrap();
    assert_eq!(old.meta().format_version, ENVELOPED_VERSION);
    assert!(std::fs::read(compat("v1/meta.json"))
        .unwrap()
        .starts_with(b"WARPSRCH"));
    let new = build_now(&dir.path().join("v2"), true, 1);
    assert_eq!(as_current(old.meta()), as_current(new.meta()));
    same_payloads(&compat("v1"), &dir.path().join("v2"));
    let bear = old.term_id("bear").unwrap();
    assert_eq!(
        old.postings(bear).decode_all().unwrap(),
        new.postings(bear).decode_all().unwrap()
    );
    assert_eq!(
        old.store().unwrap().get(1).unwrap(),
        new.store().unwrap().get(1).unwrap()
    );
    // This build writes plain JSON that names its version.
    let text = std::fs::read_to_string(dir.path().join("v2/meta.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["format_version"], FORMAT_VERSION);
    assert_eq!(json["num_docs"], 20);
}

#[test]
fn a_version_one_sharded_index_opens() {
    let dir = tempfile::tempdir().unwrap();
    let old = Index::open(compat("v1-shards")).unwrap();
    let new = build_now(&dir.path().join("v2"), false, 2);
    assert_eq!(old.shards().len(), 2);
    assert_eq!(as_current(old.meta()), as_current(new.meta()));
    for (o, n) in old.shards().iter().zip(new.shards()) {
        assert_eq!(as_current(o.index().meta()), as_current(n.index().meta()));
    }
    same_payloads(&compat("v1-shards"), &dir.path().join("v2"));
}

/// A file of version 1 beside a version 2 `meta.json` of the same build was edited: refused.
#[test]
fn a_file_of_another_version_than_meta_json_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v2");
    drop(build_now(&out, false, 1));
    let path = out.join("doclens.bin");
    let bytes = std::fs::read(&path).unwrap();
    let build_id = u64::from_le_bytes(bytes[20..28].try_into().unwrap());
    let kind: [u8; 8] = bytes[8..16].try_into().unwrap();
    std::fs::remove_file(&path).unwrap();
    let payload = &bytes[HEADER_LEN..bytes.len() - FOOTER_LEN];
    warpsearch_index::container::write_file_of_version(&path, &kind, ENVELOPED_VERSION, build_id, payload)
        .unwrap();
    let err = Index::open(&out).err().expect("refused").to_string();
    assert!(
        err.contains("doclens.bin") && err.contains("format version 1"),
        "{err}"
    );
}
