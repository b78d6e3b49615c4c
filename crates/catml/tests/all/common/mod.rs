//! Helpers shared by the AD test files: a seeded RNG, random tensors, and evaluation of the JVP
//! and VJP programs in the layout `catml::ad` documents.
//
// Each test file compiles this module on its own and uses a different subset of it.
#![allow(dead_code)]

use catml::ad;
use catml::interp::eval;
use catml::ir::Program;
use catml::tensor::{DType, Tensor, TensorType};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub type Rng = ChaCha8Rng;

/// The seed of the tied residual block's reference figures (docs/examples.md, seeds).
pub const SEED: u64 = 20261012;

pub fn rng(stream: u64) -> Rng {
    ChaCha8Rng::seed_from_u64(SEED ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

pub fn f64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

/// Uniform values in [lo, hi) as a tensor of type `ty`.
pub fn uniform(rng: &mut Rng, ty: &TensorType, lo: f64, hi: f64) -> Tensor {
    let data: Vec<f64> = (0..ty.numel()).map(|_| rng.random_range(lo..hi)).collect();
    Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).unwrap()
}

/// Uniform values in [-1, 1).
pub fn random(rng: &mut Rng, ty: &TensorType) -> Tensor {
    uniform(rng, ty, -1.0, 1.0)
}

pub fn ones(ty: &TensorType) -> Tensor {
    Tensor::full(ty, 1.0)
}

/// `a + s * d` elementwise, in the dtype of `a`.
pub fn axpy(a: &Tensor, s: f64, d: &Tensor) -> Tensor {
    let data = a
        .to_f64_vec()
        .iter()
        .zip(d.to_f64_vec())
        .map(|(x, y)| x + s * y)
        .collect();
    Tensor::from_f64s(a.dtype(), a.shape().clone(), data).unwrap()
}

/// Sum of <a_i, b_i> over pairs.
pub fn pairing(a: &[Tensor], b: &[Tensor]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x.dot(y)).sum()
}

/// Σ |a_i b_i| elementwise: the scale against which rounding in a pairing is judged.
pub fn pairing_scale(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            x.to_f64_vec()
                .iter()
                .zip(y.to_f64_vec())
                .map(|(p, q)| (p * q).abs())
                .sum::<f64>()
        })
        .sum()
}

/// Outputs of `p` and the gradient of every float input, for one seed per output occurrence.
pub fn value_and_grad(
    p: &Program,
    inputs: &[Tensor],
    seeds: &[Tensor],
) -> (Vec<Tensor>, Vec<Tensor>) {
    let v = ad::vjp(p).unwrap();
    let mut args = inputs.to_vec();
    args.extend_from_slice(seeds);
    let out = eval(&v.program, &args).unwrap();
    let grads = (0..p.n_inputs())
        .map(|i| v.layout.gradient(&out, i).expect("float input").clone())
        .collect();
    (v.layout.primal_outputs(&out).to_vec(), grads)
}

/// Outputs of `p` and their tangents along `tangents` (one per input, all float).
pub fn value_and_tangent(
    p: &Program,
    inputs: &[Tensor],
    tangents: &[Tensor],
) -> (Vec<Tensor>, Vec<Tensor>) {
    let j = ad::jvp(p).unwrap();
    let mut args = inputs.to_vec();
    args.extend_from_slice(tangents);
    let out = eval(&j.program, &args).unwrap();
    let (primal, tangent) = out.split_at(j.layout.n_primal_outputs());
    (primal.to_vec(), tangent.to_vec())
}

/// Largest elementwise |a - b| over a list of tensor pairs.
pub fn max_abs_diff(a: &[Tensor], b: &[Tensor]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| x.max_abs_diff(y))
        .fold(0.0, f64::max)
}

/// A row-major f64 matrix for closed forms computed outside CatML.
#[derive(Debug, Clone, PartialEq)]
pub struct Mat {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f64>,
}

impl Mat {
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Mat {
        assert_eq!(data.len(), rows * cols);
        Mat { rows, cols, data }
    }

    pub fn of(t: &Tensor) -> Mat {
        let d = t.dims();
        match d.len() {
            1 => Mat::new(1, d[0], t.to_f64_vec()),
            2 => Mat::new(d[0], d[1], t.to_f64_vec()),
            _ => panic!("not a matrix: {d:?}"),
        }
    }

    pub fn at(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.cols + j]
    }

    pub fn matmul(&self, o: &Mat) -> Mat {
        assert_eq!(self.cols, o.rows);
        let mut out = vec![0.0; self.rows * o.cols];
        for i in 0..self.rows {
            for j in 0..o.cols {
                out[i * o.cols + j] = (0..self.cols).map(|k| self.at(i, k) * o.at(k, j)).sum();
            }
        }
        Mat::new(self.rows, o.cols, out)
    }

    pub fn t(&self) -> Mat {
        let mut out = vec![0.0; self.data.len()];
        for i in 0..self.rows {
            for j in 0..self.cols {
                out[j * self.rows + i] = self.at(i, j);
            }
        }
        Mat::new(self.cols, self.rows, out)
    }

    pub fn zip(&self, o: &Mat, f: impl Fn(f64, f64) -> f64) -> Mat {
        assert_eq!((self.rows, self.cols), (o.rows, o.cols));
        let data = self
            .data
            .iter()
            .zip(&o.data)
            .map(|(&a, &b)| f(a, b))
            .collect();
        Mat::new(self.rows, self.cols, data)
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> Mat {
        Mat::new(
            self.rows,
            self.cols,
            self.data.iter().map(|&a| f(a)).collect(),
        )
    }

    /// Σ_r M_{r,:}
    pub fn col_sums(&self) -> Vec<f64> {
        (0..self.cols)
            .map(|j| (0..self.rows).map(|i| self.at(i, j)).sum())
            .collect()
    }

    /// The row vector broadcast to `rows` rows.
    pub fn rows_of(v: &[f64], rows: usize) -> Mat {
        Mat::new(rows, v.len(), v.repeat(rows))
    }
}

/// Largest |a_i - b_i|.
pub fn max_abs(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}
