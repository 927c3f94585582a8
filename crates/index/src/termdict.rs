//! The term dictionary (`terms.fst`): opening it and checking its structure, so that a damaged file
//! whose checksum was rewritten is an error at open instead of a panic or a wrong ordinal later.
//!
//! The `fst` crate parses nodes lazily and indexes its bytes without checks of its own (it panics on a
//! bad address; it has no `unsafe` in node parsing, so a panic is all a damaged file can cause). We
//! therefore walk every node once at open: every address must point backwards (children are written
//! before parents, which also rules out cycles), and because our terms are numbered in byte order the
//! outputs are fully determined: inside the subtree of any node, the keys' outputs relative to the node
//! are 0, 1, 2, … in order. Checking that per node (memoised, so linear in the file) proves that every
//! lookup returns the right ordinal or none. Nodes with a transition index (over 32 transitions) also
//! have that index compared with their transitions, since lookups read it and a walk does not.
//!
//! The walk runs under `catch_unwind`: a panic inside `fst` while parsing a damaged node becomes a
//! "damaged" error. (The panic hook still runs: a program that does not want the contained panics'
//! messages, as the CLI, the fuzz target and the damage tests, calls [`quiet_fst_panics`].)

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use fst::raw::{CompiledAddr, Node};

use crate::container::Payload;
use crate::error::{corrupt, IndexError, Result};

/// Installs a panic hook that says nothing about panics raised inside the `fst` crate (which opening a
/// damaged dictionary contains and reports as an error) and hands every other panic to the hook that
/// was installed before. The library never installs it itself: the program decides.
pub fn quiet_fst_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.location().is_some_and(|l| l.file().contains("/fst-")) {
            previous(info)
        }
    }));
}

/// `fst` builds this index table into nodes with more transitions than this (fst 0.4).
const TRANS_INDEX_THRESHOLD: usize = 32;

/// Maps the dictionary (its footer checked by `fst`).
pub(crate) fn open(payload: Payload, path: &Path) -> Result<fst::Map<Payload>> {
    match catch_unwind(AssertUnwindSafe(|| fst::Map::new(payload))) {
        Ok(Ok(map)) => Ok(map),
        Ok(Err(e)) => Err(corrupt(path, format!("term dictionary: {e}"))),
        Err(_) => Err(damaged(path)),
    }
}

fn damaged(path: &Path) -> IndexError {
    corrupt(
        path,
        "the term dictionary's structure is damaged; rebuild the index",
    )
}

/// Checks that `map` holds `num_terms` keys numbered 0.. in byte order, reading every node.
pub(crate) fn check(map: &fst::Map<Payload>, num_terms: u64, path: &Path) -> Result<()> {
    if map.len() as u64 != num_terms {
        return Err(corrupt(path, "term count differs from the metadata"));
    }
    let fst = map.as_fst();
    let size = fst.as_bytes().len();
    let walked = catch_unwind(AssertUnwindSafe(|| -> Option<u64> {
        let root = fst.root();
        if num_terms == 0 {
            return (root.is_empty() && !root.is_final()).then_some(0);
        }
        let keys = subtree_keys(fst, root, size)?;
        (root.final_output().value() == 0).then_some(keys)
    }));
    match walked {
        Ok(Some(keys)) if keys == num_terms => Ok(()),
        _ => Err(damaged(path)),
    }
}

/// The number of keys below `root` when every node below it is sound (see the module comment).
fn subtree_keys(fst: &fst::raw::Fst<Payload>, root: Node<'_>, size: usize) -> Option<u64> {
    let mut keys: HashMap<CompiledAddr, u64> = HashMap::new();
    // Post-order walk with an explicit stack: (node address, children pushed yet?).
    let mut stack = vec![(root.addr(), false)];
    while let Some((addr, expanded)) = stack.pop() {
        if keys.contains_key(&addr) {
            continue;
        }
        let node = fst.node(addr);
        if !expanded {
            stack.push((addr, true));
            for t in node.transitions() {
                // Children come before their parent in the file: this also rules out cycles.
                if (t.addr >= addr && !(t.addr == 0 && addr == 0)) || t.addr >= size {
                    return None;
                }
                if !keys.contains_key(&t.addr) {
                    stack.push((t.addr, false));
                }
            }
            continue;
        }
        let mut count = if node.is_final() {
            (node.final_output().value() == 0).then_some(1u64)?
        } else {
            0
        };
        let mut previous: Option<u8> = None;
        for (i, t) in node.transitions().enumerate() {
            if previous.is_some_and(|p| p >= t.inp) || t.out.value() != count {
                return None;
            }
            previous = Some(t.inp);
            if node.len() > TRANS_INDEX_THRESHOLD && node.find_input(t.inp) != Some(i) {
                return None;
            }
            let below = *keys.get(&t.addr)?;
            count = count.checked_add(below)?;
        }
        if node.len() > TRANS_INDEX_THRESHOLD {
            // Lookups of absent bytes read the index too.
            let present: Vec<u8> = node.transitions().map(|t| t.inp).collect();
            if (0..=255u8).any(|b| !present.contains(&b) && node.find_input(b).is_some()) {
                return None;
            }
        }
        // Every node leads to a key: a sound dictionary has no dead ends.
        if count == 0 {
            return None;
        }
        keys.insert(addr, count);
    }
    keys.get(&root.addr()).copied()
}

/// The term of ordinal `id`, lossily as text (a scan: for messages only).
pub(crate) fn term_text(map: &fst::Map<Payload>, id: u32) -> String {
    use fst::Streamer;
    let found = catch_unwind(AssertUnwindSafe(|| {
        let mut stream = map.stream();
        while let Some((k, v)) = stream.next() {
            if v == id as u64 {
                return Some(String::from_utf8_lossy(k).into_owned());
            }
        }
        None
    }));
    found.ok().flatten().unwrap_or_else(|| format!("#{id}"))
}

/// `term 'TEXT'` for ordinal `id`.
pub(crate) fn term_name(map: &fst::Map<Payload>, id: u32) -> String {
    format!("term '{}'", term_text(map, id))
}
