//! The documents' BM25 length norms on the device: by length through a table where every document's
//! length fits in 16 bits, else one f32 per document. A norm is a function of the document's length
//! alone, so the table gives each document's norm bit for bit (checked as it is built), in half the
//! bytes a document: more of the randomly read norms stay in the caches.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use crate::residency::ptr;
use crate::GpuError;

/// The norms of one searcher's ranking, on the device.
pub(crate) struct DeviceNorms {
    /// Per document: its norm (one placeholder entry where `by_len` holds them).
    per_doc: CudaSlice<f32>,
    /// Per document its length (u16), and the norm of each length.
    by_len: Option<(CudaSlice<u16>, CudaSlice<f32>)>,
}

impl DeviceNorms {
    /// Uploads the norms of documents of lengths `doc_lens` (`norms[d]` is document d's), by length
    /// where [`norm_table`] gives a table, unless `WARPSEARCH_GPU_NORMS=doc` asks for one per document.
    pub fn upload(
        stream: &Arc<CudaStream>,
        doc_lens: &[u32],
        norms: &[f32],
    ) -> Result<DeviceNorms, GpuError> {
        let per_document = std::env::var("WARPSEARCH_GPU_NORMS").is_ok_and(|v| v == "doc");
        let table = if per_document {
            None
        } else {
            norm_table(doc_lens, norms)
        };
        Ok(match table {
            Some(table) => {
                let lens: Vec<u16> = doc_lens.iter().map(|&l| l as u16).collect();
                DeviceNorms {
                    per_doc: stream.memcpy_stod(&[0.0f32])?,
                    by_len: Some((
                        stream.memcpy_stod(&*nonempty(&lens))?,
                        stream.memcpy_stod(&table)?,
                    )),
                }
            }
            None => DeviceNorms {
                per_doc: stream.memcpy_stod(&*nonempty(norms))?,
                by_len: None,
            },
        })
    }

    /// The kernels' addresses: per-document norms, and lengths and norms by length (0 and 0 without).
    pub fn args(&self, stream: &CudaStream) -> (u64, u64, u64) {
        match &self.by_len {
            Some((lens, table)) => (0, ptr(lens, stream), ptr(table, stream)),
            None => (ptr(&self.per_doc, stream), 0, 0),
        }
    }
}

/// `v`, or one zero where it is empty (a device buffer cannot be empty).
pub(crate) fn nonempty<T: Copy + Default>(v: &[T]) -> std::borrow::Cow<'_, [T]> {
    if v.is_empty() {
        vec![T::default()].into()
    } else {
        v.into()
    }
}

/// The norm of each length from 0 to the longest document's (lengths no document has get 0.0), where
/// that is below 2^16 and every document's norm is its length's (else `None`).
pub(crate) fn norm_table(doc_lens: &[u32], norms: &[f32]) -> Option<Vec<f32>> {
    let longest = *doc_lens.iter().max()?;
    if longest > u16::MAX as u32 || doc_lens.len() != norms.len() {
        return None;
    }
    let mut table = vec![f32::NAN; longest as usize + 1];
    for (&l, &n) in doc_lens.iter().zip(norms) {
        let slot = &mut table[l as usize];
        if slot.is_nan() {
            *slot = n;
        } else if slot.to_bits() != n.to_bits() {
            return None;
        }
    }
    for slot in table.iter_mut().filter(|s| s.is_nan()) {
        *slot = 0.0;
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::norm_table;

    #[test]
    fn the_table_gives_every_documents_norm_by_its_length() {
        let lens = [3, 0, 3, 7, 65535];
        let norms: Vec<f32> = lens.iter().map(|&l| 0.25 + l as f32 / 10.0).collect();
        let table = norm_table(&lens, &norms).unwrap();
        assert_eq!(table.len(), 65536);
        for (&l, &n) in lens.iter().zip(&norms) {
            assert_eq!(table[l as usize].to_bits(), n.to_bits());
        }
        assert_eq!(table[1], 0.0, "a length no document has");
    }

    #[test]
    fn no_table_for_long_documents_or_norms_that_are_not_a_function_of_length() {
        assert!(norm_table(&[1, 65536], &[1.0, 2.0]).is_none());
        assert!(norm_table(&[4, 4], &[1.0, 1.5]).is_none());
        assert!(norm_table(&[], &[]).is_none());
        assert!(norm_table(&[1, 2], &[1.0]).is_none());
    }
}
