//! Seeded initialisers for parameters.
//!
//! Draws use only `Rng::next_u64`, turned into uniforms and normals by the formulas below, so a
//! seed gives the same values on every platform and rand version that keeps its generator's
//! stream (ChaCha8 does: it is specified).

use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::tensor::{Tensor, TensorType};

/// How a parameter's initial values are drawn.
///
/// Fans follow the weight layout of `linear`, (out, in, k..): fan_in = in · k.., fan_out =
/// out · k..; a vector of n has fan_in = fan_out = n, a scalar 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// All zeros (the usual bias).
    Zeros,
    /// Every element `c`.
    Constant(f64),
    /// U(low, high).
    Uniform {
        /// The smallest value (included).
        low: f64,
        /// The bound (excluded).
        high: f64,
    },
    /// N(0, std²).
    Normal {
        /// The standard deviation.
        std: f64,
    },
    /// Glorot (Xavier) uniform: U(-a, a) with a = √(6 / (fan_in + fan_out)).
    Glorot,
    /// He (Kaiming) normal: N(0, 2 / fan_in), for layers followed by ReLU.
    He,
}

/// A ChaCha8 generator from a seed: the generator every example and test uses.
pub fn seeded(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// (fan_in, fan_out) of a parameter shape (see [`Init`]).
pub fn fans(dims: &[usize]) -> (usize, usize) {
    match dims {
        [] => (1, 1),
        [n] => (*n, *n),
        [out, inp, rest @ ..] => {
            let field: usize = rest.iter().product();
            (inp * field, out * field)
        }
    }
}

/// u ~ U[0, 1): the top 53 bits of one draw, scaled by 2^-53.
fn unit<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// n draws from N(0, 1) by Box-Muller: with u1 ∈ (0, 1], u2 ∈ [0, 1),
/// r = √(-2 ln u1), z = (r cos 2πu2, r sin 2πu2).
fn standard_normals<R: Rng + ?Sized>(rng: &mut R, n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n + 1);
    while out.len() < n {
        let u1 = 1.0 - unit(rng);
        let u2 = unit(rng);
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = std::f64::consts::TAU * u2;
        out.push(r * theta.cos());
        out.push(r * theta.sin());
    }
    out.truncate(n);
    out
}

impl Init {
    /// A tensor of type `ty` drawn from this initialiser (values drawn in f64, then rounded
    /// to `ty`'s dtype).
    pub fn sample<R: Rng + ?Sized>(&self, ty: &TensorType, rng: &mut R) -> Tensor {
        let n = ty.numel();
        let (fan_in, fan_out) = fans(ty.dims());
        let uniform = |rng: &mut R, low: f64, high: f64| -> Vec<f64> {
            (0..n).map(|_| low + (high - low) * unit(rng)).collect()
        };
        let normal = |rng: &mut R, std: f64| -> Vec<f64> {
            standard_normals(rng, n)
                .into_iter()
                .map(|z| std * z)
                .collect()
        };
        let data = match *self {
            Init::Zeros => vec![0.0; n],
            Init::Constant(c) => vec![c; n],
            Init::Uniform { low, high } => uniform(rng, low, high),
            Init::Normal { std } => normal(rng, std),
            Init::Glorot => {
                let a = (6.0 / (fan_in + fan_out) as f64).sqrt();
                uniform(rng, -a, a)
            }
            Init::He => normal(rng, (2.0 / fan_in as f64).sqrt()),
        };
        Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).expect("numel elements of a valid type")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    fn stats(t: &Tensor) -> (f64, f64, f64) {
        let v = t.to_f64_vec();
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        (mean, var, max)
    }

    #[test]
    fn fans_follow_the_out_in_layout() {
        assert_eq!(fans(&[]), (1, 1));
        assert_eq!(fans(&[5]), (5, 5));
        assert_eq!(fans(&[4, 2]), (2, 4));
        assert_eq!(fans(&[8, 3, 3, 3]), (27, 72));
    }

    #[test]
    fn glorot_stays_inside_its_bound_with_the_uniform_variance() {
        let ty = TensorType::new(DType::F64, [100, 200]);
        let t = Init::Glorot.sample(&ty, &mut seeded(1));
        let a = (6.0f64 / 300.0).sqrt();
        let (mean, var, max) = stats(&t);
        assert!(max <= a, "max {max} > {a}");
        assert!(mean.abs() < 0.01, "mean {mean}");
        // Var U(-a, a) = a² / 3.
        assert!((var / (a * a / 3.0) - 1.0).abs() < 0.05, "var {var}");
    }

    #[test]
    fn he_has_variance_two_over_fan_in() {
        let ty = TensorType::new(DType::F64, [200, 50]);
        let t = Init::He.sample(&ty, &mut seeded(2));
        let (mean, var, _) = stats(&t);
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var / (2.0 / 50.0) - 1.0).abs() < 0.05, "var {var}");
    }

    #[test]
    fn normal_and_constant_and_zeros_give_what_they_say() {
        let ty = TensorType::new(DType::F32, [7]);
        assert_eq!(
            Init::Zeros.sample(&ty, &mut seeded(0)).to_f64_vec(),
            vec![0.0; 7]
        );
        assert_eq!(
            Init::Constant(0.25)
                .sample(&ty, &mut seeded(0))
                .to_f64_vec(),
            vec![0.25; 7]
        );
        let big = TensorType::new(DType::F64, [20000]);
        let (_, var, _) = stats(&Init::Normal { std: 0.5 }.sample(&big, &mut seeded(3)));
        assert!((var / 0.25 - 1.0).abs() < 0.05, "var {var}");
        assert_eq!(Init::Zeros.sample(&ty, &mut seeded(0)).dtype(), DType::F32);
    }

    #[test]
    fn one_seed_gives_one_draw_and_another_seed_another() {
        let ty = TensorType::new(DType::F64, [3, 2]);
        let a = Init::Glorot.sample(&ty, &mut seeded(7));
        assert_eq!(a, Init::Glorot.sample(&ty, &mut seeded(7)));
        assert_ne!(a, Init::Glorot.sample(&ty, &mut seeded(8)));
    }
}
