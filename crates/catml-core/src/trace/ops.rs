//! One method per built-in primitive, so model code reads like the maths. Each is one
//! [`Value::apply`]; composite conveniences (scalars, `broadcast_to`) are spelled in primitives,
//! so eager results equal the evaluation of the traced program bit for bit.

use std::panic::Location;
use std::sync::Arc;

use super::error::CallSite;
use super::value::{apply_at, Value};
use crate::ir::Prim;
use crate::prim::{
    Broadcast, BroadcastRows, Concat, Convert, Exp, Gather, Heaviside, Linear, Log, MatMul, Mul,
    Permute, Reciprocal, Relu, Reshape, Rsqrt, ScatterAdd, Sigmoid, StopGradient, Sum, Tanh,
};
use crate::tensor::{DType, Shape, Tensor, TensorType};

impl Value {
    pub(crate) fn unary_at(&self, location: CallSite, prim: Prim) -> Value {
        apply_at(location, prim, &[self])
    }

    /// The matrix product of two rank-2 values.
    #[track_caller]
    pub fn matmul(&self, y: &Value) -> Value {
        apply_at(Location::caller(), Arc::new(MatMul::default()), &[self, y])
    }

    /// e^x, elementwise.
    #[track_caller]
    pub fn exp(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Exp))
    }

    /// The natural logarithm; positive inputs only.
    #[track_caller]
    pub fn log(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Log))
    }

    /// tanh x, elementwise.
    #[track_caller]
    pub fn tanh(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Tanh))
    }

    /// 1 / (1 + e^{-x}).
    #[track_caller]
    pub fn sigmoid(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Sigmoid))
    }

    /// max(x, 0), with the convention relu'(0) = 0.
    #[track_caller]
    pub fn relu(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Relu))
    }

    /// The Heaviside step with H(0) = 0.
    #[track_caller]
    pub fn heaviside(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Heaviside))
    }

    /// 1 / x; nonzero inputs only.
    #[track_caller]
    pub fn reciprocal(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Reciprocal))
    }

    /// 1 / √x; positive inputs only.
    #[track_caller]
    pub fn rsqrt(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Rsqrt))
    }

    /// The sum over `axes` (they disappear from the shape).
    #[track_caller]
    pub fn sum_axes(&self, axes: &[usize]) -> Value {
        self.unary_at(Location::caller(), Arc::new(Sum::new(Some(axes.to_vec()))))
    }

    /// The sum of every element, a scalar.
    #[track_caller]
    pub fn sum_all(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Sum::new(None)))
    }

    /// The same elements, row-major, under another shape.
    #[track_caller]
    pub fn reshape(&self, shape: impl Into<Shape>) -> Value {
        self.unary_at(Location::caller(), Arc::new(Reshape::new(shape.into())))
    }

    /// Result axis i is operand axis `perm[i]`.
    #[track_caller]
    pub fn permute(&self, perm: &[usize]) -> Value {
        self.unary_at(Location::caller(), Arc::new(Permute::new(perm.to_vec())))
    }

    /// The transpose of a matrix.
    #[track_caller]
    pub fn t(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(Permute::new(vec![1, 0])))
    }

    /// broadcast_in_dim: operand axis i goes to result axis `dims[i]` (sizes equal or 1).
    #[track_caller]
    pub fn broadcast_in_dim(&self, shape: impl Into<Shape>, dims: &[usize]) -> Value {
        let prim = Arc::new(Broadcast::new(shape.into(), dims.to_vec()));
        self.unary_at(Location::caller(), prim)
    }

    /// NumPy-style broadcast to `shape`: the operand's axes align with the trailing axes.
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Value {
        let location = Location::caller();
        let shape = shape.into();
        let rank = match self.ty() {
            Ok(t) => t.rank(),
            Err(e) => return Value::failed(e),
        };
        let dims: Vec<usize> = (shape.rank().saturating_sub(rank)..shape.rank()).collect();
        self.unary_at(location, Arc::new(Broadcast::new(shape, dims)))
    }

    /// (d) to (rows, d): every row a copy.
    #[track_caller]
    pub fn broadcast_rows(&self, rows: usize) -> Value {
        self.unary_at(Location::caller(), Arc::new(BroadcastRows { rows }))
    }

    /// The slices at `indices` along `axis`, in that order (repeats allowed).
    #[track_caller]
    pub fn gather(&self, axis: usize, indices: &[usize]) -> Value {
        let prim = Arc::new(Gather::new(axis, indices.to_vec()));
        self.unary_at(Location::caller(), prim)
    }

    /// The adjoint of `gather`: slice k added at `indices[k]` of a zero axis of length `size`.
    #[track_caller]
    pub fn scatter_add(&self, axis: usize, indices: &[usize], size: usize) -> Value {
        let prim = Arc::new(ScatterAdd::new(axis, indices.to_vec(), size));
        self.unary_at(Location::caller(), prim)
    }

    /// The values joined along `axis`.
    #[track_caller]
    pub fn concat(values: &[&Value], axis: usize) -> Value {
        apply_at(Location::caller(), Arc::new(Concat { axis }), values)
    }

    /// The same values in another dtype (the only way between dtypes).
    #[track_caller]
    pub fn convert(&self, dtype: DType) -> Value {
        self.unary_at(
            Location::caller(),
            Arc::new(Convert {
                dtype,
                saturate: false,
            }),
        )
    }

    /// The identity forward, a zero response backward (declared, not a derivative).
    #[track_caller]
    pub fn stop_gradient(&self) -> Value {
        self.unary_at(Location::caller(), Arc::new(StopGradient))
    }

    /// x W^T + b, with W of shape (out, in): the `linear` primitive.
    #[track_caller]
    pub fn linear(&self, w: &Value, b: &Value) -> Value {
        apply_at(Location::caller(), Arc::new(Linear), &[self, w, b])
    }

    /// A value of type `ty` filled with `value` (a scalar constant, broadcast).
    #[track_caller]
    pub fn full(value: f64, ty: &TensorType) -> Value {
        full_at(Location::caller(), value, ty)
    }

    /// Zeros of type `ty`.
    #[track_caller]
    pub fn zeros(ty: &TensorType) -> Value {
        full_at(Location::caller(), 0.0, ty)
    }

    /// c · x.
    #[track_caller]
    pub fn scale(&self, c: f64) -> Value {
        let location = Location::caller();
        let k = self.full_like_at(location, c);
        apply_at(location, Arc::new(Mul), &[self, &k])
    }

    /// The constant `c` with this value's type.
    pub(crate) fn full_like_at(&self, location: CallSite, c: f64) -> Value {
        match self.ty() {
            Ok(ty) => full_at(location, c, &ty),
            Err(e) => Value::failed(e),
        }
    }
}

/// `full` with a given call site: a scalar `constant` broadcast to `ty` (no broadcast for
/// scalars), as `prim::Ops::full` builds it.
pub(crate) fn full_at(location: CallSite, value: f64, ty: &TensorType) -> Value {
    let c = apply_at(
        location,
        Arc::new(crate::prim::Constant::new(Tensor::scalar(ty.dtype, value))),
        &[],
    );
    if ty.rank() == 0 {
        return c;
    }
    let prim = Arc::new(Broadcast::new(ty.shape.clone(), vec![]));
    apply_at(location, prim, &[&c])
}
