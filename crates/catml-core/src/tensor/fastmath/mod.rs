//! Branch-free elementwise functions that the compiler vectorises, with the same results on
//! every path: libm's `tanh` is a scalar call per element, and a tanh layer then costs more than
//! the matrix product feeding it.
//!
//! tanh (Cephes' scheme, ~1-2 ulp in f64):
//! - |x| <= 0.625: tanh x = x + x z P(z) / Q(z) with z = x², a (2, 3) rational fit;
//! - |x| >  0.625: tanh x = sign(x) (1 - 2 / (e^{2|x|} + 1)), no cancellation since the result
//!   is at least 0.55; e^t by t = k ln 2 + r, |r| <= ln 2 / 2, a degree-13 Taylor polynomial for
//!   e^r and 2^k from the exponent bits. |x| is clamped at 20, where tanh is 1 to f64 precision.
//!
//! f32 has its own function in f32 arithmetic (twice the lanes). No fused multiply-add is
//! used, so the AVX-512, AVX2 and baseline paths give bit-identical results.
//!
//! e^x over whole slices (for the softmax family), [`exp_in_place`], is in `exp.rs`.

/// A function whose body is compiled three times, as it is and with AVX-512 or AVX2 enabled,
/// and which runs the widest copy the CPU supports. The bodies use no fused multiply-add (Rust
/// never contracts `a * b + c` on its own), so every copy gives the same results. Whatever the
/// body calls must be `#[inline(always)]` to be compiled wide with it. One generic parameter
/// is allowed, as `fn name<T: Bound>(...)`.
macro_rules! with_wide_simd {
    ($(#[$doc:meta])* $vis:vis fn $name:ident $(<$g:ident: $bound:path>)?
        ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        $vis fn $name$(<$g: $bound>)?($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body$(<$g: $bound>)?($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512$(<$g: $bound>)?($($arg: $ty),*) $(-> $ret)? {
                    body$(::<$g>)?($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                unsafe fn avx2$(<$g: $bound>)?($($arg: $ty),*) $(-> $ret)? {
                    body$(::<$g>)?($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports AVX-512F, checked just above.
                    return unsafe { avx512$(::<$g>)?($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2, checked just above.
                    return unsafe { avx2$(::<$g>)?($($arg),*) };
                }
            }
            body$(::<$g>)?($($arg),*)
        }
    };
}

pub(crate) use with_wide_simd;

mod exp;

pub use exp::exp_in_place;

const P: [f64; 3] = [
    -9.643_991_794_250_523e-1,
    -9.928_772_310_019_186e1,
    -1.614_687_684_417_084_5e3,
];
const Q: [f64; 3] = [
    1.128_116_784_916_329_3e2,
    2.235_488_390_601_004_5e3,
    4.844_063_053_251_255e3,
];

/// 1.5 · 2^52: adding it rounds a small f64 to an integer held in the low mantissa bits.
const SHIFT: f64 = 6_755_399_441_055_744.0;
const LN2_HI: f64 = 6.931_457_519_531_25e-1;
const LN2_LO: f64 = 1.428_606_820_309_417_2e-6;

/// e^t for 0 <= t <= 40 (the only range tanh needs).
#[inline(always)]
fn exp_small(t: f64) -> f64 {
    let y = t * std::f64::consts::LOG2_E + SHIFT;
    let k = y.to_bits().wrapping_sub(SHIFT.to_bits());
    let kf = y - SHIFT;
    let r = (t - kf * LN2_HI) - kf * LN2_LO;
    // Taylor coefficients 1/n! for n = 13 down to 0.
    const C: [f64; 14] = [
        1.0 / 6_227_020_800.0,
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ];
    let mut p = C[0];
    for &c in &C[1..] {
        p = p * r + c;
    }
    p * f64::from_bits((k.wrapping_add(1023)) << 52)
}

/// tanh in f64, branch-free.
#[inline(always)]
pub fn tanh(x: f64) -> f64 {
    let a = x.abs();
    let z = x * x;
    let p = (P[0] * z + P[1]) * z + P[2];
    let q = ((z + Q[0]) * z + Q[1]) * z + Q[2];
    // tanh is odd and the correction is smaller than x, so the sign is x's (also for -0).
    let small = (x + x * z * (p / q)).copysign(x);
    let e = exp_small(2.0 * a.min(20.0));
    let big = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    let r = if a <= 0.625 { small } else { big };
    // NaN stays NaN (the clamp above would have turned it into ±1).
    if x.is_nan() {
        x
    } else {
        r
    }
}

/// tanh in f32 arithmetic (Cephes' tanhf): below 0.625 an odd polynomial, above it
/// (e - 1) / (e + 1) with e = e^{2|x|} from a degree-7 exp, |x| clamped at 9 (tanh is 1 to f32
/// precision past that). Within 2 ulp of the correctly rounded tanh on every f32 (checked
/// exhaustively when this was written).
#[inline(always)]
pub fn tanhf(x: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0; // 1.5 · 2^23
    let a = x.abs();
    let z = x * x;
    let small = (((((-5.704_988_7e-3f32 * z + 2.063_909e-2) * z - 5.373_971_6e-2) * z
        + 1.333_144_2e-1)
        * z
        - 3.333_328e-1)
        * z
        * x
        + x)
        .copysign(x);
    let t = 2.0 * a.min(9.0);
    let y = t * std::f32::consts::LOG2_E + SHIFT;
    let k = y.to_bits().wrapping_sub(SHIFT.to_bits());
    let kf = y - SHIFT;
    let r = (t - kf * 0.693_359_4) - kf * -2.121_944_4e-4;
    let p = ((((1.987_569_1e-4f32 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let e = (p * (r * r) + r + 1.0) * f32::from_bits(k.wrapping_add(127) << 23);
    let big = ((e - 1.0) / (e + 1.0)).copysign(x);
    let res = if a <= 0.625 { small } else { big };
    if x.is_nan() {
        x
    } else {
        res
    }
}

/// `f` of every element, in place.
#[inline(always)]
fn assign_all<T: Copy>(buf: &mut [T], f: impl Fn(T) -> T) {
    for v in buf.iter_mut() {
        *v = f(*v);
    }
}

/// Whether any element has all exponent bits set (infinite or NaN): an OR of integer tests,
/// which vectorises, where counting would widen every lane to a usize.
#[inline(always)]
fn any_non_finite_f32_body(d: &[f32]) -> bool {
    let mut acc = 0u32;
    for x in d {
        acc |= ((x.to_bits() & 0x7f80_0000) == 0x7f80_0000) as u32;
    }
    acc != 0
}

#[inline(always)]
fn any_non_finite_f64_body(d: &[f64]) -> bool {
    let mut acc = 0u64;
    for x in d {
        acc |= ((x.to_bits() & 0x7ff0_0000_0000_0000) == 0x7ff0_0000_0000_0000) as u64;
    }
    acc != 0
}

with_wide_simd! {
    /// Whether any element is infinite or NaN.
    pub fn any_non_finite_f32(d: &[f32]) -> bool { any_non_finite_f32_body(d) }
}

with_wide_simd! {
    /// Whether any element is infinite or NaN.
    pub fn any_non_finite_f64(d: &[f64]) -> bool { any_non_finite_f64_body(d) }
}

with_wide_simd! {
    /// tanh of every element, in place.
    pub fn tanh_f64_in_place(buf: &mut [f64]) { assign_all(buf, tanh) }
}

with_wide_simd! {
    /// tanh of every element, in place, in f32 arithmetic.
    pub fn tanh_f32_in_place(buf: &mut [f32]) { assign_all(buf, tanhf) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tanh_f64_slice(xs: &[f64]) -> Vec<f64> {
        let mut ys = xs.to_vec();
        tanh_f64_in_place(&mut ys);
        ys
    }

    fn tanh_f32_slice(xs: &[f32]) -> Vec<f32> {
        let mut ys = xs.to_vec();
        tanh_f32_in_place(&mut ys);
        ys
    }

    /// Distance in units in the last place between two finite f64 of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        if a == b {
            return 0;
        }
        assert_eq!(a.is_sign_negative(), b.is_sign_negative(), "{a} vs {b}");
        a.to_bits().abs_diff(b.to_bits())
    }

    fn points() -> Vec<f64> {
        let mut xs = vec![
            0.0,
            -0.0,
            1e-300,
            5e-324,
            1e-8,
            0.1,
            0.5,
            0.624,
            0.625,
            0.626,
            0.7,
            1.0,
            2.0,
            5.0,
            10.0,
            19.0,
            20.0,
            21.0,
            40.0,
            1e3,
            1e300,
            f64::MAX,
        ];
        // A dense sweep of [-25, 25] with a deterministic irrational stride.
        let mut x = -25.0;
        while x < 25.0 {
            xs.push(x);
            x += 0.000_731_370_5;
        }
        let neg: Vec<f64> = xs.iter().map(|v| -v).collect();
        xs.extend(neg);
        xs
    }

    #[test]
    fn tanh_f64_is_within_two_ulps_of_libm() {
        let xs = points();
        let fast = tanh_f64_slice(&xs);
        let worst = xs
            .iter()
            .zip(&fast)
            .map(|(&x, &y)| ulps(y, x.tanh()))
            .max()
            .unwrap();
        assert!(worst <= 2, "worst error {worst} ulps");
        // The scalar function, the vectorised path and the in-place path agree bit for bit.
        let mut in_place = xs.clone();
        tanh_f64_in_place(&mut in_place);
        for ((&x, &y), &z) in xs.iter().zip(&fast).zip(&in_place) {
            assert_eq!(tanh(x).to_bits(), y.to_bits(), "at {x}");
            assert_eq!(y.to_bits(), z.to_bits(), "at {x}");
        }
    }

    #[test]
    fn tanh_f32_is_within_two_ulps_of_rounded_libm() {
        let xs: Vec<f32> = points().iter().map(|&x| x as f32).collect();
        let fast = tanh_f32_slice(&xs);
        let mut in_place = xs.clone();
        tanh_f32_in_place(&mut in_place);
        assert_eq!(fast, in_place);
        for (&x, &y) in xs.iter().zip(&fast) {
            // The widest path this CPU has gives the scalar function's bits.
            assert_eq!(tanhf(x).to_bits(), y.to_bits(), "at {x}");
            let want = (x as f64).tanh() as f32;
            let d = y.to_bits().abs_diff(want.to_bits());
            assert!(d <= 2, "at {x}: {y} vs {want}");
        }
    }

    #[test]
    fn tanh_f32_over_a_stride_of_all_bit_patterns() {
        // Every 251st positive finite f32 (about 8.5 million values, all binades); tanh is odd.
        let xs: Vec<f32> = (0..0x7f80_0000u32)
            .step_by(251)
            .map(f32::from_bits)
            .collect();
        let fast = tanh_f32_slice(&xs);
        for (&x, &y) in xs.iter().zip(&fast) {
            let want = (x as f64).tanh() as f32;
            assert!(
                y.to_bits().abs_diff(want.to_bits()) <= 2,
                "at {x}: {y} vs {want}"
            );
        }
    }

    #[test]
    fn tanh_keeps_nan_and_signs() {
        assert!(tanh(f64::NAN).is_nan());
        assert_eq!(tanh(f64::INFINITY), 1.0);
        assert_eq!(tanh(f64::NEG_INFINITY), -1.0);
        assert!(tanh(-0.0).is_sign_negative());
        assert!(tanh_f32_slice(&[f32::NAN])[0].is_nan());
        assert!(tanh_f32_slice(&[-0.0])[0].is_sign_negative());
        assert_eq!(tanh_f32_slice(&[f32::INFINITY, -1e30]), vec![1.0, -1.0]);
    }
}
