//! Numeric helpers: compensated inner products, norms, perturbed inputs, and a program together
//! with its JVP and VJP programs, evaluated at a point.

use crate::ad::{self, AdError, Jvp, Vjp};
use crate::interp::{self, EvalError};
use crate::ir::Program;
use crate::tensor::{DType, Tensor};

/// a + b = s + e exactly (Knuth's TwoSum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Σ a_i b_i in twice the working precision (Ogita, Rump and Oishi's Dot2: TwoProduct by fma,
/// TwoSum for the accumulation), then rounded once.
pub fn dot2(a: &[f64], b: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let p = x * y;
        let pe = x.mul_add(y, -p);
        let (t, e) = two_sum(s, p);
        s = t;
        c += e + pe;
    }
    s + c
}

/// ‖v‖₂ (scaled against overflow).
pub fn norm2(v: &[f64]) -> f64 {
    let m = max_abs(v);
    if m == 0.0 || !m.is_finite() {
        return m;
    }
    m * v.iter().map(|x| (x / m) * (x / m)).sum::<f64>().sqrt()
}

/// ‖v‖∞
pub fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| {
        if x.abs() > m || x.is_nan() {
            x.abs()
        } else {
            m
        }
    })
}

/// All values of a list of tensors, widened to f64, in order.
pub fn flat(ts: &[Tensor]) -> Vec<f64> {
    ts.iter().flat_map(|t| t.to_f64_vec()).collect()
}

/// x + t·v for each input, computed in f64 and rounded to each input's dtype.
pub fn perturbed(x: &[Tensor], v: &[Tensor], t: f64) -> Vec<Tensor> {
    x.iter()
        .zip(v)
        .map(|(a, d)| {
            let data = a
                .to_f64_vec()
                .iter()
                .zip(d.to_f64_vec())
                .map(|(p, q)| p + t * q)
                .collect();
            Tensor::from_f64s(a.dtype(), a.shape().clone(), data).expect("same shape")
        })
        .collect()
}

/// Unit roundoff of a dtype (2^-53 for f64, 2^-24 for f32).
pub fn unit(dtype: DType) -> f64 {
    dtype.unit_roundoff()
}

/// A program with its forward- and reverse-mode programs.
#[derive(Debug, Clone)]
pub struct Derivatives {
    pub program: Program,
    pub jvp: Jvp,
    pub vjp: Vjp,
}

/// Outputs and output tangents at a point.
pub type JvpValues = (Vec<Tensor>, Vec<Tensor>);

/// Outputs and one gradient per input (zero for inputs without a cotangent).
pub type VjpValues = (Vec<Tensor>, Vec<Tensor>);

impl Derivatives {
    pub fn new(p: &Program) -> Result<Derivatives, AdError> {
        Ok(Derivatives {
            program: p.clone(),
            jvp: ad::jvp(p)?,
            vjp: ad::vjp(p)?,
        })
    }

    pub fn eval(&self, x: &[Tensor]) -> Result<Vec<Tensor>, EvalError> {
        interp::eval(&self.program, x)
    }

    /// The JVP program's arguments: x, then the tangents of the inputs that have one.
    pub fn jvp_args(&self, x: &[Tensor], v: &[Tensor]) -> Vec<Tensor> {
        let j = &self.jvp;
        let mut args: Vec<Option<Tensor>> = vec![None; j.program.n_inputs()];
        for (i, xi) in x.iter().enumerate() {
            args[i] = Some(xi.clone());
            if let Some(k) = j.layout.tangent_input(i) {
                args[k] = Some(v[i].clone());
            }
        }
        args.into_iter()
            .enumerate()
            .map(|(k, a)| a.unwrap_or_else(|| Tensor::zeros(&j.program.inputs()[k].ty)))
            .collect()
    }

    /// The VJP program's arguments: x, then one seed per output occurrence.
    pub fn vjp_args(&self, x: &[Tensor], u: &[Tensor]) -> Vec<Tensor> {
        let mut args = x.to_vec();
        args.extend(u.iter().cloned());
        args
    }

    /// The largest magnitude of any tangent (or cotangent) that a derivative program `dp` of
    /// this program computes at `args`: its inputs after the primal ones and its nodes that are
    /// not copies of forward nodes (those keep their names).
    pub fn derivative_scale(&self, dp: &Program, args: &[Tensor]) -> Result<f64, EvalError> {
        let forward: std::collections::HashSet<&str> = self
            .program
            .nodes()
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        let all = crate::verify::rewrites::with_all_values(dp);
        let values = interp::eval(&all, args)?;
        Ok((0..dp.n_vars())
            .filter(|&i| {
                if i < dp.n_inputs() {
                    i >= self.program.n_inputs()
                } else {
                    !forward.contains(dp.nodes()[i - dp.n_inputs()].name.as_str())
                }
            })
            .map(|i| max_abs(&values[i].to_f64_vec()))
            .fold(0.0, f64::max))
    }

    /// (f(x), Df(x) v), one tangent per input (ignored for inputs without a tangent slot).
    pub fn jvp_at(&self, x: &[Tensor], v: &[Tensor]) -> Result<JvpValues, EvalError> {
        let j = &self.jvp;
        let mut args: Vec<Option<Tensor>> = vec![None; j.program.n_inputs()];
        for (i, xi) in x.iter().enumerate() {
            args[i] = Some(xi.clone());
            if let Some(k) = j.layout.tangent_input(i) {
                args[k] = Some(v[i].clone());
            }
        }
        let args: Vec<Tensor> = args
            .into_iter()
            .enumerate()
            .map(|(k, a)| a.unwrap_or_else(|| Tensor::zeros(&j.program.inputs()[k].ty)))
            .collect();
        let out = interp::eval(&j.program, &args)?;
        Ok((
            j.layout.primal_outputs(&out).to_vec(),
            j.layout.tangents(&out).to_vec(),
        ))
    }

    /// (f(x), Df(x)* u), u one cotangent per output occurrence.
    pub fn vjp_at(&self, x: &[Tensor], u: &[Tensor]) -> Result<VjpValues, EvalError> {
        let v = &self.vjp;
        let mut args = x.to_vec();
        args.extend(u.iter().cloned());
        let out = interp::eval(&v.program, &args)?;
        let grads = (0..self.program.n_inputs())
            .map(|i| match v.layout.gradient(&out, i) {
                Some(g) => g.clone(),
                None => Tensor::zeros(&self.program.inputs()[i].ty),
            })
            .collect();
        Ok((v.layout.primal_outputs(&out).to_vec(), grads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot2_recovers_cancelled_terms() {
        let a = [1e16, 1.0, -1e16];
        let b = [1.0, 1.0, 1.0];
        assert_eq!(dot2(&a, &b), 1.0);
        assert_eq!(a.iter().sum::<f64>(), 0.0);
    }

    #[test]
    fn norms() {
        assert_eq!(norm2(&[3.0, -4.0]), 5.0);
        assert_eq!(max_abs(&[3.0, -4.0]), 4.0);
        assert!(max_abs(&[1.0, f64::NAN]).is_nan());
    }
}
