//! Never a wrong answer, a crash or a lost index. An index mixed from two builds, damaged
//! behind a valid checksum, or replaced while it is read is an error or the right answer, never a
//! panic and never another index's answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use warpsearch_index::build::{build_from_jsonl, BuildOptions};
use warpsearch_index::container::{FOOTER_LEN, HEADER_LEN};
use warpsearch_index::testdata::replace_file;
use warpsearch_index::{AnalyzerConfig, Bm25Params, Codec, DocOrder, Index, WriterOptions};

fn options(force: bool) -> BuildOptions {
    BuildOptions::new(WriterOptions {
        codec: Codec::PForDelta,
        analyzer: AnalyzerConfig::whitespace(),
        bm25: Bm25Params::default(),
        doc_order: DocOrder::Input,
        force,
    })
}

/// `n` documents of words `w0..w40` from a seeded generator, as JSONL at `path`.
fn collection(path: &Path, n: usize, seed: u64, reversed: bool) {
    let mut x = seed | 1;
    let mut lines: Vec<String> = (0..n)
        .map(|d| {
            let words: Vec<String> = (0..(d % 17 + 3))
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!("w{}", x % 41)
                })
                .collect();
            serde_json::json!({"id": format!("doc-{d}"), "contents": words.join(" ")}).to_string()
        })
        .collect();
    if reversed {
        lines.reverse();
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Every term's documents, by external id: what any search's answer is made of.
fn answers(index: &Index) -> BTreeMap<Vec<u8>, Vec<String>> {
    index
        .terms()
        .map(|(term, id)| {
            let (docs, _) = index.postings(id).decode_all().unwrap();
            (term, docs.iter().map(|&d| index.doc_id(d).to_owned()).collect())
        })
        .collect()
}

/// Two builds of the same documents in opposite orders, under `dir/a` and `dir/b`.
fn two_builds(dir: &Path) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("a"), dir.join("b"));
    collection(&dir.join("a.jsonl"), 300, 5, false);
    collection(&dir.join("b.jsonl"), 300, 5, true);
    build_from_jsonl(&dir.join("a.jsonl"), &a, &options(false)).unwrap();
    build_from_jsonl(&dir.join("b.jsonl"), &b, &options(false)).unwrap();
    (a, b)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        replace_file(&to.join(e.file_name()), &std::fs::read(e.path()).unwrap());
    }
}

/// Files of another build copied into an index.
#[test]
fn torn_index_files_of_another_build_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_builds(dir.path());
    for files in [
        &["docids.bin"][..],
        &["doclens.bin"],
        &["terms.bin", "blocks.bin", "postings.bin"],
        &["terms.fst"],
    ] {
        let mixed = dir.path().join("mixed");
        let _ = std::fs::remove_dir_all(&mixed);
        copy_dir(&a, &mixed);
        for f in files {
            replace_file(&mixed.join(f), &std::fs::read(b.join(f)).unwrap());
        }
        let err = Index::open(&mixed).err().expect("a mixed index must not open");
        assert!(err.to_string().contains("another build"), "{files:?}: {err}");
    }
}

/// Searching in a loop while another thread replaces the index (`index --force`)
/// sees the old or the new index, whole, on every open.
#[test]
fn torn_index_search_during_concurrent_replace_sees_one_whole_build() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_builds(dir.path());
    let expected = [
        answers(&Index::open(&a).unwrap()),
        answers(&Index::open(&b).unwrap()),
    ];
    assert_ne!(expected[0], expected[1]);
    let live = dir.path().join("live");
    build_from_jsonl(&dir.path().join("a.jsonl"), &live, &options(false)).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..12 {
                let input = if i % 2 == 0 { "b.jsonl" } else { "a.jsonl" };
                build_from_jsonl(&dir.path().join(input), &live, &options(true)).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut opened = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) || opened < 20 {
            let index = Index::open(&live).unwrap_or_else(|e| panic!("open during a replace: {e}"));
            let got = answers(&index);
            assert!(
                got == expected[0] || got == expected[1],
                "an answer of neither build"
            );
            opened += 1;
            assert!(opened < 100_000);
        }
    });
}

/// Recomputes the container checksum after a deliberate change to the payload.
fn fix_checksum(bytes: &mut [u8]) {
    let n = bytes.len();
    let crc = crc32fast::hash(&bytes[..n - FOOTER_LEN]);
    bytes[n - 16..n - 12].copy_from_slice(&crc.to_le_bytes());
}

/// One flipped byte in any file, with its checksum rewritten, gives an error at open
/// or later, or a sound index, and never a panic. The term dictionary is damaged at every byte.
#[test]
fn checksum_valid_damage_never_panics() {
    // The damage makes `fst` panic inside the open-time check, which contains it: keep the log clean.
    warpsearch_index::termdict::quiet_fst_panics();
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_builds(dir.path());
    let good = Index::open(&a).unwrap();
    let terms: Vec<(Vec<u8>, u32)> = good.terms().collect();
    drop(good);
    let bad = dir.path().join("bad");
    copy_dir(&a, &bad);
    let mut codec_errors = Vec::new();
    // meta.json is plain JSON whose damage the parser reports; the binary files are walked here.
    for name in warpsearch_index::format::files::REQUIRED
        .into_iter()
        .filter(|&f| f != "meta.json")
    {
        let original = std::fs::read(a.join(name)).unwrap();
        let payload = HEADER_LEN..original.len() - FOOTER_LEN;
        let step = if name == "terms.fst" {
            1
        } else {
            payload.len().div_ceil(300)
        };
        for pos in payload.step_by(step) {
            for flip in [0x01u8, 0x80] {
                let mut bytes = original.clone();
                bytes[pos] ^= flip;
                fix_checksum(&mut bytes);
                replace_file(&bad.join(name), &bytes);
                let Ok(index) = Index::open(&bad) else { continue };
                // The dictionary passed its check: it is a sound ordinal map, every key looks up its own
                // ordinal. (A changed key byte that keeps the byte order makes another sound dictionary:
                // only the checksum can tell that one.)
                let keys: Vec<(Vec<u8>, u32)> = index.terms().collect();
                assert_eq!(keys.len(), terms.len(), "{name}@{pos}");
                for (i, (term, id)) in keys.iter().enumerate() {
                    assert_eq!(*id as usize, i, "{name}@{pos}");
                    if let Ok(t) = std::str::from_utf8(term) {
                        assert_eq!(index.term_id(t), Some(*id), "{name}@{pos}");
                    }
                }
                assert_eq!(index.term_id("absent-term"), None);
                for (_, id) in &keys {
                    // Decoding a damaged block is an error; it must not panic.
                    if let Err(e) = index.postings(*id).decode_all() {
                        codec_errors.push(e.to_string());
                    }
                }
                for d in 0..index.num_docs() {
                    let _ = index.doc_id(d);
                }
            }
        }
        replace_file(&bad.join(name), &original);
    }
    // A block that fails to decode names its term by its text, not its ordinal.
    assert!(!codec_errors.is_empty());
    for e in &codec_errors {
        assert!(e.starts_with("term 'w"), "{e}");
    }
}

/// Fuzz finding (index_open_search, crash-e72094e1): one byte of a dictionary's node xored with 0x23
/// (checksum rewritten) made `fst` panic on an address width of 0 inside the open-time walk. The
/// panic is contained and the open is an error: this pins that it stays an error, and that an `fst`
/// panic never escapes `Index::open`.
#[test]
fn fuzz_fst_address_width_panic_is_an_error() {
    // The damage makes `fst` panic inside the open-time check, which contains it: keep the log clean.
    warpsearch_index::termdict::quiet_fst_panics();
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_builds(dir.path());
    let bad = dir.path().join("bad");
    let original = std::fs::read(a.join("terms.fst")).unwrap();
    let payload = HEADER_LEN..original.len() - FOOTER_LEN;
    let mut errors = 0;
    for pos in payload {
        copy_dir(&a, &bad);
        let mut bytes = original.clone();
        bytes[pos] ^= 0x23;
        fix_checksum(&mut bytes);
        replace_file(&bad.join("terms.fst"), &bytes);
        let opened = std::panic::catch_unwind(|| Index::open(&bad).map(|_| ()));
        match opened {
            Err(_) => panic!("Index::open panicked at terms.fst byte {pos}"),
            Ok(Err(e)) => {
                assert!(e.to_string().contains("terms.fst"), "{e}");
                errors += 1;
            }
            Ok(Ok(())) => {}
        }
    }
    assert!(errors > 0);
}

/// The open-time check of the lists and their skip data (run on all cores) refuses damage behind a
/// valid checksum and, where several lists are damaged, names the lowest ordinal, as a serial pass did.
#[test]
fn damaged_skip_data_is_refused_naming_the_first_damaged_list() {
    use warpsearch_index::format::{BlockMeta, TermRecord};
    let dir = tempfile::tempdir().unwrap();
    // 2,000 documents: each of the 41 words is in a few hundred, lists of several blocks.
    let a = dir.path().join("a");
    collection(&dir.path().join("a.jsonl"), 2000, 5, false);
    build_from_jsonl(&dir.path().join("a.jsonl"), &a, &options(false)).unwrap();
    let index = Index::open(&a).unwrap();
    let records: Vec<TermRecord> = index.term_records().to_vec();
    let name = |id: usize| index.term_name(id as u32);
    // Two lists of several blocks, the later one damaged first.
    let multi: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].num_blocks() >= 2)
        .collect();
    assert!(
        multi.len() >= 2,
        "the test collection has lists of several blocks"
    );
    let (early, late) = (multi[0], multi[multi.len() - 1]);
    let (early_name, late_name) = (name(early), name(late));
    drop(index);
    let bad = dir.path().join("bad");
    copy_dir(&a, &bad);
    let original = std::fs::read(a.join("blocks.bin")).unwrap();
    let meta_at = |block: u64| HEADER_LEN + block as usize * std::mem::size_of::<BlockMeta>();
    let open_err = |bytes: &mut Vec<u8>| {
        fix_checksum(bytes);
        replace_file(&bad.join("blocks.bin"), bytes);
        Index::open(&bad)
            .err()
            .expect("damaged skip data must be refused")
            .to_string()
    };
    // The second block's first docID not past the first block's last: out of order. The later list
    // first, then the earlier one too, which the error then names.
    let mut bytes = original.clone();
    for (list, list_name) in [(late, &late_name), (early, &early_name)] {
        let second = meta_at(records[list].first_block + 1);
        bytes[second..second + 4].copy_from_slice(&0u32.to_le_bytes());
        let err = open_err(&mut bytes);
        assert!(
            err.contains(&format!("skip data of {list_name}, block 1")),
            "{err}"
        );
    }
    replace_file(&bad.join("blocks.bin"), &original);
    // A list that does not start where the one before it ends.
    let terms = std::fs::read(a.join("terms.bin")).unwrap();
    let mut bytes = terms.clone();
    let at = HEADER_LEN + late * std::mem::size_of::<TermRecord>() + 24; // offset_words
    let moved = records[late].offset_words + 1;
    bytes[at..at + 8].copy_from_slice(&moved.to_le_bytes());
    fix_checksum(&mut bytes);
    replace_file(&bad.join("terms.bin"), &bytes);
    let err = Index::open(&bad)
        .err()
        .expect("a misplaced list must be refused")
        .to_string();
    assert!(
        err.contains(&format!("{late_name} points outside the posting files")),
        "{err}"
    );
    replace_file(&bad.join("terms.bin"), &terms);
    assert!(Index::open(&bad).is_ok());
}

/// Every file of an index is written read-only, so that writing into one in place (which changes what
/// an open index maps) needs its permissions overridden first.
#[test]
fn index_files_are_written_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_builds(dir.path());
    for e in std::fs::read_dir(&a).unwrap() {
        let e = e.unwrap();
        let permissions = e.metadata().unwrap().permissions();
        assert!(permissions.readonly(), "{:?} is writable", e.file_name());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(permissions.mode() & 0o777, 0o444, "{:?}", e.file_name());
        }
    }
}

/// Index files truncated or written in place while the index is open (a SIGBUS, or wrong hits,
/// before): the files the open-time check vouches for are held in memory, so the open index answers
/// as before; `postings.bin`, mapped, is reported changed by `check_unchanged`; the next open refuses
/// the damage. A replacement by `--force` (a rename) changes nothing for the open index.
#[test]
fn index_file_truncated_or_written_in_place_while_open_is_an_error_not_sigbus() {
    use warpsearch_index::testdata::write_in_place;
    let dir = tempfile::tempdir().unwrap();
    let (_, b) = two_builds(dir.path());
    let live = dir.path().join("live");
    build_from_jsonl(&dir.path().join("a.jsonl"), &live, &options(false)).unwrap();
    let index = Index::open(&live).unwrap();
    let before = answers(&index);
    index.check_unchanged().unwrap();
    // Replaced by another build: the open index keeps its files.
    build_from_jsonl(&dir.path().join("b.jsonl"), &live, &options(true)).unwrap();
    assert_eq!(answers(&index), before);
    index.check_unchanged().unwrap();
    drop(index);

    build_from_jsonl(&dir.path().join("a.jsonl"), &live, &options(true)).unwrap();
    let index = Index::open(&live).unwrap();
    // Past the file system's timestamp granularity, so that a write shows in the modification time.
    std::thread::sleep(std::time::Duration::from_millis(50));
    for name in warpsearch_index::format::files::REQUIRED
        .into_iter()
        .filter(|&f| f != "postings.bin")
    {
        write_in_place(&live.join(name), &[]);
        assert_eq!(answers(&index), before, "{name} truncated");
    }
    for name in ["terms.bin", "blocks.bin", "docids.bin"] {
        write_in_place(&live.join(name), &std::fs::read(b.join(name)).unwrap());
        assert_eq!(answers(&index), before, "{name} rewritten");
    }
    index.check_unchanged().unwrap();
    // The same length, one byte changed: wrong hits if used, so an error.
    let postings = live.join("postings.bin");
    let mut bytes = std::fs::read(&postings).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    write_in_place(&postings, &bytes);
    let err = index.check_unchanged().unwrap_err().to_string();
    assert!(
        err.contains("postings.bin") && err.contains("changed on disk while the index was open"),
        "{err}"
    );
    write_in_place(&postings, &[]);
    assert!(index.check_unchanged().is_err());
    drop(index);
    assert!(Index::open(&live).is_err());
}

/// Rewrites the payload of index file `name` in `dir` by `change`, keeping its kind and build identity
/// and writing a valid checksum: damage that only the cross-checks behind the checksum can see.
fn rewrite_payload(dir: &Path, name: &str, change: impl FnOnce(&mut Vec<u8>)) {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).unwrap();
    let kind: [u8; 8] = bytes[8..16].try_into().unwrap();
    let build_id = u64::from_le_bytes(bytes[20..28].try_into().unwrap());
    let mut payload = bytes[HEADER_LEN..bytes.len() - FOOTER_LEN].to_vec();
    change(&mut payload);
    std::fs::remove_file(&path).unwrap();
    warpsearch_index::container::write_file(&path, &kind, build_id, &payload).unwrap();
}

/// `meta.json` rewritten by `change` (as JSON), keeping its build identity and writing a valid
/// checksum: damage that only the cross-checks behind the checksum can see.
fn rewrite_meta(dir: &Path, change: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("meta.json");
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let id = value["build_id"].as_str().unwrap();
    let build_id = u64::from_str_radix(id, 16).unwrap();
    change(&mut value);
    let meta: warpsearch_index::IndexMeta = serde_json::from_value(value).unwrap();
    replace_file(&path, &warpsearch_index::meta::to_json(&meta, build_id));
}

/// A fresh copy of index `from` at `dir/name`.
fn copy_of(from: &Path, dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    let _ = std::fs::remove_dir_all(&to);
    copy_dir(from, &to);
    to
}

fn open_error(dir: &Path) -> String {
    Index::open(dir)
        .err()
        .expect("the damage must be refused at open")
        .to_string()
}

/// `avg_doc_len` of 0 or −5 (checksum valid) opened and gave other than the top k: it must be
/// `total_doc_len / num_docs`.
#[test]
fn avg_doc_len_other_than_the_mean_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_builds(dir.path());
    for bad in [0.0, -5.0, 1e9] {
        let idx = copy_of(&a, dir.path(), "bad");
        rewrite_meta(&idx, |m| m["avg_doc_len"] = bad.into());
        let err = open_error(&idx);
        assert!(err.contains("meta.json") && err.contains("avg_doc_len"), "{err}");
    }
    // The rewrite alone (the same value) is no damage.
    let idx = copy_of(&a, dir.path(), "same");
    rewrite_meta(&idx, |_| {});
    Index::open(&idx).unwrap();
}

/// Document lengths that do not sum to `total_doc_len` (checksum valid) were not noticed.
#[test]
fn doclens_not_summing_to_total_doc_len_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_builds(dir.path());
    let idx = copy_of(&a, dir.path(), "bad");
    rewrite_payload(&idx, "doclens.bin", |p| p[4] = p[4].wrapping_add(1));
    let err = open_error(&idx);
    assert!(
        err.contains("doclens.bin") && err.contains("total_doc_len"),
        "{err}"
    );
}

/// `format_version` 0 or 2 in `meta.json` (checksum valid) was accepted; 1 is version 1's, whose
/// `meta.json` is in the binary envelope, never plain JSON.
#[test]
fn meta_format_version_other_than_this_builds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_builds(dir.path());
    for version in [0, 1, 3] {
        let idx = copy_of(&a, dir.path(), "bad");
        rewrite_meta(&idx, |m| m["format_version"] = version.into());
        let err = open_error(&idx);
        assert!(err.contains(&format!("format_version {version}")), "{err}");
    }
}

/// An index in global-score order with static scores, built in `dir/gs` from `dir/a.jsonl`.
fn global_score_build(dir: &Path) -> PathBuf {
    collection(&dir.join("a.jsonl"), 300, 5, false);
    let scores: String = (0..300)
        .map(|d| format!("doc-{d}\t{}\n", (d * 37 % 101) as f32 / 7.0))
        .collect();
    std::fs::write(dir.join("static.tsv"), scores).unwrap();
    let mut opts = options(false);
    opts.static_scores = Some(dir.join("static.tsv"));
    opts.reorder_alpha = Some(0.5);
    let out = dir.join("gs");
    build_from_jsonl(&dir.join("a.jsonl"), &out, &opts).unwrap();
    out
}

/// Global scores that increase somewhere (checksum valid) made early termination stop too soon
/// (answers other than the exhaustive top k): they must not increase with the docID.
#[test]
fn global_scores_that_increase_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let gs = global_score_build(dir.path());
    Index::open(&gs).unwrap();
    let idx = copy_of(&gs, dir.path(), "bad");
    // The scores of documents 10 and 11 swapped, where they differ.
    let scores: Vec<f32> = Index::open(&gs).unwrap().global_scores().unwrap().to_vec();
    let d = (0..scores.len() - 1)
        .find(|&d| scores[d] > scores[d + 1])
        .unwrap();
    rewrite_payload(&idx, "global.bin", |p| p[4 * d..4 * d + 8].rotate_left(4));
    let err = open_error(&idx);
    assert!(
        err.contains("global.bin") && err.contains("must not increase"),
        "{err}"
    );
}

/// Static scores outside the range `meta.json` gives (checksum valid) were normalised wrongly; a range
/// that is not theirs is refused too.
#[test]
fn static_scores_outside_the_meta_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let gs = global_score_build(dir.path());
    let idx = copy_of(&gs, dir.path(), "bad");
    rewrite_payload(&idx, "static.bin", |p| {
        p[..4].copy_from_slice(&1000f32.to_le_bytes())
    });
    let err = open_error(&idx);
    assert!(err.contains("static.bin") && err.contains("range"), "{err}");
    let idx = copy_of(&gs, dir.path(), "bad");
    rewrite_meta(&idx, |m| m["static_scores"]["max"] = 99.0.into());
    let err = open_error(&idx);
    assert!(err.contains("static.bin") && err.contains("to 99"), "{err}");
}
