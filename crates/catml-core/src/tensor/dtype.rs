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
    /// The storage dtypes (see [`DType::is_storage`]): IEEE half precision, bfloat16, and the
    /// narrower and unsigned integers. Programs hold, move and `convert` them; arithmetic
    /// happens after a `convert` to f32, f64 or i64.
    F16,
    BF16,
    I8,
    I16,
    I32,
    U8,
    U16,
    U32,
    U64,
    /// The 8-bit floats (`docs/dtypes.md`): E4M3 without infinities, and its variant without
    /// negative zero (one NaN, 0x80); E5M2 as IEEE 754, and its variant without negative zero.
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    /// The sub-byte integers (`docs/dtypes.md`): 4-bit and 2-bit two's complement and
    /// unsigned, held one element per byte.
    I4,
    U4,
    I2,
    U2,
    /// E2M1, the 4-bit float of the OCP microscaling formats: no infinities, no NaN, largest 6.
    F4E2M1,
    /// E8M0, the unsigned power-of-two scale of the microscaling formats: 2^(code - 127), and
    /// NaN for the code 255; no zero, no sign.
    F8E8M0,
}

/// Every dtype, in declaration order.
pub const ALL_DTYPES: [DType; 23] = [
    DType::F32,
    DType::F64,
    DType::I64,
    DType::Bool,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
    DType::I4,
    DType::U4,
    DType::I2,
    DType::U2,
    DType::F4E2M1,
    DType::F8E8M0,
];

impl DType {
    /// The float dtypes arithmetic runs in: f32 and f64.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Every floating-point dtype: the 8-bit floats, f16, bf16, f32 and f64. Derivatives flow
    /// through these.
    pub fn is_floating_point(self) -> bool {
        matches!(
            self,
            DType::F16
                | DType::BF16
                | DType::F32
                | DType::F64
                | DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F4E2M1
                | DType::F8E8M0
        )
    }

    /// The storage dtypes: held, moved and converted, never computed with.
    ///
    /// ```
    /// use catml_core::tensor::DType;
    /// assert!(DType::F16.is_storage() && DType::U8.is_storage());
    /// assert!(!DType::F32.is_storage() && !DType::Bool.is_storage());
    /// ```
    pub fn is_storage(self) -> bool {
        !matches!(self, DType::F32 | DType::F64 | DType::I64 | DType::Bool)
    }

    /// The dtype a storage dtype computes in (f16 and bf16 in f32, integers in i64); itself
    /// for the others.
    pub fn compute(self) -> DType {
        match self {
            DType::F16
            | DType::BF16
            | DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F4E2M1
            | DType::F8E8M0 => DType::F32,
            DType::I4
            | DType::U4
            | DType::I2
            | DType::U2
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64 => DType::I64,
            d => d,
        }
    }

    /// Bytes per element in memory (the sub-byte dtypes take a byte each).
    pub fn size(self) -> usize {
        match self {
            DType::Bool
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2
            | DType::F4E2M1
            | DType::F8E8M0
            | DType::I8
            | DType::U8
            | DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Unit roundoff u = eps / 2 of the type (0 for integers).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F32 => f32::EPSILON as f64 / 2.0,
            DType::F64 => f64::EPSILON / 2.0,
            // 10 and 7 stored fraction bits.
            DType::F16 => 2f64.powi(-11),
            DType::BF16 => 2f64.powi(-8),
            DType::F8E4M3FN | DType::F8E4M3FNUZ => 2f64.powi(-4),
            DType::F8E5M2 | DType::F8E5M2FNUZ => 2f64.powi(-3),
            DType::F4E2M1 => 2f64.powi(-2),
            // No fraction bits, and conversion rounds up: up to a factor of 2.
            DType::F8E8M0 => 1.0,
            _ => 0.0,
        }
    }

    pub fn parse(s: &str) -> Option<DType> {
        ALL_DTYPES.into_iter().find(|d| d.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I2 => "i2",
            DType::U2 => "u2",
            DType::F4E2M1 => "f4e2m1",
            DType::F8E8M0 => "f8e8m0",
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
/// i64 arithmetic modulo 2^64, for kernels that add or multiply i64 values (`docs/dtypes.md`).
impl Element for std::num::Wrapping<i64> {
    fn gt_zero(&self) -> bool {
        self.0 > 0
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

    /// tanh of every element, in place.
    fn tanh_assign(buf: &mut [Self]) {
        for v in buf {
            *v = v.tanh();
        }
    }

    /// Whether any element is NaN or infinite (vectorised for f32 and f64).
    fn any_non_finite(buf: &[Self]) -> bool {
        buf.iter().any(|x| !x.is_finite())
    }
}

impl Float for f32 {
    const DTYPE: DType = DType::F32;
    fn tanh_assign(buf: &mut [f32]) {
        super::fastmath::tanh_f32_in_place(buf)
    }
    fn any_non_finite(buf: &[f32]) -> bool {
        super::fastmath::any_non_finite_f32(buf)
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
    fn tanh_assign(buf: &mut [f64]) {
        super::fastmath::tanh_f64_in_place(buf)
    }
    fn any_non_finite(buf: &[f64]) -> bool {
        super::fastmath::any_non_finite_f64(buf)
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
