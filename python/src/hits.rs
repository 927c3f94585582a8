//! Answers as Python objects: per query, a list of `(docid, score)` tuples, best first. This runs on the
//! thread that holds the GIL, which no other thread can help with, so at large k it is what limits
//! `search_batch` (docs/decisions/021-python-output-modes.md). What it does to be cheap there, each
//! measured (the thread's CPU time per hit at k = 1000):
//!
//! - The id of a document is two dependent reads at random places of the index's id table (its offset,
//!   then its bytes): cache misses that stalled the thread for about half of its time. [`DocIds`] keeps the
//!   offsets in a table of its own (4 bytes a document, made by a searcher's first batch), so that both
//!   reads are prefetched hits ahead of their use: about 400 ns a hit became 160–240.
//! - CPython's cyclic collector traverses every list it tracks, visiting each tuple in it. Tuples are
//!   made first, one list's side by side (not interleaved with the strings, the same size class), so that
//!   its visits read contiguous memory; they are untracked at once (CPython untracks a tuple of a str and
//!   a float at its first collection anyway), and a list is tracked once it is filled (as PyList_New
//!   leaves it), so that collections while it fills do not traverse it: 5–12% less.
//! - Objects are made with CPython's calls (PyTuple_New, PyUnicode_FromStringAndSize,
//!   PyFloat_FromDouble) into lists of their final length, without per-hit conversions.

use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;
use warpsearch_index::Index;
use warpsearch_query::Answer;

/// How many hits ahead of its use a document's offset, then its id, is prefetched. Measured: 8 and 4
/// or 32 and 16 are as good (within noise).
const OFFSET_AHEAD: usize = 16;
const ID_AHEAD: usize = 8;

/// The ids of an index's documents, with each one's place in the index's id table where a prefetch can
/// find it.
pub struct DocIds {
    index: Arc<Index>,
    /// Where the id table's text starts (its address, exposed: the ids are read back from it).
    base: usize,
    /// Each document's id at `base + starts[doc]..base + starts[doc + 1]`; empty where the table does not
    /// fit in u32 offsets (4 GiB of ids) or is not laid out so, where ids are read with
    /// [`Index::doc_id`] and not prefetched.
    starts: Vec<u32>,
}

impl DocIds {
    /// The table of `index` (a pass over its ids: about 6 ms for 776,864 documents).
    pub fn new(index: Arc<Index>) -> DocIds {
        let (base, starts) = Self::table(&index).unwrap_or((0, Vec::new()));
        DocIds { index, base, starts }
    }

    /// No table: ids read with `Index::doc_id`, not prefetched.
    pub fn plain(index: Arc<Index>) -> DocIds {
        DocIds {
            index,
            base: 0,
            starts: Vec::new(),
        }
    }

    /// `(base, starts)`, checked against `Index::doc_id` for every document: the ids lie one after the
    /// other in document order, as the index writes them.
    fn table(index: &Index) -> Option<(usize, Vec<u32>)> {
        let n = index.num_docs();
        if n == 0 {
            return None;
        }
        let base = index.doc_id(0).as_ptr().expose_provenance();
        let mut starts = Vec::with_capacity(n as usize + 1);
        let mut end = 0usize;
        for doc in 0..n {
            let id = index.doc_id(doc);
            if id.as_ptr().addr().wrapping_sub(base) != end {
                return None;
            }
            starts.push(u32::try_from(end).ok()?);
            end += id.len();
        }
        starts.push(u32::try_from(end).ok()?);
        Some((base, starts))
    }

    /// The id of `doc`: the bytes of `Index::doc_id(doc)`.
    #[inline(always)]
    fn get(&self, doc: u32) -> &[u8] {
        let d = doc as usize;
        match (self.starts.get(d), self.starts.get(d + 1)) {
            (Some(&start), Some(&end)) => {
                // SAFETY: the bytes `Index::doc_id(doc)` returned when the table was made (checked in
                // `table`), in the index's memory map, which lives (unchanged) as long as `self.index`.
                unsafe {
                    std::slice::from_raw_parts(
                        std::ptr::with_exposed_provenance::<u8>(self.base + start as usize),
                        (end - start) as usize,
                    )
                }
            }
            _ => self.index.doc_id(doc).as_bytes(),
        }
    }

    /// Starts loading the offset of `doc`.
    #[inline(always)]
    fn prefetch_offset(&self, doc: u32) {
        if let Some(start) = self.starts.get(doc as usize) {
            prefetch(std::ptr::from_ref(start).cast());
        }
    }

    /// Starts loading the id of `doc` (its offset read, best prefetched a few hits before).
    #[inline(always)]
    fn prefetch_id(&self, doc: u32) {
        if let Some(&start) = self.starts.get(doc as usize) {
            prefetch(std::ptr::with_exposed_provenance::<u8>(
                self.base + start as usize,
            ));
        }
    }
}

/// A hint to load the cache line at `p` (no effect on other architectures).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not access memory (any address is allowed).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// One list of `(docid, score)` tuples per answer, best first, handed to `push` in order. Scores are the
/// engine's f32 as Python floats, exactly.
pub fn hit_lists<'py>(
    py: Python<'py>,
    ids: &DocIds,
    answers: &[Answer],
    mut push: impl FnMut(Bound<'py, PyList>) -> PyResult<()>,
) -> PyResult<()> {
    // Two cursors over every hit of the chunk (not only one answer's, as answers may be short): one to
    // prefetch offsets, one to prefetch ids.
    let mut offsets_ahead = answers.iter().flat_map(|a| &a.hits);
    let mut ids_ahead = offsets_ahead.clone();
    for h in offsets_ahead.by_ref().take(OFFSET_AHEAD) {
        ids.prefetch_offset(h.doc);
    }
    for h in ids_ahead.by_ref().take(ID_AHEAD) {
        ids.prefetch_id(h.doc);
    }
    let mut tuples: Vec<*mut ffi::PyObject> = Vec::new();
    for answer in answers {
        let hits = &answer.hits;
        // SAFETY: CPython calls with the GIL held (`py`); each new reference is checked for NULL (an
        // error, fetched) and then owned by `list` (which frees what it holds where this fails half-way:
        // NULL slots and tuple items included), or given to a tuple or the list, which steal it.
        unsafe {
            let list = ffi::PyList_New(hits.len() as ffi::Py_ssize_t);
            let list = Bound::from_owned_ptr_or_err(py, list)?.cast_into_unchecked::<PyList>();
            ffi::PyObject_GC_UnTrack(list.as_ptr().cast());
            tuples.clear();
            for i in 0..hits.len() {
                let t = ffi::PyTuple_New(2);
                if t.is_null() {
                    return Err(PyErr::fetch(py));
                }
                ffi::PyObject_GC_UnTrack(t.cast());
                ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, t);
                tuples.push(t);
            }
            for (&t, h) in tuples.iter().zip(hits) {
                if let Some(a) = offsets_ahead.next() {
                    ids.prefetch_offset(a.doc);
                }
                if let Some(a) = ids_ahead.next() {
                    ids.prefetch_id(a.doc);
                }
                let id = ids.get(h.doc);
                let s = ffi::PyUnicode_FromStringAndSize(id.as_ptr().cast(), id.len() as ffi::Py_ssize_t);
                if s.is_null() {
                    return Err(PyErr::fetch(py));
                }
                ffi::PyTuple_SetItem(t, 0, s);
                let f = ffi::PyFloat_FromDouble(f64::from(h.score));
                if f.is_null() {
                    return Err(PyErr::fetch(py));
                }
                ffi::PyTuple_SetItem(t, 1, f);
            }
            ffi::PyObject_GC_Track(list.as_ptr().cast());
            push(list)?;
        }
    }
    Ok(())
}
