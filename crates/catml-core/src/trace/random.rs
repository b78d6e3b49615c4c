//! Value methods for counter-based random numbers (`docs/random.md`): a key is an i64[2]
//! value of two 32-bit words; [`key`](crate::prim::random::threefry::key) makes one from a
//! seed.

use std::panic::Location;
use std::sync::Arc;

use super::value::{apply_at, Value};
use crate::prim::{Distribution, Dropout, KeyOp, RandomDraw, RandomKey};
use crate::tensor::TensorType;

impl Value {
    fn draw(
        &self,
        at: super::error::CallSite,
        distribution: Distribution,
        ty: &TensorType,
    ) -> Value {
        let p = RandomDraw {
            distribution,
            shape: ty.shape.clone(),
            dtype: ty.dtype,
        };
        self.unary_at(at, Arc::new(p))
    }

    /// Uniform values on [0, 1) of type `ty`, drawn from this key.
    #[track_caller]
    pub fn random_uniform(&self, ty: &TensorType) -> Value {
        self.draw(Location::caller(), Distribution::Uniform, ty)
    }

    /// Standard normal values of type `ty`, drawn from this key.
    #[track_caller]
    pub fn random_normal(&self, ty: &TensorType) -> Value {
        self.draw(Location::caller(), Distribution::Normal, ty)
    }

    /// `count` keys (i64[count, 2]) split from this key.
    #[track_caller]
    pub fn random_split(&self, count: usize) -> Value {
        let p = RandomKey {
            op: KeyOp::Split { count },
        };
        self.unary_at(Location::caller(), Arc::new(p))
    }

    /// The key for `data` derived from this key.
    #[track_caller]
    pub fn random_fold_in(&self, data: u64) -> Value {
        let p = RandomKey {
            op: KeyOp::FoldIn { data },
        };
        self.unary_at(Location::caller(), Arc::new(p))
    }

    /// x · mask / (1 - rate) with the mask drawn from `key`; `rate` outside [0, 1) is an error.
    #[track_caller]
    pub fn dropout(&self, key: &Value, rate: f64) -> Value {
        // An invalid rate is refused by the type rule, which names it.
        apply_at(Location::caller(), Arc::new(Dropout { rate }), &[key, self])
    }
}
