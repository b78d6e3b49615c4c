//! Drawing random applications of primitives: the interface a random program generator offers
//! to each primitive's drawing rule ([`Primitive::drawing`](crate::ir::Primitive::drawing)).
//!
//! The generator owns the randomness and a pool of values, each with an [`Interval`] holding
//! its elements. A rule picks operands from the pool, draws attributes, applies its primitive
//! and returns the interval holding the result, sound by interval arithmetic, so that later
//! rules keep their operands inside admissible domains and away from overflow
//! (`docs/verification.md`). The interface knows no random number generator: a new primitive
//! is drawn by writing its rule beside its other rules, and nothing in the generator changes.

use std::sync::Arc;

use super::builder::{BuildError, Builder};
use super::primitive::{Prim, TypeError};
use super::program::Var;
use crate::tensor::{DType, TensorType};

/// An interval holding every element of a value: what a random program generator tracks to
/// keep operands inside admissible domains and away from overflow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    pub fn new(lo: f64, hi: f64) -> Interval {
        Interval { lo, hi }
    }

    /// max(|lo|, |hi|)
    pub fn mag(self) -> f64 {
        self.lo.abs().max(self.hi.abs())
    }

    pub fn hull(self, o: Interval) -> Interval {
        Interval::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }

    /// [a.lo + b.lo, a.hi + b.hi]
    pub fn plus(self, o: Interval) -> Interval {
        Interval::new(self.lo + o.lo, self.hi + o.hi)
    }

    /// [a.lo - b.hi, a.hi - b.lo]
    pub fn minus(self, o: Interval) -> Interval {
        Interval::new(self.lo - o.hi, self.hi - o.lo)
    }

    /// The hull of the four corner products.
    pub fn times(self, o: Interval) -> Interval {
        let c = [
            self.lo * o.lo,
            self.lo * o.hi,
            self.hi * o.lo,
            self.hi * o.hi,
        ];
        Interval::new(
            c.iter().cloned().fold(f64::INFINITY, f64::min),
            c.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        )
    }

    /// x ⊙ x for one value (both operands the same element): [0 or min², max²].
    pub fn square(self) -> Interval {
        let (a, b) = (self.lo * self.lo, self.hi * self.hi);
        if self.lo <= 0.0 && self.hi >= 0.0 {
            Interval::new(0.0, a.max(b))
        } else {
            Interval::new(a.min(b), a.max(b))
        }
    }

    pub fn negated(self) -> Interval {
        Interval::new(-self.hi, -self.lo)
    }

    /// c·x for c >= 0.
    pub fn scale(self, c: f64) -> Interval {
        Interval::new(self.lo * c, self.hi * c)
    }

    /// f applied to both ends, for nondecreasing f.
    pub fn increasing(self, f: impl Fn(f64) -> f64) -> Interval {
        Interval::new(f(self.lo), f(self.hi))
    }

    /// [-m, m]
    pub fn symmetric(m: f64) -> Interval {
        Interval::new(-m, m)
    }
}

/// A value in the generator's pool: its variable and an interval holding its elements whenever
/// the program's inputs lie in their intervals.
#[derive(Debug, Clone, Copy)]
pub struct Drawn {
    pub var: Var,
    pub range: Interval,
}

/// Why a drawing rule could not apply its primitive (a defect of the rule: rules draw only
/// operands and attributes that fit).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DrawError {
    #[error(transparent)]
    Type(#[from] TypeError),
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// What a random program generator offers a drawing rule: random numbers, its size limits, the
/// program being built and operands from its pool. Methods that add nodes may add helper nodes
/// (reshapes, scalings, constants) to fit operands.
pub trait Draw {
    /// An integer in `lo..=hi`, uniformly.
    fn int(&mut self, lo: usize, hi: usize) -> usize;
    /// A float in `lo..=hi`, uniformly.
    fn float(&mut self, lo: f64, hi: f64) -> f64;
    /// A float in `[0, 1)`, uniformly.
    fn unit(&mut self) -> f64;
    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool;
    /// The largest rank a drawn shape has.
    fn max_rank(&self) -> usize;
    /// The largest dimension a drawn shape has.
    fn max_dim(&self) -> usize;
    /// The program's float dtype.
    fn dtype(&self) -> DType;
    /// The type of a value of the program.
    fn ty(&self, v: Var) -> TensorType;
    /// The program being built.
    fn builder(&mut self) -> &mut Builder;
    /// Applies a primitive (the generator may give the node an unusual name).
    fn apply(&mut self, prim: Prim, operands: &[Var]) -> Result<Var, DrawError>;
    /// An operand from the pool: usually one of the latest values, else any.
    fn pick(&mut self) -> Drawn;
    /// A value of the pool whose type satisfies `pred`, if there is one.
    fn pick_where(&mut self, pred: &dyn Fn(&TensorType) -> bool) -> Option<Drawn>;
    /// A second operand of `x`'s type: `x` itself, another value of that type, or a constant.
    fn partner(&mut self, x: Drawn) -> Result<Drawn, DrawError>;
    /// A weight of this type: a value of the pool, a new parameter input, or a constant.
    fn weight(&mut self, ty: &TensorType) -> Result<Drawn, DrawError>;
    /// A constant of this type with elements in [-1, 1].
    fn constant_of(&mut self, ty: &TensorType) -> Result<Drawn, DrawError>;
    /// A value of `x`'s type whose elements are at least 0.1, made from `x` (moderated) when
    /// `x` is not already.
    fn positive(&mut self, x: Drawn) -> Result<Drawn, DrawError>;
}

/// The function of a drawing rule.
pub type DrawFn = dyn Fn(&mut dyn Draw) -> Result<Drawn, DrawError> + Send + Sync;

/// How a generator draws applications of a primitive: a relative frequency among the drawn
/// primitives and the rule that draws one application, attributes included.
#[derive(Clone)]
pub struct Drawing {
    pub weight: u32,
    rule: Arc<DrawFn>,
}

impl std::fmt::Debug for Drawing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Drawing(weight {})", self.weight)
    }
}

impl Drawing {
    pub fn new(
        weight: u32,
        rule: impl Fn(&mut dyn Draw) -> Result<Drawn, DrawError> + Send + Sync + 'static,
    ) -> Drawing {
        Drawing {
            weight,
            rule: Arc::new(rule),
        }
    }

    /// Draws one application onto the generator's program.
    pub fn draw(&self, d: &mut dyn Draw) -> Result<Drawn, DrawError> {
        (self.rule)(d)
    }
}

impl dyn Draw + '_ {
    /// A builder step as a pool value with this interval.
    pub fn same(
        &mut self,
        range: Interval,
        f: impl FnOnce(&mut Builder) -> Result<Var, TypeError>,
    ) -> Result<Drawn, DrawError> {
        let var = f(self.builder())?;
        Ok(Drawn { var, range })
    }

    /// A builder step.
    pub fn op(
        &mut self,
        f: impl FnOnce(&mut Builder) -> Result<Var, TypeError>,
    ) -> Result<Var, DrawError> {
        Ok(f(self.builder())?)
    }

    /// An index below `n`, uniformly.
    pub fn below(&mut self, n: usize) -> usize {
        self.int(0, n - 1)
    }

    /// A value on the grid of 1/256 in [lo, hi] (exact in f32, small over rationals).
    pub fn grid(&mut self, lo: f64, hi: f64) -> f64 {
        (self.float(lo, hi) * 256.0).round() / 256.0
    }

    /// A random shape: rank in 0..=max_rank, dims in 1..=max_dim.
    pub fn shape(&mut self) -> Vec<usize> {
        let rank = self.int(0, self.max_rank());
        (0..rank).map(|_| self.int(1, self.max_dim())).collect()
    }
}
