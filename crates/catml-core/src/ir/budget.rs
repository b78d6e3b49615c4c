//! A primitive's f32 error budget: how far its kernel run in f32 (ŷ) may lie from the f64
//! reference on the same operands (y), per element. The model and the constants are written
//! out in `docs/budgets.md`: u = 2^-24, γ_c = cu / (1 - cu), η = 2^-150 for underflow.

use std::fmt;
use std::sync::Arc;

/// The unit roundoff of f32, u = 2^-24.
pub const U32: f64 = f32::EPSILON as f64 / 2.0;

/// The underflow term of the standard model with gradual underflow, fl(a op b) =
/// (a op b)(1 + δ) + η with |η| <= 2^-150 (half the smallest f32 subnormal).
pub const ETA32: f64 = f32::from_bits(1) as f64 / 2.0;

/// γ_c = cu / (1 - cu) for f32.
pub fn gamma(c: f64) -> f64 {
    c * U32 / (1.0 - c * U32)
}

/// The largest magnitude in `v` (0 when empty).
pub fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// max - min of `v`: bounds x_i - max over every slice.
pub fn spread(v: &[f64]) -> f64 {
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    hi - lo
}

/// A bound A on |fl(t) - t| / u for t = σx - σ max x: σD from the subtraction, and 2σ max|x|
/// from rounding σx and σ max x when σ != 1.
pub fn shift_error(x: &[f64], scale: f64) -> f64 {
    let products = if scale == 1.0 {
        0.0
    } else {
        2.0 * scale * max_abs(x)
    };
    scale * spread(x) + products
}

/// Softmax over n entries with shift error A: exp(t) within (A + 8)u, the sum adds γ_{n-1},
/// the reciprocal and the product u each: |ŷ_i - y_i| <= γ_{2A+n+17} |y_i|.
pub fn softmax_rel(a: f64, n: f64) -> f64 {
    gamma(2.0 * a + n + 17.0)
}

/// The c of attention weights from scores s = d^-1/2 Q K^T (operands Q, K of shape
/// (B, H, T, d)): the product within γ_d d P with P = d max|q| max|k| bounding |Q||K|^T, then
/// the rounded scale and the softmax shift (< 5sP).
pub fn attention_c(s: &BudgetSite) -> f64 {
    let d = s.dims[0][3] as f64;
    let p = d * max_abs(&s.ops[0]) * max_abs(&s.ops[1]);
    let scale = 1.0 / d.sqrt();
    let a = scale * p * (d + 5.0);
    2.0 * a + s.dims[1][2] as f64 + 17.0
}

/// Operands and reference output of one application, widened to f64.
pub struct BudgetSite<'a> {
    /// Each operand's dimensions.
    pub dims: Vec<Vec<usize>>,
    /// Each operand's elements, row-major.
    pub ops: Vec<Vec<f64>>,
    /// The f64 reference output.
    pub y: &'a [f64],
}

/// A per-application bound: one allowed error per output element.
pub type BudgetFormula = Arc<dyn Fn(&BudgetSite) -> Vec<f64> + Send + Sync>;

/// A primitive's stated f32 error budget.
#[derive(Clone)]
pub enum Budget {
    /// Bitwise equal to the f64 reference rounded: copies, selections, sign changes.
    Exact,
    /// |ŷ - y| <= c (u|y| + η) per element.
    Relative(f64),
    /// |ŷ - y| <= γ_k S + k η per element, with `terms` = k the roundings a summed output
    /// element may take and S the primitive applied to the operands' absolute values (the
    /// operands in `signed` keep their signs: they select, they are not summed).
    Sum {
        terms: usize,
        signed: &'static [usize],
    },
    /// A bound computed from the operands and the reference, with its formula as text.
    Formula(BudgetFormula, &'static str),
    /// No stated budget: the error is measured and reported only.
    Measured,
}

impl Budget {
    /// A summing budget over `terms` roundings, every operand read by magnitude.
    pub fn sum(terms: usize) -> Budget {
        Budget::Sum {
            terms: terms.max(1),
            signed: &[],
        }
    }

    /// A formula budget.
    pub fn formula(
        text: &'static str,
        f: impl Fn(&BudgetSite) -> Vec<f64> + Send + Sync + 'static,
    ) -> Budget {
        Budget::Formula(Arc::new(f), text)
    }
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Exact => write!(f, "exact"),
            Budget::Relative(c) => write!(f, "{c} (u |y| + eta) per element"),
            Budget::Sum { .. } => {
                write!(f, "gamma_k S + k eta, S the primitive on absolute values")
            }
            Budget::Formula(_, text) => write!(f, "{text}"),
            Budget::Measured => write!(f, "measured only"),
        }
    }
}
