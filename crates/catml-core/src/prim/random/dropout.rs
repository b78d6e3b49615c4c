//! dropout {"rate": r}: operands (key i64[2], x float); y = x · mask / (1 - r), where element i
//! is kept (mask 1) exactly when bits32(key, i) < (1 - r) 2^32, so each is kept with
//! probability 1 - r and the expectation of y is x (`docs/random.md`). 0 <= r < 1; r = 0 keeps
//! everything and is the identity.
//!
//! For a fixed key dropout is linear in x and diagonal, so its JVP applies it to the tangent
//! and its pullback applies it to the cotangent: the derivative in x is mask / (1 - r). The key
//! is an integer and gets no cotangent.

use crate::ir::{Draw, DrawError, Drawn, Interval};
use crate::ir::{Linearity, Transpose};
use crate::prim::Ops;
use std::sync::Arc;

use super::key_operand;
use super::threefry::{bits32, key_words, rational_key_words};
use crate::ir::{
    AttrReader, Attrs, Budget, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    TypeError, Var,
};
use crate::prim::dispatch::{arity, float_operand};
use crate::tensor::{Array, Float, RArray, Rational, Tensor, TensorType};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropout {
    pub rate: f64,
}

impl Dropout {
    /// Checks 0 <= rate < 1.
    pub fn new(rate: f64) -> Result<Dropout, TypeError> {
        if (0.0..1.0).contains(&rate) {
            Ok(Dropout { rate })
        } else {
            Err(TypeError::attr(
                "rate",
                format!("expected 0 <= rate < 1, found {rate}"),
            ))
        }
    }

    /// Whether element i is kept under this key.
    pub fn keeps(&self, key: [u32; 2], i: u64) -> bool {
        f64::from(bits32(key, i)) < (1.0 - self.rate) * 4_294_967_296.0
    }

    fn run<T: Float>(&self, key: [u32; 2], x: &Array<T>) -> Array<T> {
        let scale = T::from_f64(1.0 / (1.0 - self.rate));
        let data = x
            .data()
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if self.keeps(key, i as u64) {
                    *v * scale
                } else {
                    T::zero()
                }
            })
            .collect();
        Array::new(x.shape().clone(), data).expect("x's shape")
    }
}

impl Primitive for Dropout {
    fn name(&self) -> &str {
        "dropout"
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_dropout))
    }
    /// Applied per example, so batched results equal a loop bitwise.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::per_example(b, x, at)
    }
    fn formula(&self) -> Option<&'static str> {
        Some("(key i64[2], x): x mask / (1 - `rate`), element i kept when bits32(key, i) < (1 - rate) 2^32; 0 <= rate < 1 (docs/random.md)")
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([("rate", self.rate.into())])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        Dropout::new(self.rate)?;
        arity(inputs, 2)?;
        key_operand(inputs, 0)?;
        float_operand(inputs, 1)?;
        Ok(inputs[1].clone())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let key = key_words(x[0])?;
        match x[1] {
            Tensor::F32(a) => Ok(Tensor::F32(self.run(key, a))),
            Tensor::F64(a) => Ok(Tensor::F64(self.run(key, a))),
            other => Err(KernelError::Unsupported(format!(
                "dropout of {}",
                other.dtype()
            ))),
        }
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some((|| {
            let key = rational_key_words(x[0])?;
            let one = Rational::from_integer(1.into());
            let rate = crate::tensor::rational_from_f64(self.rate).expect("a finite rate");
            let scale = &one / (&one - rate);
            let data = x[1]
                .data()
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    if self.keeps(key, i as u64) {
                        v * &scale
                    } else {
                        Rational::from_integer(0.into())
                    }
                })
                .collect();
            Ok(RArray::new(x[1].shape().clone(), data).expect("x's shape"))
        })())
    }
    /// The scale 1/(1 - r) rounded to f32, then the product.
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        Budget::Relative(2.0)
    }
    fn flops(&self, inputs: &[TensorType], _output: &TensorType) -> u64 {
        31 * inputs[1].numel() as u64
    }
    fn linearity(&self) -> Option<Linearity<'_>> {
        Some(Linearity::of(self, 1))
    }
}

impl Transpose for Dropout {
    fn transpose(&self, b: &mut Builder, x: &[Var], u: Var) -> Result<Var, RuleError> {
        Ok(b.apply(Arc::new(*self), &[x[0], u])?)
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register("dropout", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let rate = a.f64("rate")?;
        a.finish()?;
        Ok(Arc::new(Dropout::new(rate)?) as Prim)
    });
    r.set_example("dropout", crate::ir::attrs_json(r#"{"rate": 0.5}"#));
}

/// x · mask / (1 - r): in the hull of 0 and x's range scaled by 1 / (1 - r).
fn draw_dropout(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let x = d.pick();
    let x = d.moderate(x, 8.0)?;
    let k = super::draw_key(d)?;
    let rate = [0.0, 0.25, 0.5][d.below(3)];
    let r = x
        .range
        .scale(1.0 / (1.0 - rate))
        .hull(Interval::new(0.0, 0.0));
    d.same(r, |b| b.dropout(k, x.var, rate))
}
