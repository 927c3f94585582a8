//! First-fit allocation of extents (start, length) in a region of fixed capacity, with coalescing of
//! freed neighbours: where the list cache places each list's cached prefix in the device arrays.

use std::collections::BTreeMap;

/// Free space of a region, as disjoint extents keyed by start.
#[derive(Debug, Clone)]
pub struct Extents {
    free: BTreeMap<u64, u64>,
    capacity: u64,
    used: u64,
}

impl Extents {
    /// A region of `capacity` units, all free.
    pub fn new(capacity: u64) -> Extents {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(0, capacity);
        }
        Extents {
            free,
            capacity,
            used: 0,
        }
    }

    /// Units allocated.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The start of `len` free units (the lowest that fits), now allocated; `None` if no free extent is
    /// that long. A zero length always succeeds at 0 and allocates nothing.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        if len == 0 {
            return Some(0);
        }
        let (&start, &have) = self.free.iter().find(|(_, &l)| l >= len)?;
        self.free.remove(&start);
        if have > len {
            self.free.insert(start + len, have - len);
        }
        self.used += len;
        Some(start)
    }

    /// Returns `len` units at `start` (allocated earlier) to the free space, merging neighbours.
    pub fn release(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        debug_assert!(start + len <= self.capacity, "an extent inside the region");
        self.used -= len;
        let (mut start, mut len) = (start, len);
        if let Some((&s, &l)) = self.free.range(..start).next_back() {
            debug_assert!(s + l <= start, "no double release");
            if s + l == start {
                self.free.remove(&s);
                start = s;
                len += l;
            }
        }
        if let Some(l) = self.free.remove(&(start + len)) {
            len += l;
        }
        self.free.insert(start, len);
    }

    /// The longest free extent.
    pub fn largest_free(&self) -> u64 {
        self.free.values().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_first_fit_and_coalesces_on_release() {
        let mut e = Extents::new(100);
        let a = e.alloc(30).unwrap();
        let b = e.alloc(30).unwrap();
        let c = e.alloc(30).unwrap();
        assert_eq!((a, b, c), (0, 30, 60));
        assert_eq!(e.alloc(11), None, "10 units are left");
        e.release(b, 30);
        assert_eq!(e.largest_free(), 30);
        e.release(a, 30);
        assert_eq!(e.largest_free(), 60, "the freed neighbours merge");
        assert_eq!(e.alloc(50), Some(0));
        e.release(c, 30);
        assert_eq!(e.used(), 50);
        assert_eq!(e.largest_free(), 50, "60..100 and 50..60 merge");
        assert_eq!(e.alloc(0), Some(0));
        assert_eq!(e.used(), 50);
    }

    #[test]
    fn random_allocations_never_overlap() {
        let mut e = Extents::new(1000);
        let mut held: Vec<(u64, u64)> = Vec::new();
        let mut x = 12345u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if x >> 63 == 0 || held.is_empty() {
                let len = 1 + (x >> 40) % 50;
                if let Some(s) = e.alloc(len) {
                    for &(t, l) in &held {
                        assert!(s + len <= t || t + l <= s, "overlap");
                    }
                    held.push((s, len));
                }
            } else {
                let i = ((x >> 20) as usize) % held.len();
                let (s, l) = held.swap_remove(i);
                e.release(s, l);
            }
            assert_eq!(e.used(), held.iter().map(|h| h.1).sum::<u64>());
        }
    }
}
