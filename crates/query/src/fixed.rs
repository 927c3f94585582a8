//! Exact, order-free sums of term contributions in fixed point.
//!
//! A document's BM25 score is a sum of its terms' contributions. Summed in floating point, the result
//! depends on the order of the additions, so every backend had to add them in the same order (the plan's
//! slot order), and the GPU's OR kernel had to add its lists one at a time, a barrier between them. In
//! fixed point the order does not matter: each contribution `c` (an `f32`, computed the same way on every
//! backend) becomes the integer `⌊c · 2^s⌋`, and integers add exactly in any order, on any thread, with
//! atomics or without. The score is then that integer sum rounded once to `f32`, times `2^−s`.
//!
//! The shift `s` is chosen per query from the terms' weights, so that the sum of the largest possible
//! contributions (`weight · (k1 + 1)`: BM25's tf part never exceeds `k1 + 1`) stays below 2^31, half of
//! what a `u32` holds: no sum overflows, with room for rounding. The resolution `2^−s` is then between
//! 2^−31 and 2^−30 of that largest possible score `B`: finer than `f32`'s own rounding (2^−24 of the
//! score) of any score above `B`/64, and about 10^−9 of `B` below that.
//!
//! Rounding down (not to nearest) keeps every fixed-point sum at most the exact sum of the contributions
//! (and the one `f32` rounding at most 2^−24 relative above it), so upper bounds computed from the
//! contributions' own bounds still bound the scores within [`crate::plan::bound_slack`].

/// A query's fixed-point scale: contributions to integers ([`Fixed::of`]), integer sums back to scores
/// ([`Fixed::value`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fixed {
    /// 2^s: a contribution times this, rounded down, is its fixed-point value.
    scale: f32,
    /// 2^−s: a fixed-point sum, rounded to `f32`, times this is the score.
    unit: f32,
}

/// The largest sum of contributions' bounds a query's fixed point is sized for (half of `u32`'s range).
const SUM_CAP: f64 = (1u64 << 31) as f64;

/// The range of the shift: 2^±60 stays far inside `f32`'s exponents, so scaling by it is exact.
const MAX_SHIFT: i32 = 60;

impl Fixed {
    /// The fixed point of a query whose terms multiply BM25's tf part by `weights`, under `k1`.
    pub fn for_weights(weights: &[f32], k1: f32) -> Fixed {
        // Summed smallest first, so that the terms' order cannot change the shift.
        let mut bounds: Vec<f64> = weights.iter().map(|&w| w as f64 * (k1 as f64 + 1.0)).collect();
        bounds.sort_by(f64::total_cmp);
        let bound: f64 = bounds.iter().sum();
        let shift = if bound > 0.0 && bound.is_finite() {
            ((SUM_CAP / bound).log2().floor() as i32).clamp(-MAX_SHIFT, MAX_SHIFT)
        } else {
            MAX_SHIFT
        };
        // Rounding of log2 may leave the bound a hair over the cap; one step down settles it.
        let shift = if bound * 2f64.powi(shift) > SUM_CAP {
            shift - 1
        } else {
            shift
        };
        Fixed {
            scale: 2f32.powi(shift),
            unit: 2f32.powi(-shift),
        }
    }

    /// The fixed-point value of contribution `c` (non-negative): `⌊c · 2^s⌋`. Multiplying by a power of
    /// two is exact, and the conversion truncates, on the CPU as on the GPU (`__float2uint_rz`).
    #[inline]
    pub fn of(&self, c: f32) -> u32 {
        (c * self.scale) as u32
    }

    /// The score of fixed-point sum `q`: `q` rounded to the nearest `f32` (ties to even, as the GPU's
    /// `__uint2float_rn`), times 2^−s (exact).
    #[inline]
    pub fn value(&self, q: u32) -> f32 {
        q as f32 * self.unit
    }

    /// 2^s, for the GPU's query descriptors.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// 2^−s, for the GPU's query descriptors.
    pub fn unit(&self) -> f32 {
        self.unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 33
    }

    #[test]
    fn the_largest_possible_sum_fits_with_room_to_spare() {
        for weights in [
            vec![0.3f32],
            vec![17.0; 12],
            vec![1e-6, 2e-7],
            vec![25.0; 256],
            vec![5e4],
        ] {
            let k1 = 0.9f32;
            let f = Fixed::for_weights(&weights, k1);
            let top: u64 = weights.iter().map(|&w| f.of(w * (k1 + 1.0)) as u64).sum();
            assert!(top <= 1 << 31, "{weights:?}: {top}");
            // And not needlessly coarse: twice the scale would pass the cap.
            let doubled: f64 = weights
                .iter()
                .map(|&w| (w * (k1 + 1.0)) as f64 * f.scale as f64 * 2.0)
                .sum();
            assert!(doubled > SUM_CAP * 0.99, "{weights:?}: {doubled}");
        }
    }

    #[test]
    fn weights_of_zero_or_none_give_a_usable_scale() {
        for weights in [vec![], vec![0.0f32, 0.0]] {
            let f = Fixed::for_weights(&weights, 0.9);
            assert_eq!(f.of(0.0), 0);
            assert_eq!(f.value(0), 0.0);
            assert_eq!(f.scale * f.unit, 1.0);
        }
    }

    #[test]
    fn sums_are_the_same_in_every_order_and_never_above_the_exact_sum() {
        let mut state = 7u64;
        for _ in 0..2_000 {
            let n = 1 + (lcg(&mut state) % 8) as usize;
            let weights: Vec<f32> = (0..n)
                .map(|_| 0.01 + (lcg(&mut state) % 2_000) as f32 / 100.0)
                .collect();
            let f = Fixed::for_weights(&weights, 0.9);
            let cs: Vec<f32> = weights
                .iter()
                .map(|&w| w * 1.9 * ((lcg(&mut state) % 1_000) as f32 / 1_000.0))
                .collect();
            let forward = cs.iter().fold(0u32, |s, &c| s + f.of(c));
            let backward = cs.iter().rev().fold(0u32, |s, &c| s + f.of(c));
            assert_eq!(forward, backward);
            let exact: f64 = cs.iter().map(|&c| c as f64).sum();
            let got = f.value(forward) as f64;
            assert!(got <= exact * (1.0 + f32::EPSILON as f64), "{got} above {exact}");
            // Within f32's rounding plus one unit per term of the exact sum.
            assert!(
                exact - got <= exact * f32::EPSILON as f64 + n as f64 * f.unit as f64,
                "{got} vs {exact}"
            );
        }
    }

    #[test]
    fn value_is_monotone_in_the_sum() {
        let f = Fixed::for_weights(&[3.0, 4.0], 0.9);
        let mut state = 3u64;
        for _ in 0..10_000 {
            let a = (lcg(&mut state) as u32) >> 1;
            let b = a.saturating_add((lcg(&mut state) % 1_000) as u32);
            assert!(f.value(a) <= f.value(b));
        }
    }
}
