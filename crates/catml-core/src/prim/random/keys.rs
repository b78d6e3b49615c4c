//! Keys from keys, as JAX: random_split {"count": n} gives n keys (i64[n, 2]), key j the
//! Threefry block j under the operand key; random_fold_in {"data": d} gives one key (i64[2]),
//! the block d. Integers carry no derivative.

use crate::ir::{Draw, DrawError, Drawn, Interval};
use crate::prim::Ops;
use std::sync::Arc;

use super::key_operand;
use super::threefry::{fold_in, key_words, keys_array, rational_key_words, split};
use crate::ir::{
    AttrReader, Attrs, Budget, Builder, KernelError, Prim, Primitive, Registry, RuleError,
    TypeError, Var,
};
use crate::prim::dispatch::arity;
use crate::tensor::{DType, RArray, Rational, Tensor, TensorType};

/// What a key primitive makes of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOp {
    /// `count` keys, i64[count, 2].
    Split { count: usize },
    /// One key for `data`, `i64[2]`.
    FoldIn { data: u64 },
}

/// random_split or random_fold_in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomKey {
    pub op: KeyOp,
}

impl RandomKey {
    fn keys(&self, key: [u32; 2]) -> (Vec<[u32; 2]>, Vec<usize>) {
        match self.op {
            KeyOp::Split { count } => (split(key, count), vec![count, 2]),
            KeyOp::FoldIn { data } => (vec![fold_in(key, data)], vec![2]),
        }
    }
}

impl Primitive for RandomKey {
    fn name(&self) -> &str {
        match self.op {
            KeyOp::Split { .. } => "random_split",
            KeyOp::FoldIn { .. } => "random_fold_in",
        }
    }
    fn drawing(&self) -> Option<crate::ir::Drawing> {
        Some(crate::ir::Drawing::new(1, draw_key_op))
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
        Some(match self.op {
            KeyOp::Split { .. } => "key i64[2] to `count` keys i64[count, 2], key j = threefry(key, j) (docs/random.md)",
            KeyOp::FoldIn { .. } => "key i64[2] to the key threefry(key, `data`) (docs/random.md)",
        })
    }
    fn attrs(&self) -> Attrs {
        match self.op {
            KeyOp::Split { count } => crate::ir::attrs_of([("count", count.into())]),
            KeyOp::FoldIn { data } => crate::ir::attrs_of([("data", data.into())]),
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        arity(inputs, 1)?;
        key_operand(inputs, 0)?;
        Ok(match self.op {
            KeyOp::Split { count } => TensorType::new(DType::I64, [count, 2]),
            KeyOp::FoldIn { .. } => TensorType::new(DType::I64, [2]),
        })
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        let (keys, dims) = self.keys(key_words(x[0])?);
        Ok(Tensor::I64(keys_array(&keys, dims)))
    }
    fn has_rational_eval(&self) -> bool {
        true
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        Some(rational_key_words(x[0]).map(|k| {
            let (keys, dims) = self.keys(k);
            keys_array(&keys, dims).map(|v| Rational::from_integer((*v).into()))
        }))
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        Budget::Exact
    }
    fn flops(&self, _inputs: &[TensorType], output: &TensorType) -> u64 {
        // 20 rounds of three word operations per block.
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

pub(crate) fn register(r: &mut Registry) {
    r.register("random_split", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let count = a.usize("count")?;
        a.finish()?;
        if count == 0 || count > 1 << 24 {
            return Err(TypeError::attr(
                "count",
                format!("expected 1 <= count <= 2^24 keys, found {count}"),
            ));
        }
        Ok(Arc::new(RandomKey {
            op: KeyOp::Split { count },
        }) as Prim)
    });
    r.set_example("random_split", crate::ir::attrs_json(r#"{"count": 2}"#));
    r.register("random_fold_in", |attrs: &Attrs| {
        let mut a = AttrReader::new(attrs);
        let data = a.usize("data")? as u64;
        a.finish()?;
        Ok(Arc::new(RandomKey {
            op: KeyOp::FoldIn { data },
        }) as Prim)
    });
    r.set_example("random_fold_in", crate::ir::attrs_json(r#"{"data": 0}"#));
}

/// A uniform draw from one key of a split or from a folded key (keys are integers and never
/// enter the generator's pool of float values).
fn draw_key_op(d: &mut dyn Draw) -> Result<Drawn, DrawError> {
    let k = super::draw_key(d)?;
    let k = if d.chance(0.5) {
        let count = d.int(1, 3);
        let pick = d.below(count);
        let keys = d.op(|b| b.random_split(k, count))?;
        let row = d.op(|b| b.gather(keys, 0, vec![pick]))?;
        d.op(|b| b.reshape(row, [2]))?
    } else {
        let data = ((d.int(0, u32::MAX as usize) as u64) << 32
            | d.int(0, u32::MAX as usize) as u64)
            >> d.int(0, 63);
        d.op(|b| b.random_fold_in(k, data))?
    };
    let ty = TensorType::new(d.some_dtype(), d.shape());
    d.same(Interval::new(0.0, 1.0), |b| {
        b.random(k, crate::prim::Distribution::Uniform, &ty)
    })
}
