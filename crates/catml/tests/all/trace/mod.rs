//! The tracing API, layers, and function transforms, from the outside.

mod eager_and_traced;
mod errors;
mod params_file;
mod tied_residual;
mod transforms;

use catml::nn::{linear, ChaCha8Rng};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::Value;

pub fn f64s(dims: &[usize], data: &[f64]) -> Tensor {
    Tensor::f64(dims.to_vec(), data.to_vec()).unwrap()
}

pub fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims.to_vec())
}

/// The tiny MLP (docs/examples.md): linear(4) tag lin1, relu, linear(1) tag lin2, sigmoid.
pub fn mlp(x: &Value, rng: &mut ChaCha8Rng) -> Value {
    let h = linear(x, 4, rng, "lin1");
    let h = h.relu();
    let y = linear(&h, 1, rng, "lin2");
    y.sigmoid()
}

/// Central differences (f(θ + h e_i) - f(θ - h e_i)) / 2h of a scalar function of named
/// parameters, for every element of every parameter.
pub fn finite_difference_grads(params: &Params, f: impl Fn(&Params) -> f64) -> Params {
    let h = 1e-6;
    let mut out = Params::new();
    for (name, t) in params.iter() {
        let base = t.to_f64_vec();
        let mut g = vec![0.0; base.len()];
        for (i, gi) in g.iter_mut().enumerate() {
            let at = |delta: f64| {
                let mut data = base.clone();
                data[i] += delta;
                let mut p = params.clone();
                p.insert(name, Tensor::f64(t.dims().to_vec(), data).unwrap());
                f(&p)
            };
            *gi = (at(h) - at(-h)) / (2.0 * h);
        }
        out.insert(name, Tensor::f64(t.dims().to_vec(), g).unwrap());
    }
    out
}

/// Largest |a - b| over the entries both stores hold, requiring the same names.
pub fn max_param_diff(a: &Params, b: &Params) -> f64 {
    assert_eq!(a.names().collect::<Vec<_>>(), b.names().collect::<Vec<_>>());
    a.iter()
        .map(|(name, t)| t.max_abs_diff(b.get(name).unwrap()))
        .fold(0.0, f64::max)
}
