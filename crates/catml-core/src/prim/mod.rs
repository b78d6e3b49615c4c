//! The primitives, grouped by family (one folder each): each operation's rules (type, eval,
//! exact eval, flops, rule label, JVP, VJP, lowering, budget) side by side in its file, and
//! the registry of built-in names.

pub mod attention;
pub mod batching;
pub mod catalog;
pub mod compare;
pub mod conv;
pub mod custom;
pub mod dispatch;
mod draw;
pub mod elementwise;
pub mod linalg;
pub mod loss;
pub mod names;
pub mod norm;
pub mod pool;
pub mod random;
pub mod recurrent;
pub mod reduce;
pub mod scan;
pub mod softmax;
pub mod structural;
pub mod window;

use std::sync::{Arc, OnceLock};

/// The primitive handle and trait live in `ir` (the builder type-checks with them); they are
/// here too, beside the primitives.
pub use crate::ir::{Prim, Primitive};

pub use conv::conv_grad::{ConvInputGrad, ConvWeightGrad};
pub use conv::conv_spec::{Conv1dAttrs, Conv2dAttrs, ConvSpec};
pub use conv::forward::Conv;
pub use custom::closures::CustomPrimitive;
pub use elementwise::arith::{sum_terms, Add, Mul, Neg, Sub};
pub use elementwise::unary::{Exp, Heaviside, Log, Reciprocal, Relu, Rsqrt, Sigmoid, Tanh};
pub use elementwise::{binary_row, unary_row, Binary, Unary, BINARY_ROWS, UNARY_ROWS};
pub use linalg::linear::Linear;
pub use linalg::matmul::MatMul;
pub use pool::avg_pool::AvgPool2d;
pub use pool::max_pool::{MaxPool2d, MaxPool2dScatter, MaxPool2dSelect};
pub use pool::pool_spec::Pool2dAttrs;
pub use pool::sum_pool::{SumPool2d, SumPool2dTranspose};
pub use random::dropout::Dropout;
pub use random::keys::{KeyOp, RandomKey};
pub use random::sample::{Distribution, RandomDraw};
pub use reduce::argmax::Argmax;
pub use reduce::mean::Mean;
pub use reduce::sum::Sum;
pub use structural::broadcast::{Broadcast, BroadcastRows};
pub use structural::concat::Concat;
pub use structural::constant::Constant;
pub use structural::convert::Convert;
pub use structural::gather::{Gather, ScatterAdd};
pub use structural::layout::{Permute, Reshape};
pub use structural::stop_gradient::StopGradient;

pub use attention::attention_mask::AttentionMask;
pub use attention::attention_probs::AttentionProbs;
pub use attention::sdpa::Sdpa;
pub use elementwise::tanh_pullback::TanhPullback;
pub use linalg::batch_matmul::BatchMatMul;
pub use loss::cross_entropy::CrossEntropy;
pub use loss::mse::Mse;
pub use norm::batch_norm::{BatchNorm, BatchNormMode, BatchNormOutput, BATCH_NORM_EPSILON};
pub use norm::layer_norm::LayerNorm;
pub use reduce::reduce_max::{MaxWeights, ReduceMax};
pub use softmax::forward::{LogSoftmax, Softmax};
pub use softmax::masked_softmax::MaskedSoftmax;
pub use softmax::softmax_pullback::SoftmaxPullback;
pub use structural::one_hot::OneHot;
pub use structural::take::{ScatterRows, Take};

use crate::ir::{AttrReader, Attrs, Builder, Registry, TypeError, Var};
use crate::tensor::{DType, Shape, Tensor, TensorType};

/// Registers a primitive that takes no attributes.
pub(crate) fn register_unit(r: &mut Registry, name: &str, make: fn() -> Prim) {
    r.register(name, move |attrs: &Attrs| {
        AttrReader::new(attrs).finish()?;
        Ok(make())
    });
}

/// A registry with every built-in primitive. Add your own with [`Registry::with`] (no
/// attributes) or [`Registry::register`] (a constructor reading attributes).
pub fn registry() -> Registry {
    let mut r = Registry::empty();
    elementwise::row::register_rows(&mut r, UNARY_ROWS, BINARY_ROWS);
    // The Heaviside step's earlier name, so that modules naming it still load.
    r.alias("step", "heaviside");
    linalg::matmul::register(&mut r);
    reduce::sum::register(&mut r);
    reduce::mean::register(&mut r);
    reduce::argmax::register(&mut r);
    structural::broadcast::register(&mut r);
    structural::layout::register(&mut r);
    structural::gather::register(&mut r);
    structural::concat::register(&mut r);
    structural::constant::register(&mut r);
    structural::convert::register(&mut r);
    linalg::linear::register(&mut r);
    structural::stop_gradient::register(&mut r);
    conv::forward::register(&mut r);
    pool::sum_pool::register(&mut r);
    pool::avg_pool::register(&mut r);
    pool::max_pool::register(&mut r);
    compare::register(&mut r);
    register_composites(&mut r);
    batching::per_example::register(&mut r);
    random::keys::register(&mut r);
    random::sample::register(&mut r);
    random::dropout::register(&mut r);
    scan::register(&mut r);
    r
}

fn register_composites(r: &mut Registry) {
    attention::attention_probs::register(r);
    linalg::batch_matmul::register(r);
    loss::cross_entropy::register(r);
    norm::layer_norm::register(r);
    norm::batch_norm::register(r);
    softmax::masked_softmax::register(r);
    loss::mse::register(r);
    structural::one_hot::register(r);
    reduce::reduce_max::register(r);
    attention::sdpa::register(r);
    softmax::forward::register(r);
    softmax::softmax_pullback::register(r);
    structural::take::register(r);
    elementwise::tanh_pullback::register(r);
}

/// The built-in registry, made once.
pub fn builtins() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(registry)
}

/// Builder methods for every built-in primitive, so rules and user code read like maths.
pub trait Ops {
    fn op(&mut self, prim: Prim, operands: &[Var]) -> Result<Var, TypeError>;
    fn var_type(&self, v: Var) -> TensorType;

    fn add(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Add), &[x, y])
    }
    fn sub(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Sub), &[x, y])
    }
    fn neg(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Neg), &[x])
    }
    fn mul(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Mul), &[x, y])
    }
    fn matmul(&mut self, a: Var, b: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(MatMul::default()), &[a, b])
    }
    fn exp(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Exp), &[x])
    }
    fn log(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Log), &[x])
    }
    fn tanh(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Tanh), &[x])
    }
    fn sigmoid(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Sigmoid), &[x])
    }
    fn relu(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Relu), &[x])
    }
    /// The Heaviside step with H(0) = 0 (`heaviside`).
    fn heaviside(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Heaviside), &[x])
    }
    /// The unary row `name` (see `prim::UNARY_ROWS`) with attribute values in the row's order.
    fn unary_row(&mut self, name: &str, attrs: &[f64], x: Var) -> Result<Var, TypeError> {
        let row =
            unary_row(name).ok_or_else(|| TypeError::Invalid(format!("no unary row `{name}`")))?;
        let p: Prim = Arc::new(Unary::new(row, attrs.to_vec())?);
        self.op(p, &[x])
    }
    /// The binary row `name` (see `prim::BINARY_ROWS`).
    fn binary_row(&mut self, name: &str, x: Var, y: Var) -> Result<Var, TypeError> {
        let row = binary_row(name)
            .ok_or_else(|| TypeError::Invalid(format!("no binary row `{name}`")))?;
        self.op(Arc::new(Binary::new(row)), &[x, y])
    }
    fn sin(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("sin", &[], x)
    }
    fn cos(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("cos", &[], x)
    }
    fn sqrt(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("sqrt", &[], x)
    }
    fn abs(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("abs", &[], x)
    }
    fn sign(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("sign", &[], x)
    }
    fn erf(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("erf", &[], x)
    }
    fn square(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("square", &[], x)
    }
    fn log1p(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("log1p", &[], x)
    }
    fn expm1(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("expm1", &[], x)
    }
    fn softplus(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("softplus", &[], x)
    }
    fn floor(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("floor", &[], x)
    }
    fn ceil(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("ceil", &[], x)
    }
    fn round(&mut self, x: Var) -> Result<Var, TypeError> {
        self.unary_row("round", &[], x)
    }
    fn gelu(&mut self, x: Var, approximate: bool) -> Result<Var, TypeError> {
        self.unary_row("gelu", &[f64::from(u8::from(approximate))], x)
    }
    fn leaky_relu(&mut self, x: Var, alpha: f64) -> Result<Var, TypeError> {
        self.unary_row("leaky_relu", &[alpha], x)
    }
    fn elu(&mut self, x: Var, alpha: f64) -> Result<Var, TypeError> {
        self.unary_row("elu", &[alpha], x)
    }
    fn clip(&mut self, x: Var, min: f64, max: f64) -> Result<Var, TypeError> {
        self.unary_row("clip", &[min, max], x)
    }
    fn powi(&mut self, x: Var, n: i32) -> Result<Var, TypeError> {
        self.unary_row("powi", &[f64::from(n)], x)
    }
    fn div(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.binary_row("div", x, y)
    }
    fn pow(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.binary_row("pow", x, y)
    }
    fn maximum(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.binary_row("maximum", x, y)
    }
    fn minimum(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.binary_row("minimum", x, y)
    }
    fn reciprocal(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Reciprocal), &[x])
    }
    fn rsqrt(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Rsqrt), &[x])
    }
    /// Sum over `axes` (all axes if `None`).
    fn sum(&mut self, x: Var, axes: Option<Vec<usize>>) -> Result<Var, TypeError> {
        self.op(Arc::new(Sum::new(axes)), &[x])
    }
    /// Mean over `axes` (all axes if `None`).
    fn mean(&mut self, x: Var, axes: Option<Vec<usize>>) -> Result<Var, TypeError> {
        self.op(Arc::new(Mean::new(axes)), &[x])
    }
    /// The first position of the maximum along `axis`, as i64 (the axis is removed); no
    /// derivative passes through it.
    fn argmax(&mut self, x: Var, axis: usize) -> Result<Var, TypeError> {
        self.op(Arc::new(Argmax { axis }), &[x])
    }
    /// broadcast_in_dim: operand dim i goes to result dim `dims[i]`.
    fn broadcast(
        &mut self,
        x: Var,
        shape: impl Into<Shape>,
        dims: Vec<usize>,
    ) -> Result<Var, TypeError> {
        self.op(Arc::new(Broadcast::new(shape.into(), dims)), &[x])
    }
    fn broadcast_rows(&mut self, x: Var, rows: usize) -> Result<Var, TypeError> {
        self.op(Arc::new(BroadcastRows { rows }), &[x])
    }
    fn reshape(&mut self, x: Var, shape: impl Into<Shape>) -> Result<Var, TypeError> {
        self.op(Arc::new(Reshape::new(shape.into())), &[x])
    }
    fn permute(&mut self, x: Var, perm: Vec<usize>) -> Result<Var, TypeError> {
        self.op(Arc::new(Permute::new(perm)), &[x])
    }
    /// The transpose of a matrix.
    fn transpose(&mut self, x: Var) -> Result<Var, TypeError> {
        self.permute(x, vec![1, 0])
    }
    fn gather(&mut self, x: Var, axis: usize, indices: Vec<usize>) -> Result<Var, TypeError> {
        self.op(Arc::new(Gather::new(axis, indices)), &[x])
    }
    fn scatter_add(
        &mut self,
        x: Var,
        axis: usize,
        indices: Vec<usize>,
        size: usize,
    ) -> Result<Var, TypeError> {
        self.op(Arc::new(ScatterAdd::new(axis, indices, size)), &[x])
    }
    fn concat(&mut self, xs: &[Var], axis: usize) -> Result<Var, TypeError> {
        self.op(Arc::new(Concat { axis }), xs)
    }
    fn convert(&mut self, x: Var, dtype: DType) -> Result<Var, TypeError> {
        self.op(
            Arc::new(Convert {
                dtype,
                saturate: false,
            }),
            &[x],
        )
    }
    /// `convert` to a float dtype, out-of-range values (infinities included) becoming the
    /// largest finite value of their sign.
    fn convert_saturating(&mut self, x: Var, dtype: DType) -> Result<Var, TypeError> {
        self.op(
            Arc::new(Convert {
                dtype,
                saturate: true,
            }),
            &[x],
        )
    }
    fn linear(&mut self, x: Var, w: Var, b: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Linear), &[x, w, b])
    }
    /// 1-D convolution of x (N, C, W) with w (O, C/groups, K), plus an optional bias (O).
    fn conv1d(
        &mut self,
        x: Var,
        w: Var,
        bias: Option<Var>,
        attrs: Conv1dAttrs,
    ) -> Result<Var, TypeError> {
        let operands: Vec<Var> = [x, w].into_iter().chain(bias).collect();
        self.op(Arc::new(Conv::conv1d(attrs)), &operands)
    }
    /// 2-D convolution of x (N, C, H, W) with w (O, C/groups, kH, kW), plus an optional bias (O).
    fn conv2d(
        &mut self,
        x: Var,
        w: Var,
        bias: Option<Var>,
        attrs: Conv2dAttrs,
    ) -> Result<Var, TypeError> {
        let operands: Vec<Var> = [x, w].into_iter().chain(bias).collect();
        self.op(Arc::new(Conv::conv2d(attrs)), &operands)
    }
    /// Sum over each window of x (N, C, H, W).
    fn sum_pool2d(&mut self, x: Var, attrs: Pool2dAttrs) -> Result<Var, TypeError> {
        self.op(Arc::new(SumPool2d { attrs }), &[x])
    }
    /// Mean over each window of x (N, C, H, W), dividing by kH·kW (padding counts as zeros).
    fn avg_pool2d(&mut self, x: Var, attrs: Pool2dAttrs) -> Result<Var, TypeError> {
        self.op(Arc::new(AvgPool2d { attrs }), &[x])
    }
    /// Maximum over each window of x (N, C, H, W); ties send the derivative to the first
    /// maximal element in row-major window order.
    fn max_pool2d(&mut self, x: Var, attrs: Pool2dAttrs) -> Result<Var, TypeError> {
        self.op(Arc::new(MaxPool2d { attrs }), &[x])
    }
    fn stop_gradient(&mut self, x: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(StopGradient), &[x])
    }
    fn constant(&mut self, value: Tensor) -> Result<Var, TypeError> {
        self.op(Arc::new(Constant::new(value)), &[])
    }
    /// A tensor of type `ty` filled with `value` (a broadcast scalar constant).
    fn full(&mut self, value: f64, ty: &TensorType) -> Result<Var, TypeError> {
        let c = self.constant(Tensor::scalar(ty.dtype, value))?;
        if ty.rank() == 0 {
            return Ok(c);
        }
        self.broadcast(c, ty.shape.clone(), vec![])
    }
    /// `full` with the type of `like`.
    fn full_like(&mut self, value: f64, like: Var) -> Result<Var, TypeError> {
        let ty = self.var_type(like);
        self.full(value, &ty)
    }
    fn zeros(&mut self, ty: &TensorType) -> Result<Var, TypeError> {
        self.full(0.0, ty)
    }
    /// c · x for a constant c.
    fn scale(&mut self, x: Var, c: f64) -> Result<Var, TypeError> {
        let k = self.full_like(c, x)?;
        self.mul(x, k)
    }

    /// x / n as x · reciprocal(n): exactly 1/n over rationals, fl(1/n) in floats like
    /// `scale(x, 1/n)`.
    fn div_count(&mut self, x: Var, n: usize) -> Result<Var, TypeError> {
        let ty = self.var_type(x);
        let c = self.constant(Tensor::scalar(ty.dtype, n as f64))?;
        let r = self.reciprocal(c)?;
        let r = if ty.rank() == 0 {
            r
        } else {
            self.broadcast(r, ty.shape.clone(), vec![])?
        };
        self.mul(x, r)
    }

    // Composites.

    /// Max over `axes` (all axes if `None`); ties share the derivative equally.
    fn reduce_max(&mut self, x: Var, axes: Option<Vec<usize>>) -> Result<Var, TypeError> {
        self.op(Arc::new(ReduceMax::new(axes)), &[x])
    }
    /// The tie-sharing weights of `reduce_max` (zero derivative).
    fn max_weights(&mut self, x: Var, axes: Option<Vec<usize>>) -> Result<Var, TypeError> {
        self.op(Arc::new(MaxWeights::new(axes)), &[x])
    }
    fn softmax(&mut self, x: Var, axis: usize) -> Result<Var, TypeError> {
        self.op(Arc::new(Softmax { axis }), &[x])
    }
    fn log_softmax(&mut self, x: Var, axis: usize) -> Result<Var, TypeError> {
        self.op(Arc::new(LogSoftmax { axis }), &[x])
    }
    /// c y (v - sum_axis(y v)): the derivative of softmax(c x) at output y applied to v.
    fn softmax_pullback(
        &mut self,
        y: Var,
        v: Var,
        axis: usize,
        scale: f64,
    ) -> Result<Var, TypeError> {
        self.op(Arc::new(SoftmaxPullback { axis, scale }), &[y, v])
    }
    /// u (1 - y²): the derivative of y = tanh x applied to u.
    fn tanh_pullback(&mut self, y: Var, u: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(TanhPullback), &[y, u])
    }
    /// Softmax of `scale` times (B, H, Tq, Tk) scores over each query row's allowed keys.
    fn masked_softmax(
        &mut self,
        s: Var,
        mask: AttentionMask,
        scale: f64,
    ) -> Result<Var, TypeError> {
        self.op(Arc::new(MaskedSoftmax { mask, scale }), &[s])
    }
    /// One matrix product per index of the shared leading dims.
    fn batch_matmul(
        &mut self,
        a: Var,
        b: Var,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Var, TypeError> {
        self.op(
            Arc::new(BatchMatMul::new(transpose_a, transpose_b)),
            &[a, b],
        )
    }
    /// The attention weights masked_softmax(d^-1/2 Q K^T) of (B, H, T, d) queries and keys.
    fn attention_probs(&mut self, q: Var, k: Var, mask: AttentionMask) -> Result<Var, TypeError> {
        self.op(Arc::new(AttentionProbs { mask }), &[q, k])
    }
    /// Scaled dot-product attention of (B, H, T, d) queries, keys and values.
    fn sdpa(&mut self, q: Var, k: Var, v: Var, mask: AttentionMask) -> Result<Var, TypeError> {
        self.op(Arc::new(Sdpa::new(mask)), &[q, k, v])
    }
    /// Mean-variance normalisation over `axes`; `affine` = Some((gamma, beta)).
    fn layer_norm(
        &mut self,
        x: Var,
        axes: Vec<usize>,
        eps: f64,
        affine: Option<(Var, Var)>,
    ) -> Result<Var, TypeError> {
        match affine {
            None => self.op(Arc::new(LayerNorm::new(axes, eps, false)), &[x]),
            Some((g, b)) => self.op(Arc::new(LayerNorm::new(axes, eps, true)), &[x, g, b]),
        }
    }
    /// Batch normalisation of x (N, C, ...) with the batch's statistics: the normalised values,
    /// the batch mean (C) and the biased batch variance (C), as three nodes.
    fn batch_norm_train(
        &mut self,
        x: Var,
        scale: Var,
        bias: Var,
        epsilon: f64,
    ) -> Result<(Var, Var, Var), TypeError> {
        let mut node = |output| {
            let p = BatchNorm::new(epsilon, BatchNormMode::Training, output);
            self.op(Arc::new(p), &[x, scale, bias])
        };
        Ok((
            node(BatchNormOutput::Y)?,
            node(BatchNormOutput::Mean)?,
            node(BatchNormOutput::Var)?,
        ))
    }
    /// Batch normalisation of x (N, C, ...) with given per-channel statistics (C).
    fn batch_norm_infer(
        &mut self,
        x: Var,
        [scale, bias, mean, var]: [Var; 4],
        epsilon: f64,
    ) -> Result<Var, TypeError> {
        let p = BatchNorm::new(epsilon, BatchNormMode::Inference, BatchNormOutput::Y);
        self.op(Arc::new(p), &[x, scale, bias, mean, var])
    }
    /// A tensor of this type drawn from `key` (`i64[2]`): uniform on [0, 1) or standard normal.
    fn random(
        &mut self,
        key: Var,
        distribution: Distribution,
        ty: &TensorType,
    ) -> Result<Var, TypeError> {
        let p = RandomDraw {
            distribution,
            shape: ty.shape.clone(),
            dtype: ty.dtype,
        };
        self.op(Arc::new(p), &[key])
    }
    /// x · mask / (1 - rate), the mask drawn from `key` (`i64[2]`).
    fn dropout(&mut self, key: Var, x: Var, rate: f64) -> Result<Var, TypeError> {
        self.op(Arc::new(Dropout::new(rate)?), &[key, x])
    }
    /// `count` keys (i64[count, 2]) from one.
    fn random_split(&mut self, key: Var, count: usize) -> Result<Var, TypeError> {
        self.op(
            Arc::new(RandomKey {
                op: KeyOp::Split { count },
            }),
            &[key],
        )
    }
    /// The key for `data` derived from `key`.
    fn random_fold_in(&mut self, key: Var, data: u64) -> Result<Var, TypeError> {
        self.op(
            Arc::new(RandomKey {
                op: KeyOp::FoldIn { data },
            }),
            &[key],
        )
    }
    /// Mean cross-entropy of (B, C) logits against i64 labels (B).
    fn cross_entropy(&mut self, logits: Var, labels: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(CrossEntropy), &[logits, labels])
    }
    /// Mean squared error of two equal-typed values.
    fn mse(&mut self, a: Var, b: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Mse), &[a, b])
    }
    /// Rows of a (V, D) table at runtime i64 indices: (..., D).
    fn take(&mut self, table: Var, indices: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(Take), &[table, indices])
    }
    /// The transpose of `take`: rows of `u` added into a (rows, D) result at `indices`.
    fn scatter_rows(&mut self, u: Var, indices: Var, rows: usize) -> Result<Var, TypeError> {
        self.op(Arc::new(ScatterRows { rows }), &[u, indices])
    }
    fn one_hot(&mut self, indices: Var, classes: usize, dtype: DType) -> Result<Var, TypeError> {
        self.op(Arc::new(OneHot { classes, dtype }), &[indices])
    }

    // Comparisons, logic and selection (bool results).

    /// x ∘ y elementwise for operands of one type (f32, f64 or i64): a bool of their shape.
    fn compare(&mut self, c: compare::Comparison, x: Var, y: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(compare::Compare(c)), &[x, y])
    }
    fn equal(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.compare(compare::Comparison::Equal, x, y)
    }
    fn less(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.compare(compare::Comparison::Less, x, y)
    }
    fn less_equal(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.compare(compare::Comparison::LessEqual, x, y)
    }
    fn greater(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.compare(compare::Comparison::Greater, x, y)
    }
    fn greater_equal(&mut self, x: Var, y: Var) -> Result<Var, TypeError> {
        self.compare(compare::Comparison::GreaterEqual, x, y)
    }
    fn logical_not(&mut self, c: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(compare::Logical(compare::LogicalOp::Not)), &[c])
    }
    fn logical_and(&mut self, c: Var, d: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(compare::Logical(compare::LogicalOp::And)), &[c, d])
    }
    fn logical_or(&mut self, c: Var, d: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(compare::Logical(compare::LogicalOp::Or)), &[c, d])
    }
    fn logical_xor(&mut self, c: Var, d: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(compare::Logical(compare::LogicalOp::Xor)), &[c, d])
    }
    /// a where the bool `cond` holds, else b (all of one shape).
    fn select(&mut self, cond: Var, a: Var, b: Var) -> Result<Var, TypeError> {
        self.op(Arc::new(compare::Where), &[cond, a, b])
    }
}

impl Ops for Builder {
    fn op(&mut self, prim: Prim, operands: &[Var]) -> Result<Var, TypeError> {
        self.apply(prim, operands)
    }
    fn var_type(&self, v: Var) -> TensorType {
        self.ty(v).clone()
    }
}

#[cfg(test)]
mod registry_facts {
    use super::builtins;

    #[test]
    fn every_builtin_has_an_example_instance() {
        let r = builtins();
        let missing: Vec<&str> = r.names().filter(|n| r.example(n).is_none()).collect();
        assert!(missing.is_empty(), "no example instance: {missing:?}");
    }

    #[test]
    fn the_core_fragment_is_the_fourteen_primitives() {
        let mut core = crate::transform::core_fragment();
        core.sort();
        let expected = [
            "add",
            "broadcast",
            "concat",
            "constant",
            "exp",
            "gather",
            "matmul",
            "mul",
            "permute",
            "reciprocal",
            "reshape",
            "rsqrt",
            "sum",
            "tanh",
        ];
        assert_eq!(core, expected);
    }
}
