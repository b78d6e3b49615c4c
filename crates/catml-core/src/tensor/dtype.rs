use std::fmt;
use std::ops::{Add, Mul, Neg, Sub};

use serde::{Deserialize, Serialize};

/// Element types. There are no implicit casts anywhere: `convert` is the only way between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F64,
    /// Integer indices (for `take`); kept out of arithmetic.
    I64,
    /// Truth values (comparisons, masks for `where`); kept out of arithmetic.
    Bool,
}

impl DType {
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// Unit roundoff u = eps / 2 of the type (0 for integers).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F32 => f32::EPSILON as f64 / 2.0,
            DType::F64 => f64::EPSILON / 2.0,
            DType::I64 | DType::Bool => 0.0,
        }
    }

    pub fn parse(s: &str) -> Option<DType> {
        match s {
            "f32" => Some(DType::F32),
            "f64" => Some(DType::F64),
            "i64" => Some(DType::I64),
            "bool" => Some(DType::Bool),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What every element type supports: the ring operations used by linear and structural kernels.
/// Implemented by `f32`, `f64`, `i64` and exact rationals, so one generic kernel serves all.
pub trait Element:
    Clone
    + fmt::Debug
    + PartialEq
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + num_traits::Zero
    + num_traits::One
{
    /// self > 0 (every element type is totally ordered on the values we hold).
    fn gt_zero(&self) -> bool;
}

impl Element for f32 {
    fn gt_zero(&self) -> bool {
        *self > 0.0
    }
}
impl Element for f64 {
    fn gt_zero(&self) -> bool {
        *self > 0.0
    }
}
impl Element for i64 {
    fn gt_zero(&self) -> bool {
        *self > 0
    }
}
impl Element for crate::tensor::Rational {
    fn gt_zero(&self) -> bool {
        num_traits::Signed::is_positive(self)
    }
}

/// Floating-point elements: the transcendental kernels and GEMM are generic over this.
pub trait Float: Element + Copy + num_traits::Float + 'static {
    const DTYPE: DType;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;

    /// tanh of every element (vectorised for f32 and f64, see `fastmath`).
    fn tanh_all(src: &[Self]) -> Vec<Self> {
        src.iter().map(|x| x.tanh()).collect()
    }

    /// tanh of every element, in place.
    fn tanh_assign(buf: &mut [Self]) {
        for v in buf {
            *v = v.tanh();
        }
    }
}

impl Float for f32 {
    const DTYPE: DType = DType::F32;
    fn tanh_all(src: &[f32]) -> Vec<f32> {
        super::fastmath::tanh_f32_slice(src)
    }
    fn tanh_assign(buf: &mut [f32]) {
        super::fastmath::tanh_f32_in_place(buf)
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Float for f64 {
    const DTYPE: DType = DType::F64;
    fn tanh_all(src: &[f64]) -> Vec<f64> {
        super::fastmath::tanh_f64_slice(src)
    }
    fn tanh_assign(buf: &mut [f64]) {
        super::fastmath::tanh_f64_in_place(buf)
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
}
