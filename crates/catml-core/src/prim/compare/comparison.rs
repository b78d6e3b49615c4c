//! equal, less, less_equal, greater, greater_equal: two operands of one type (f32, f64 or i64)
//! to a bool of their shape. The result is piecewise constant and bool, so it carries no
//! tangent; exact over rationals.

use std::sync::Arc;

use crate::ir::{
    AttrReader, Attrs, Builder, KernelError, Prim, Primitive, Registry, RuleError, TypeError, Var,
};
use crate::prim::dispatch::arity;
use crate::tensor::{Array, DType, RArray, Tensor, TensorType};

/// Which comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Equal,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

impl Comparison {
    pub const ALL: [Comparison; 5] = [
        Comparison::Equal,
        Comparison::Less,
        Comparison::LessEqual,
        Comparison::Greater,
        Comparison::GreaterEqual,
    ];

    /// The LensIR name.
    pub fn name(self) -> &'static str {
        match self {
            Comparison::Equal => "equal",
            Comparison::Less => "less",
            Comparison::LessEqual => "less_equal",
            Comparison::Greater => "greater",
            Comparison::GreaterEqual => "greater_equal",
        }
    }

    /// x ∘ y (false whenever an operand is NaN).
    pub fn holds<T: PartialOrd>(self, x: &T, y: &T) -> bool {
        match self {
            Comparison::Equal => x == y,
            Comparison::Less => x < y,
            Comparison::LessEqual => x <= y,
            Comparison::Greater => x > y,
            Comparison::GreaterEqual => x >= y,
        }
    }
}

/// A comparison primitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compare(pub Comparison);

fn zip<T: PartialOrd + Clone>(c: Comparison, a: &Array<T>, b: &Array<T>) -> Array<bool> {
    let data = a
        .data()
        .iter()
        .zip(b.data())
        .map(|(x, y)| c.holds(x, y))
        .collect();
    Array::new(a.shape().clone(), data).expect("same shape")
}

/// Two operands of one type, numbers (not bool).
pub(crate) fn same_number_pair(inputs: &[TensorType]) -> Result<(), TypeError> {
    arity(inputs, 2)?;
    if inputs[0].dtype == DType::Bool {
        return Err(TypeError::DType {
            index: 0,
            expected: "f32, f64 or i64".to_string(),
            found: DType::Bool,
        });
    }
    if inputs[0] != inputs[1] {
        return Err(TypeError::Mismatch {
            left: inputs[0].clone(),
            right: inputs[1].clone(),
        });
    }
    Ok(())
}

impl Primitive for Compare {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn smooth(&self) -> bool {
        // Piecewise constant, and drawn programs select on it: finite differences may cross
        // a switch.
        false
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        let c = self.0;
        Some(crate::ir::Drawing::new(1, move |d| {
            super::draw_selection(d, move |b, x, y| crate::prim::Ops::compare(b, c, x, y))
        }))
    }
    fn batch(
        &self,
        b: &mut Builder,
        x: &[Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<Var, RuleError> {
        super::batch_elementwise(b, x, at)
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> crate::ir::Budget {
        crate::ir::Budget::Exact
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        same_number_pair(inputs)?;
        Ok(inputs[0].with_dtype(DType::Bool))
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        Ok(Tensor::Bool(match (x[0], x[1]) {
            (Tensor::F32(a), Tensor::F32(b)) => zip(self.0, a, b),
            (Tensor::F64(a), Tensor::F64(b)) => zip(self.0, a, b),
            (Tensor::I64(a), Tensor::I64(b)) => zip(self.0, a, b),
            (a, b) => {
                return Err(KernelError::Unsupported(format!(
                    "{} of {} and {}",
                    self.0.name(),
                    a.dtype(),
                    b.dtype()
                )))
            }
        }))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(Ok(
            zip(self.0, x[0], x[1]).map(|&t| crate::prim::compare::truth(t))
        ))
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
        _x: &[Var],
        _y: Var,
        _u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        Ok(vec![None, None])
    }
}

pub(crate) fn register(r: &mut Registry) {
    for c in Comparison::ALL {
        r.register(c.name(), move |attrs: &Attrs| {
            AttrReader::new(attrs).finish()?;
            Ok(Arc::new(Compare(c)) as Prim)
        });
        r.set_example(c.name(), Attrs::new());
    }
}
