//! e^x over whole slices, for the softmax-family kernels, where the exponential dominates.
//!
//! f64 uses the standard library. f32 uses a branch-free polynomial the compiler vectorises
//! (with AVX-512 or AVX2 when the CPU has them, with the same results): e^x = 2^n e^r with n = round(x log2 e) and
//! r = x - n ln 2 in [-ln2/2, ln2/2], e^r by its degree-6 Taylor-like minimax polynomial
//! (Cephes `expf`), relative error below 2^-22. Inputs below ln(2^-126) give 0 and inputs
//! above ln(f32::MAX) give +inf, as `f32::exp` does up to subnormals.

use std::any::TypeId;

use crate::tensor::Float;

/// x <- e^x for every element.
pub fn exp_in_place<T: Float>(xs: &mut [T]) {
    if TypeId::of::<T>() == TypeId::of::<f32>() {
        // SAFETY: T is f32, so the slice is a slice of f32 of the same length.
        let xs = unsafe { std::slice::from_raw_parts_mut(xs.as_mut_ptr().cast::<f32>(), xs.len()) };
        exp_f32_slice(xs);
    } else {
        for x in xs {
            *x = x.exp();
        }
    }
}

with_wide_simd! {
    /// e^x of every element, in place, in f32 arithmetic.
    pub fn exp_f32_slice(xs: &mut [f32]) { exp_f32_loop(xs) }
}

#[inline(always)]
fn exp_f32_loop(xs: &mut [f32]) {
    for x in xs {
        *x = exp_f32(*x);
    }
}

/// e^x for f32 without branches (selects compile to blends).
#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n * LN2_HI is exact for |n| < 2^9.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    const LO: f32 = -87.336_54; // ln(2^-126)
    const HI: f32 = 88.722_83; // ln(f32::MAX)
    let c = x.clamp(LO, HI);
    let t = c * LOG2E + ROUND;
    let n = t - ROUND;
    let r = c - n * LN2_HI - n * LN2_LO;
    let r2 = r * r;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let e = p * r2 + r + 1.0;
    // The integer n from t's bits (t = 1.5 2^23 + n has ulp 1), not `n as i32`, whose
    // saturating conversion does not vectorise. 2^n is built as two factors, so that n = 128
    // (x near ln f32::MAX) and n = -126 stay normal.
    let n = t.to_bits() as i32 - 0x4B40_0000;
    let half = n >> 1;
    let s1 = f32::from_bits(((half + 127) << 23) as u32);
    let s2 = f32::from_bits(((n - half + 127) << 23) as u32);
    let y = e * s1 * s2;
    if x < LO {
        0.0
    } else if x > HI {
        f32::INFINITY
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_exp_is_within_two_ulp_of_the_standard_one() {
        let mut xs: Vec<f32> = (-8733..8872).map(|i| i as f32 * 0.01).collect();
        xs.extend([-87.0, -80.5, 80.5, 88.0, 88.7, 0.0, -0.0, 1e-8, -1e-8]);
        let mut ys = xs.clone();
        exp_in_place(&mut ys);
        for (x, y) in xs.iter().zip(&ys) {
            let want = x.exp();
            let ulp = (want.to_bits() as i64 - y.to_bits() as i64).abs();
            assert!(ulp <= 2, "exp({x}) = {y}, expected {want} ({ulp} ulp)");
        }
    }

    #[test]
    fn the_widest_path_gives_the_scalar_functions_bits() {
        let xs: Vec<f32> = (-9000..9000).map(|i| i as f32 * 0.0123).collect();
        let mut ys = xs.clone();
        exp_in_place(&mut ys);
        for (&x, &y) in xs.iter().zip(&ys) {
            assert_eq!(exp_f32(x).to_bits(), y.to_bits(), "at {x}");
        }
    }

    #[test]
    fn f32_exp_saturates_like_the_standard_one() {
        let mut ys = [-1000.0f32, -100.0, 100.0, 1000.0];
        exp_in_place(&mut ys);
        assert_eq!(ys, [0.0, 0.0, f32::INFINITY, f32::INFINITY]);
    }
}
