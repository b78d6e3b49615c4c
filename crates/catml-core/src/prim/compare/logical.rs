//! logical_not (one bool operand), logical_and, logical_or, logical_xor (two bool operands of
//! one shape): bool results with no tangent, exact over rationals (0 false, nonzero true).

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::prim::dispatch::arity;
use crate::tensor::{Array, DType, RArray, Tensor, TensorType};

/// Which connective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogicalOp {
    Not,
    And,
    Or,
    Xor,
}

impl LogicalOp {
    pub const ALL: [LogicalOp; 4] = [
        LogicalOp::Not,
        LogicalOp::And,
        LogicalOp::Or,
        LogicalOp::Xor,
    ];

    /// The LensIR name.
    pub fn name(self) -> &'static str {
        match self {
            LogicalOp::Not => "logical_not",
            LogicalOp::And => "logical_and",
            LogicalOp::Or => "logical_or",
            LogicalOp::Xor => "logical_xor",
        }
    }

    fn arity(self) -> usize {
        if self == LogicalOp::Not {
            1
        } else {
            2
        }
    }

    /// The connective on truth values (`q` unused by `Not`).
    pub fn apply(self, p: bool, q: bool) -> bool {
        match self {
            LogicalOp::Not => !p,
            LogicalOp::And => p && q,
            LogicalOp::Or => p || q,
            LogicalOp::Xor => p != q,
        }
    }
}

/// A logical primitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logical(pub LogicalOp);

impl Logical {
    fn run<T: Clone>(&self, x: &[&Array<T>], truth: impl Fn(&T) -> bool) -> Array<bool> {
        let a = x[0];
        let data = (0..a.len())
            .map(|i| {
                let p = truth(&a.data()[i]);
                let q = x.get(1).is_some_and(|b| truth(&b.data()[i]));
                self.0.apply(p, q)
            })
            .collect();
        Array::new(a.shape().clone(), data).expect("same shape")
    }
}

impl Primitive for Logical {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn smooth(&self) -> bool {
        // Piecewise constant, and drawn programs select on it: finite differences may cross
        // a switch.
        false
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        let op = self.0;
        Some(crate::ir::Drawing::new(1, move |d| {
            super::draw_selection(d, move |b, x, y| {
                use crate::prim::Ops;
                let p = b.compare(super::Comparison::Less, x, y)?;
                let q = b.compare(super::Comparison::GreaterEqual, x, y)?;
                let operands: &[Var] = if op.arity() == 1 { &[p] } else { &[p, q] };
                b.op(Arc::new(Logical(op)), operands)
            })
        }))
    }
    fn batch(
        &self,
        b: &mut Builder,
        x: &[Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<Var, RuleError> {
        // An unbatched bool operand cannot be broadcast (broadcast is for numbers): apply per example.
        crate::prim::batching::per_example(b, x, at)
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, self.0.arity())?;
        for (index, t) in inputs.iter().enumerate() {
            if t.dtype != DType::Bool {
                return Err(TypeError::DType {
                    index,
                    expected: "bool".to_string(),
                    found: t.dtype,
                });
            }
        }
        if inputs.len() == 2 && inputs[0] != inputs[1] {
            return Err(TypeError::Mismatch {
                left: inputs[0].clone(),
                right: inputs[1].clone(),
            });
        }
        Ok(inputs[0].clone())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let arrays = x
            .iter()
            .map(|t| {
                t.as_bool().ok_or_else(|| {
                    KernelError::Unsupported(format!("{} of {}", self.0.name(), t.dtype()))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Tensor::Bool(self.run(&arrays, |&v| v)))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let out = self.run(x, |v| !num_traits::Zero::is_zero(v));
        Some(Ok(out.map(|&t| super::truth(t))))
    }
    fn flops(&self, _inputs: &[TensorType], _output: &TensorType) -> u64 {
        0
    }
    fn jvp(
        &self,
        _b: &mut Builder,
        _x: &[Var],
        _y: Var,
        _dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        Ok(None)
    }
    fn vjp(
        &self,
        _b: &mut Builder,
        x: &[Var],
        _y: Var,
        _u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![None; x.len()])
    }
}

pub(crate) fn register(r: &mut Registry) {
    for op in LogicalOp::ALL {
        r.register(op.name(), move |attrs: &Attrs| {
            AttrReader::new(attrs).finish()?;
            Ok(Arc::new(Logical(op)) as Prim)
        });
        r.set_example(op.name(), Attrs::new());
    }
}
