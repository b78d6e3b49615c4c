//! The fast paths of the rows agree with their definitions on every kind of value: subnormal,
//! zero of either sign, huge, infinite, NaN. Kernels that compute in f32 for rows whose `f` is
//! stated in f64 give the bits of `f` rounded to f32, and the vectorised domain test finds what
//! `Domain::contains` finds.

use super::row::all_within;
use super::{binary_row, unary_row, Domain, TensorKernel};

/// Special values, then f32s of random bit patterns (a fixed xorshift sequence).
fn sample() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        f32::MIN_POSITIVE / 3.0,
        -f32::MIN_POSITIVE / 7.0,
        f32::from_bits(1),
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        2.0f32.sqrt(),
        1.0e-20,
        3.0e19,
    ];
    let mut s: u32 = 0x9E37_79B9;
    for _ in 0..20_000 {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v.push(f32::from_bits(s));
    }
    v
}

fn same_bits(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

fn kernel(row: Option<TensorKernel>) -> TensorKernel {
    row.expect("the row has a kernel")
}

#[test]
fn unary_kernels_give_the_rounded_f64_result() {
    let x = sample();
    for name in ["sqrt", "square", "abs"] {
        let row = unary_row(name).unwrap();
        let mut out = vec![0.0f32; x.len()];
        (kernel(row.kernel).block.f32)(&[&x], &mut out);
        for (&v, &got) in x.iter().zip(&out) {
            let want = (row.f)(f64::from(v), &[]) as f32;
            assert!(
                same_bits(got, want),
                "{name}({v:e}) = {got:e}, f gives {want:e}"
            );
        }
    }
}

#[test]
fn div_kernel_gives_the_rounded_f64_quotient() {
    let row = binary_row("div").unwrap();
    let x = sample();
    let y: Vec<f32> = x.iter().rev().copied().collect();
    let mut out = vec![0.0f32; x.len()];
    (kernel(row.kernel).block.f32)(&[&x, &y], &mut out);
    for ((&a, &b), &got) in x.iter().zip(&y).zip(&out) {
        let want = (row.f)(f64::from(a), f64::from(b)) as f32;
        assert!(
            same_bits(got, want),
            "{a:e} / {b:e} = {got:e}, f gives {want:e}"
        );
    }
}

#[test]
fn domain_test_agrees_with_contains() {
    let x = sample();
    let domains = [
        Domain::All,
        Domain::Positive,
        Domain::NonNegative,
        Domain::Above(-1.0),
        Domain::Above(0.1),
        Domain::NonZero,
    ];
    for d in domains {
        // Every window of a few lengths, so that failures land in every chunk position.
        for len in [1, 3, 64, 65, 200] {
            for w in x.windows(len).step_by(97) {
                let want = w.iter().all(|&v| d.contains(f64::from(v)));
                assert_eq!(all_within(d, w), want, "{d:?} on {w:?}");
                let w64: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
                assert_eq!(all_within(d, &w64), want, "{d:?} on {w64:?}");
            }
        }
    }
}
