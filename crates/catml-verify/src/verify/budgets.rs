//! The per-primitive local error budgets of the backend simulation: |ŷ - y| per element for a
//! primitive run in f32 (ŷ) against the f64 reference on the same operands (y), with
//! u = 2^-24, γ_c = cu/(1 - cu) and η = 2^-150 for underflow. Library exponentials and
//! logarithms are within 8u (the f32 slice exponential of the softmax kernels is within
//! 2^-22 = 4u).

use crate::ir::Node;

pub(super) const U32: f64 = f32::EPSILON as f64 / 2.0;

/// The underflow term of the standard model with gradual underflow, fl(a op b) =
/// (a op b)(1 + δ) + η with |η| <= 2^-150 (half the smallest f32 subnormal; sums of subnormals
/// are exact, products and quotients are not).
pub(super) const ETA32: f64 = f32::from_bits(1) as f64 / 2.0;

/// Operands and reference output of one instance, widened to f64.
pub(super) struct Site<'a> {
    pub node: &'a Node,
    pub dims: Vec<Vec<usize>>,
    pub ops: Vec<Vec<f64>>,
    pub y: &'a [f64],
}

type Formula = fn(&Site) -> Vec<f64>;

/// A primitive's stated local budget.
#[derive(Clone, Copy)]
pub(super) enum Budget {
    Exact,
    /// |ŷ - y| <= c (u|y| + η) per element.
    Relative(f64),
    /// |ŷ - y| <= γ_{k + extra} S + (k + extra) η per element, k the terms per output element
    /// and S the primitive on absolute values.
    Sum(usize),
    /// A per-instance formula of the operands and the reference.
    Formula(Formula, &'static str),
    /// No stated budget.
    Measured,
}

pub(super) fn budget(name: &str) -> Budget {
    match name {
        "reshape" | "permute" | "gather" | "broadcast" | "broadcast_rows" | "concat" | "neg"
        | "relu" | "step" | "stop_gradient" | "take" | "one_hot" | "reduce_max" | "max_pool2d"
        | "max_pool2d_select" => Budget::Exact,
        // layer_norm runs in f64 and rounds once; max_weights is 1/#ties.
        "add" | "sub" | "mul" | "reciprocal" | "layer_norm" | "max_weights" => {
            Budget::Relative(1.0)
        }
        "rsqrt" => Budget::Relative(2.0),
        "exp" | "log" | "tanh" | "sigmoid" => Budget::Relative(8.0),
        "sum"
        | "scatter_add"
        | "matmul"
        | "linear"
        | "batch_matmul"
        | "conv1d"
        | "conv2d"
        | "conv1d_input_grad"
        | "conv2d_input_grad"
        | "conv1d_weight_grad"
        | "conv2d_weight_grad"
        | "sum_pool2d"
        | "sum_pool2d_transpose"
        | "max_pool2d_scatter"
        | "scatter_rows" => Budget::Sum(0),
        // The window sum, then a product by fl(1/(kH kW)).
        "avg_pool2d" => Budget::Sum(1),
        "mse" => Budget::Formula(mse, "gamma_{n+3} |y|"),
        "softmax" => Budget::Formula(softmax, "gamma_c |y|, c = 2D + n + 17"),
        "masked_softmax" => Budget::Formula(masked_softmax, "gamma_c |y|, c = 2A + Tk + 17"),
        "log_softmax" => Budget::Formula(log_softmax, "gamma_c (1 + |y|), c = 2D + n + 7 + 8 ln n"),
        "attention_probs" => Budget::Formula(
            attention_probs,
            "gamma_c |y|, c = 2A + Tk + 17, A = s P (d + 5)",
        ),
        "sdpa" => Budget::Formula(sdpa, "gamma_{c+Tk} max|V|, c as attention_probs"),
        "softmax_pullback" => Budget::Formula(
            softmax_pullback,
            "|c y_i| gamma_n n max|y| max|v| (1 + gamma_3) + gamma_3 |out_i|",
        ),
        "tanh_pullback" => Budget::Formula(
            tanh_pullback,
            "gamma_3 |u| (|1 - y^2| + y^2) + 2 (|u| + 1) eta",
        ),
        "cross_entropy" => Budget::Formula(
            cross_entropy,
            "gamma_c (1 + |y|), c = 2D + M + n + 8 + 10 ln n",
        ),
        _ => Budget::Measured,
    }
}

/// γ_c = cu / (1 - cu).
fn gamma(c: f64) -> f64 {
    c * U32 / (1.0 - c * U32)
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// max - min: bounds x_i - max over every slice.
fn spread(v: &[f64]) -> f64 {
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    hi - lo
}

fn attr_f64(s: &Site, key: &str, default: f64) -> f64 {
    s.node
        .prim
        .attrs()
        .get(key)
        .and_then(|v| v.as_f64())
        .unwrap_or(default)
}

/// The length of the softmax axis.
fn axis_len(s: &Site) -> f64 {
    let axis = attr_f64(s, "axis", 0.0) as usize;
    s.dims[0][axis] as f64
}

/// A bound A on |fl(t) - t| / u for t = σx - σ max x: σD from the subtraction, and 2σ max|x|
/// from rounding σx and σ max x when σ != 1.
fn shift_error(x: &[f64], scale: f64) -> f64 {
    let products = if scale == 1.0 {
        0.0
    } else {
        2.0 * scale * max_abs(x)
    };
    scale * spread(x) + products
}

/// Softmax over n entries with shift error A: exp(t) within (A + 8)u, the sum adds γ_{n-1},
/// the reciprocal and the product u each: |ŷ_i - y_i| <= γ_{2A+n+17} |y_i|.
fn softmax_rel(a: f64, n: f64) -> f64 {
    gamma(2.0 * a + n + 17.0)
}

/// Sum of n squared differences, then a division: n + 3 roundings on nonnegative terms.
fn mse(s: &Site) -> Vec<f64> {
    let n = s.dims[0].iter().product::<usize>() as f64;
    s.y.iter().map(|y| gamma(n + 3.0) * y.abs()).collect()
}

fn softmax(s: &Site) -> Vec<f64> {
    let c = softmax_rel(spread(&s.ops[0]), axis_len(s));
    s.y.iter().map(|y| c * y.abs()).collect()
}

fn masked_softmax(s: &Site) -> Vec<f64> {
    let scale = attr_f64(s, "scale", 1.0);
    let c = softmax_rel(shift_error(&s.ops[0], scale), s.dims[0][3] as f64);
    s.y.iter().map(|y| c * y.abs()).collect()
}

/// y = t - ln(sum e^t): t within Au, the sum within (A + n + 7)u, ln adds 8u |ln sum| with
/// sum in [1, n], the subtraction u|y|.
fn log_softmax(s: &Site) -> Vec<f64> {
    let n = axis_len(s);
    let c = gamma(2.0 * spread(&s.ops[0]) + n + 7.0 + 8.0 * n.ln());
    s.y.iter().map(|y| c * (1.0 + y.abs())).collect()
}

/// The shift error of attention scores s = d^-1/2 Q K^T: the product within γ_d d P with
/// P = d max|q| max|k| bounding |Q||K|^T, then the rounded scale and the softmax shift (< 5sP).
fn attention_c(s: &Site) -> f64 {
    let d = s.dims[0][3] as f64;
    let p = d * max_abs(&s.ops[0]) * max_abs(&s.ops[1]);
    let scale = 1.0 / d.sqrt();
    let a = scale * p * (d + 5.0);
    2.0 * a + s.dims[1][2] as f64 + 17.0
}

fn attention_probs(s: &Site) -> Vec<f64> {
    let c = gamma(attention_c(s));
    s.y.iter().map(|y| c * y.abs()).collect()
}

/// P V with rows of P summing to 1: |ΔP||V| + γ_Tk |P||V| <= γ_{c+Tk} max|V|.
fn sdpa(s: &Site) -> Vec<f64> {
    let tk = s.dims[1][2] as f64;
    let b = gamma(attention_c(s) + tk) * max_abs(&s.ops[2]);
    vec![b; s.y.len()]
}

/// c y_i (v_i - s): s = sum_j y_j v_j within γ_n sum_j |y_j v_j| <= γ_n n max|y| max|v|,
/// then three roundings.
fn softmax_pullback(s: &Site) -> Vec<f64> {
    let n = axis_len(s);
    let c = attr_f64(s, "scale", 1.0).abs();
    let dot = gamma(n) * n * max_abs(&s.ops[0]) * max_abs(&s.ops[1]) * (1.0 + gamma(3.0));
    s.ops[0]
        .iter()
        .zip(s.y)
        .map(|(yi, out)| c * yi.abs() * dot + gamma(3.0) * out.abs())
        .collect()
}

/// fl(u fl(1 - fl(y y))): the error u [(1 - y²)(δ2 + δ3 + δ2 δ3) - y² δ1 (1 + δ2)(1 + δ3)] is
/// within γ_3 |u| (|1 - y²| + y²); the square's underflow η reaches the result times |u|, the
/// last product's as η, each at most doubled by the later roundings.
fn tanh_pullback(s: &Site) -> Vec<f64> {
    s.ops[0]
        .iter()
        .zip(&s.ops[1])
        .map(|(y, u)| {
            gamma(3.0) * u.abs() * ((1.0 - y * y).abs() + y * y) + 2.0 * (u.abs() + 1.0) * ETA32
        })
        .collect()
}

/// Per row m + ln(sum e^(z - m)) - z_label in f32, accumulated in f64: the sum within
/// (D + n + 7)u, ln 8u ln n, the two additions u|m + ln s| <= u(M + ln n) and u(D + ln n),
/// the final rounding u|y|.
fn cross_entropy(s: &Site) -> Vec<f64> {
    let n = s.dims[0][1] as f64;
    let c = 2.0 * spread(&s.ops[0]) + max_abs(&s.ops[0]) + n + 8.0 + 10.0 * n.ln();
    s.y.iter().map(|y| gamma(c) * (1.0 + y.abs())).collect()
}

/// Terms per output element of a summing primitive (an upper bound).
pub(super) fn terms(s: &Site) -> usize {
    let attrs = s.node.prim.attrs();
    let flag = |k: &str| attrs.get(k).and_then(|v| v.as_bool()) == Some(true);
    let numel = |i: usize| s.dims[i].iter().product::<usize>();
    let out = &s.node.ty;
    match s.node.prim.name() {
        "matmul" | "batch_matmul" => {
            let a = &s.dims[0];
            let r = a.len();
            if flag("transpose_a") {
                a[r - 2]
            } else {
                a[r - 1]
            }
        }
        "linear" => s.dims[1][1] + 1,
        // (C/groups) k_H k_W products, plus the bias.
        "conv1d" | "conv2d" => numel(1) / s.dims[1][0] + usize::from(s.dims.len() == 3),
        // (O/groups) k_H k_W products meet at an input element.
        "conv1d_input_grad" | "conv2d_input_grad" => numel(1) / out.dims()[1],
        // N Ho Wo products per weight element.
        "conv1d_weight_grad" | "conv2d_weight_grad" => numel(1) / s.dims[1][1],
        // At most kH kW windows meet at an element.
        "sum_pool2d" | "sum_pool2d_transpose" | "max_pool2d_scatter" | "avg_pool2d" => attrs
            .get("kernel")
            .and_then(|v| v.as_array())
            .map_or(1, |k| {
                k.iter().filter_map(|d| d.as_u64()).product::<u64>() as usize
            }),
        // Every index may name the same row.
        "scatter_rows" => numel(1),
        // scatter_add along an axis of length n into `size` slots: at most n terms meet.
        "scatter_add" => {
            let size = attrs.get("size").and_then(|v| v.as_u64()).unwrap_or(1) as usize;
            (numel(0) * size / out.numel().max(1)).max(1)
        }
        // sum: the reduced elements.
        _ => (numel(0) / out.numel().max(1)).max(1),
    }
    .max(1)
}

/// Whether S reads operand `i` with its sign: the window maxima of max_pool2d_scatter are
/// located in x itself.
pub(super) fn signed_operand(name: &str, i: usize) -> bool {
    name == "max_pool2d_scatter" && i == 0
}
