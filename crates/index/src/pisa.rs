//! Export to PISA's uncompressed "binary collection", so that PISA can index exactly our postings.
//!
//! PISA builds its compressed index and block-max data from a directory of plain files (what its own
//! `invert` and `ciff2pisa` write, and what pyterrier-pisa's `prepare_index` reads):
//!
//! - `inv.docs`: the sequence `[1, N]`, then for every term in lexicographic order `[df, docID …]`;
//! - `inv.freqs`: for every term `[df, tf …]`;
//! - `inv.sizes`: `[N, length of document 0 …]`;
//! - `fwd.terms` / `fwd.documents`: one term / external document id per line, in the same orders.
//!
//! Every number is a little-endian `u32`. Terms go out in byte order, the order PISA's lexicon searches
//! by bisection (and the order of our own term ordinals). A subset of the terms may be exported: the
//! lists of the terms a query log uses are all that its queries read, and the document count and
//! lengths (hence BM25) stay those of the whole collection. The directory is written under a temporary
//! name and renamed when complete.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rayon::prelude::*;

use crate::error::{IndexError, IoContext, Result};
use crate::reader::Index;
use crate::replace::TmpDir;

/// What [`export`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PisaExport {
    /// Posting lists written.
    pub terms: u64,
    /// Postings written.
    pub postings: u64,
    /// Documents (all of the index's).
    pub docs: u64,
}

/// Lists decoded at once: enough to keep every core busy, few enough to bound memory.
const BATCH_POSTINGS: u64 = 1 << 26;

/// Writes `terms` (ordinals; all terms when `None`) of `index` as a PISA binary collection in `dir`,
/// which must not exist.
pub fn export(index: &Index, dir: &Path, terms: Option<&[u32]>) -> Result<PisaExport> {
    if dir.exists() {
        return Err(IndexError::Invalid(format!(
            "{} already exists: choose another directory or remove it",
            dir.display()
        )));
    }
    let mut ids: Vec<u32> = match terms {
        Some(t) => t.to_vec(),
        None => (0..index.term_records().len() as u32).collect(),
    };
    ids.sort_unstable();
    ids.dedup();
    let mut tmp = TmpDir::beside(dir)?;
    let report = write_files(index, &tmp.path, &ids)?;
    std::fs::rename(&tmp.path, dir).at(dir)?;
    tmp.keep = true;
    Ok(report)
}

fn write_files(index: &Index, dir: &Path, ids: &[u32]) -> Result<PisaExport> {
    let create = |name: &str| -> Result<(BufWriter<File>, std::path::PathBuf)> {
        let path = dir.join(name);
        let file = File::create(&path).at(&path)?;
        Ok((BufWriter::with_capacity(1 << 22, file), path))
    };
    let num_docs = u32::try_from(index.meta().num_docs)
        .map_err(|_| IndexError::Invalid("over 2^32 documents: PISA's sizes are 32-bit".into()))?;
    let (mut docs, docs_path) = create("inv.docs")?;
    let (mut freqs, freqs_path) = create("inv.freqs")?;
    let (mut terms_out, terms_path) = create("fwd.terms")?;
    put(&mut docs, &[1, num_docs]).at(&docs_path)?;

    // Term ordinals are byte order, so `ids` sorted is PISA's lexicon order.
    let names = term_names(index, ids)?;
    let records = index.term_records();
    let mut report = PisaExport {
        docs: num_docs as u64,
        ..Default::default()
    };
    let mut start = 0;
    while start < ids.len() {
        let mut end = start;
        let mut postings = 0u64;
        while end < ids.len() && (end == start || postings < BATCH_POSTINGS) {
            postings += records[ids[end] as usize].df as u64;
            end += 1;
        }
        let lists: Vec<(Vec<u32>, Vec<u32>)> = ids[start..end]
            .par_iter()
            .map(|&id| index.postings(id).decode_all())
            .collect::<Result<_>>()?;
        for ((d, f), name) in lists.iter().zip(&names[start..end]) {
            put(&mut docs, &[d.len() as u32]).at(&docs_path)?;
            put(&mut docs, d).at(&docs_path)?;
            put(&mut freqs, &[f.len() as u32]).at(&freqs_path)?;
            put(&mut freqs, f).at(&freqs_path)?;
            writeln!(terms_out, "{name}").at(&terms_path)?;
        }
        report.terms += (end - start) as u64;
        report.postings += postings;
        start = end;
    }
    for (w, path) in [
        (&mut docs, &docs_path),
        (&mut freqs, &freqs_path),
        (&mut terms_out, &terms_path),
    ] {
        w.flush().at(path)?;
    }

    let (mut sizes, sizes_path) = create("inv.sizes")?;
    put(&mut sizes, &[num_docs]).at(&sizes_path)?;
    put(&mut sizes, index.doc_lens()).at(&sizes_path)?;
    sizes.flush().at(&sizes_path)?;

    let (mut documents, documents_path) = create("fwd.documents")?;
    for d in 0..num_docs {
        let id = index.doc_id(d);
        if id.contains(['\n', '\r']) {
            return Err(IndexError::Invalid(format!(
                "document {d}'s id {id:?} holds a line break, which PISA's document list cannot"
            )));
        }
        writeln!(documents, "{id}").at(&documents_path)?;
    }
    documents.flush().at(&documents_path)?;
    Ok(report)
}

/// The names of terms `ids` (sorted), checked to fit PISA's one-term-per-line lexicon.
fn term_names(index: &Index, ids: &[u32]) -> Result<Vec<String>> {
    let mut names = Vec::with_capacity(ids.len());
    let mut want = ids.iter().peekable();
    for (term, id) in index.terms() {
        if want.peek().is_none() {
            break;
        }
        if want.peek() != Some(&&id) {
            continue;
        }
        want.next();
        let name = String::from_utf8(term).map_err(|e| {
            IndexError::Invalid(format!(
                "term {id} is not UTF-8 ({:?}); PISA's lexicon is text",
                e.as_bytes()
            ))
        })?;
        if name.contains(['\n', '\r']) {
            return Err(IndexError::Invalid(format!(
                "term {id} ({name:?}) holds a line break, which PISA's lexicon cannot"
            )));
        }
        names.push(name);
    }
    if let Some(id) = want.next() {
        return Err(IndexError::Invalid(format!(
            "term ordinal {id} is not in the index ({} terms)",
            index.term_records().len()
        )));
    }
    Ok(names)
}

fn put(w: &mut impl Write, values: &[u32]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        w.write_all(bytemuck::cast_slice(values))
    } else {
        values.iter().try_for_each(|v| w.write_all(&v.to_le_bytes()))
    }
}
