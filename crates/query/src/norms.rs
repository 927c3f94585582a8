//! The collection's per-document length norms, in memory the kernel may back with huge pages.
//!
//! Scoring a posting reads its document's norm: one random read per posting into an array of four
//! bytes a document (100 MB on the 25M collection). On 4 KiB pages nearly every such read also missed
//! the TLB, and scoring waited on the page walk (docs/decisions/022-cpu-algorithm-defaults.md). In
//! 2 MiB pages the whole array needs 50 TLB entries.

use std::ops::Deref;

use memmap2::MmapMut;

/// Read-only per-document norms: an anonymous mapping advised for huge pages where the system has
/// them, else an ordinary vector.
pub struct Norms(Store);

enum Store {
    Heap(Vec<f32>),
    Mapped(MmapMut),
}

/// Below this many bytes the array fits a few pages anyway.
const MAPPED_FROM: usize = 4 << 20;

impl Norms {
    /// The norms `values` yields, `len` of them.
    pub fn collect(len: usize, values: impl Iterator<Item = f32>) -> Norms {
        let bytes = len * std::mem::size_of::<f32>();
        if bytes >= MAPPED_FROM {
            if let Ok(mut map) = MmapMut::map_anon(bytes) {
                // Advice before the first touch, so that the pages faulted in are huge ones. It is a
                // hint: where it fails (no transparent huge pages) the mapping works with small pages.
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage);
                let out: &mut [f32] = bytemuck::cast_slice_mut(&mut map[..]);
                let mut n = 0;
                for (o, v) in out.iter_mut().zip(values) {
                    *o = v;
                    n += 1;
                }
                assert_eq!(n, len, "Norms::collect: fewer values than len");
                return Norms(Store::Mapped(map));
            }
        }
        let v: Vec<f32> = values.collect();
        assert_eq!(v.len(), len, "Norms::collect: not len values");
        Norms(Store::Heap(v))
    }
}

impl Deref for Norms {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        match &self.0 {
            Store::Heap(v) => v,
            Store::Mapped(m) => bytemuck::cast_slice(&m[..]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Norms, MAPPED_FROM};

    #[test]
    fn norms_hold_their_values_whether_mapped_or_not() {
        for len in [0, 1, 1000, MAPPED_FROM / 4, MAPPED_FROM / 4 + 3] {
            let n = Norms::collect(len, (0..len).map(|i| i as f32 * 0.5));
            assert_eq!(n.len(), len);
            assert!(
                n.iter().enumerate().all(|(i, &v)| v == i as f32 * 0.5),
                "len {len}"
            );
        }
    }
}
