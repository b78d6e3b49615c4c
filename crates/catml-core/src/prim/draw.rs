//! Operand helpers for drawing rules ([`crate::ir::draw`]) that build with primitives: scaling
//! to a magnitude, reshaping to a rank, index constants.

use std::sync::Arc;

use crate::ir::{Draw, DrawError, Drawn, Var};
use crate::prim::{Constant, Ops};
use crate::tensor::Tensor;

impl dyn Draw + '_ {
    /// `x` scaled by a power of two so its magnitude is at most `cap` (exact in floating point
    /// and over rationals).
    pub fn moderate(&mut self, x: Drawn, cap: f64) -> Result<Drawn, DrawError> {
        let m = x.range.mag();
        if m <= cap {
            return Ok(x);
        }
        let k = (m / cap).log2().ceil() as i32;
        let c = 2f64.powi(-k);
        let var = self.op(|b| b.scale(x.var, c))?;
        Ok(Drawn {
            var,
            range: x.range.scale(c),
        })
    }

    /// `x` as a matrix (reshaped to (a, b) with a·b = numel if it is not one).
    pub fn matrix(&mut self, x: Drawn) -> Result<Drawn, DrawError> {
        let ty = self.ty(x.var);
        if ty.rank() == 2 {
            return Ok(x);
        }
        let n = ty.numel();
        let divs: Vec<usize> = (1..=n).filter(|d| n % d == 0).collect();
        let a = divs[self.below(divs.len())];
        self.same(x.range, |b| b.reshape(x.var, [a, n / a]))
    }

    /// `x` with rank at least one (a scalar becomes shape `[1]`).
    pub fn ranked(&mut self, x: Drawn) -> Result<Drawn, DrawError> {
        if self.ty(x.var).rank() > 0 {
            return Ok(x);
        }
        self.same(x.range, |b| b.reshape(x.var, [1]))
    }

    /// `x` reshaped to `rank` dims: its numel's prime factors dealt to random dims.
    pub fn shaped(&mut self, x: Drawn, rank: usize) -> Result<Drawn, DrawError> {
        let mut dims = vec![1; rank];
        let mut n = self.ty(x.var).numel();
        let mut p = 2;
        while n > 1 {
            while n % p == 0 {
                let k = self.below(rank);
                dims[k] *= p;
                n /= p;
            }
            p += 1;
        }
        if *self.ty(x.var).dims() == dims[..] {
            return Ok(x);
        }
        self.same(x.range, |b| b.reshape(x.var, dims))
    }

    /// An i64 constant of these dims with values in 0..bound: indices and labels are runtime
    /// data, so keeping them valid is the drawing rule's job.
    pub fn indices(&mut self, dims: &[usize], bound: usize) -> Result<Var, DrawError> {
        let n: usize = dims.iter().product();
        let data: Vec<i64> = (0..n).map(|_| self.below(bound) as i64).collect();
        let t = Tensor::i64(dims.to_vec(), data).expect("numel values");
        self.apply(Arc::new(Constant::new(t)), &[])
    }

    /// Some axes of a rank-`rank` value (`None`: all), as for sum.
    pub fn some_axes(&mut self, rank: usize) -> Option<Vec<usize>> {
        if self.chance(0.3) {
            None
        } else {
            Some((0..rank).filter(|_| self.chance(0.5)).collect())
        }
    }

    /// A random shape of rank 0..=max_rank - 1 (room for one more trailing dim).
    pub fn index_dims(&mut self) -> Vec<usize> {
        let rank = self.int(0, self.max_rank().max(1) - 1);
        (0..rank).map(|_| self.int(1, self.max_dim())).collect()
    }

    /// The dtype of some value of the pool, else the program's.
    pub fn some_dtype(&mut self) -> crate::tensor::DType {
        match self.pick_where(&|_| true) {
            Some(v) => self.ty(v.var).dtype,
            None => self.dtype(),
        }
    }

    /// A value of rank >= 1 from the pool, moderated to `cap`, with a random axis.
    pub fn along_axis(&mut self, cap: f64) -> Result<(Drawn, usize), DrawError> {
        let x = self.pick();
        let x = self.moderate(x, cap)?;
        let x = self.ranked(x)?;
        let axis = self.below(self.ty(x.var).rank());
        Ok((x, axis))
    }
}
