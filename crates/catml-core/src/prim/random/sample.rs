//! random_uniform {"shape", "dtype"} and random_normal {"shape", "dtype"}: a tensor of the given
//! shape and float dtype (default f64) drawn from the key operand (`docs/random.md`).
//!
//! Uniform on [0, 1): element i is the top 23 bits of `bits32(key, i)` times 2^-23 (f32), or
//! the top 52 bits of `bits64(key, i)` times 2^-52 (f64): exact dyadic rationals.
//! Standard normal, by Box-Muller on block i's two words (a, b):
//! z = sqrt(-2 ln((a + 1) 2^-32)) cos(2π b 2^-32), computed in f64 and rounded to the dtype.
//!
//! The result does not depend on any float operand: it carries no derivative.

use crate::ir::{Draw, DrawError, Drawn, Interval};
use crate::prim::Ops;
use std::sync::Arc;

use super::key_operand;
use super::threefry::{bits32, bits64, block, key_words, rational_key_words};
use crate::ir::{
    AttrReader, Attrs, Budget, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    TypeError, Var,
};
use crate::prim::dispatch::arity;
use crate::tensor::{DType, RArray, Rational, Shape, Tensor, TensorType};

/// Which distribution a draw follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Uniform on [0, 1).
    Uniform,
    /// Standard normal.
    Normal,
}

/// random_uniform or random_normal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RandomDraw {
    pub distribution: Distribution,
    pub shape: Shape,
    pub dtype: DType,
}

const TWO_POW_32: f64 = 4_294_967_296.0;

/// Uniform element i in f64, exactly as the f64 result holds it.
fn uniform_f64(key: [u32; 2], i: u64) -> f64 {
    (bits64(key, i) >> 12) as f64 * 2f64.powi(-52)
}

/// Uniform element i in f32.
fn uniform_f32(key: [u32; 2], i: u64) -> f32 {
    (bits32(key, i) >> 9) as f32 * 2f32.powi(-23)
}

/// Standard normal element i, in f64.
fn normal(key: [u32; 2], i: u64) -> f64 {
    let [a, b] = block(key, i);
    let u1 = (f64::from(a) + 1.0) / TWO_POW_32;
    let u2 = f64::from(b) / TWO_POW_32;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl RandomDraw {
    fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.shape.clone())
    }

    fn draw(&self, key: [u32; 2]) -> Result<Tensor, KernelError> {
        let n = self.shape.numel() as u64;
        let data: Vec<f64> = match (self.distribution, self.dtype) {
            (Distribution::Uniform, DType::F32) => {
                let v: Vec<f32> = (0..n).map(|i| uniform_f32(key, i)).collect();
                return Tensor::f32(self.shape.clone(), v)
                    .map_err(|e| KernelError::Unsupported(e.to_string()));
            }
            (Distribution::Uniform, _) => (0..n).map(|i| uniform_f64(key, i)).collect(),
            (Distribution::Normal, _) => (0..n).map(|i| normal(key, i)).collect(),
        };
        Tensor::from_f64s(self.dtype, self.shape.clone(), data)
            .map_err(|e| KernelError::Unsupported(e.to_string()))
    }
}

impl Primitive for RandomDraw {
    fn name(&self) -> &str {
        match self.distribution {
            Distribution::Uniform => "random_uniform",
            Distribution::Normal => "random_normal",
        }
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        let dist = self.distribution;
        Some(crate::ir::Drawing::new(1, move |d| draw_random(d, dist)))
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
    fn smooth(&self) -> bool {
        // An f32 draw reads 32 bits and an f64 draw 64 (docs/random.md), so a program and its
        // f64 twin draw different numbers: the families comparing the two leave draws out.
        false
    }
    fn formula(&self) -> Option<&'static str> {
        Some(match self.distribution {
            Distribution::Uniform => "key i64[2] to `shape` values uniform on [0, 1) of `dtype` (default f64); no derivative (docs/random.md)",
            Distribution::Normal => "key i64[2] to `shape` standard normal values of `dtype` (default f64), Box-Muller; no derivative (docs/random.md)",
        })
    }
    fn attrs(&self) -> Attrs {
        crate::ir::attrs_of([
            ("shape", self.shape.dims().to_vec().into()),
            ("dtype", self.dtype.to_string().into()),
        ])
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        key_operand(inputs, 0)?;
        Ok(self.ty())
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        self.draw(key_words(x[0])?)
    }
    /// Uniform draws are dyadic rationals; normal ones need a logarithm and a cosine.
    fn has_rational_eval(&self) -> bool {
        self.distribution == Distribution::Uniform
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        if self.distribution != Distribution::Uniform {
            return None;
        }
        Some((|| {
            let t = self.draw(rational_key_words(x[0])?)?;
            let v = t
                .to_f64_vec()
                .into_iter()
                .map(|v| crate::tensor::rational_from_f64(v).expect("finite draws"))
                .collect::<Vec<Rational>>();
            Ok(RArray::new(self.shape.clone(), v).expect("numel values"))
        })())
    }
    /// f32 and f64 evaluate the same node with the same dtype attribute: the same values.
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        Budget::Exact
    }
    fn flops(&self, _inputs: &[TensorType], output: &TensorType) -> u64 {
        30 * output.numel() as u64
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
        Ok(vec![None])
    }
}

fn register_draw(r: &mut Registry, name: &'static str, distribution: Distribution) {
    r.register(name, move |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let shape = a.shape("shape")?;
        let dtype = match a.get("dtype") {
            None => DType::F64,
            Some(_) => a.dtype("dtype")?,
        };
        a.finish()?;
        if !dtype.is_float() {
            return Err(TypeError::attr(
                "dtype",
                format!("expected \"f32\" or \"f64\", found \"{dtype}\""),
            ));
        }
        Ok(Arc::new(RandomDraw {
            distribution,
            shape,
            dtype,
        }) as Prim)
    });
    r.set_example(name, crate::ir::attrs_json(r#"{"shape": [2]}"#));
}

pub(crate) fn register(r: &mut Registry) {
    register_draw(r, "random_uniform", Distribution::Uniform);
    register_draw(r, "random_normal", Distribution::Normal);
}

/// A uniform or normal draw of the pool's dtype and a random shape, from a drawn key; a normal
/// draw is bounded by sqrt(-2 ln 2^-32) = sqrt(64 ln 2) < 6.67.
fn draw_random(d: &mut dyn Draw, dist: Distribution) -> Result<Drawn, DrawError> {
    let k = super::draw_key(d)?;
    let ty = TensorType::new(d.some_dtype(), d.shape());
    let range = match dist {
        Distribution::Uniform => Interval::new(0.0, 1.0),
        Distribution::Normal => Interval::symmetric(6.67),
    };
    d.same(range, |b| b.random(k, dist, &ty))
}
