//! Arrays of the storage dtypes (f16, bf16, the 8- and 4-bit floats, E8M0, i8 ... u64 and the
//! 4- and 2-bit integers): held in their own width (the sub-byte dtypes a byte per element),
//! moved, written and read, and converted; never computed with (`docs/dtypes.md`).

use half::{bf16, f16};

use super::float8::Format;
use super::{e8m0, Array, DType, Shape, TensorError};

/// An array of one of the storage dtypes.
#[derive(Clone, PartialEq)]
pub enum Stored {
    F16(Array<f16>),
    BF16(Array<bf16>),
    I8(Array<i8>),
    I16(Array<i16>),
    I32(Array<i32>),
    U8(Array<u8>),
    U16(Array<u16>),
    U32(Array<u32>),
    U64(Array<u64>),
    /// The 8-bit floats, as their bit patterns (`float8.rs`).
    F8E4M3FN(Array<u8>),
    F8E4M3FNUZ(Array<u8>),
    F8E5M2(Array<u8>),
    F8E5M2FNUZ(Array<u8>),
    /// The sub-byte integers, one value per byte (always in the dtype's range).
    I4(Array<i8>),
    U4(Array<u8>),
    I2(Array<i8>),
    U2(Array<u8>),
    /// E2M1 (its pattern in the low four bits) and E8M0, as their bit patterns.
    F4E2M1(Array<u8>),
    F8E8M0(Array<u8>),
}

/// `$body` with `$a` bound to the array, whatever the dtype.
macro_rules! each {
    ($s:expr, $a:ident => $body:expr) => {
        match $s {
            Stored::F16($a) => $body,
            Stored::BF16($a) => $body,
            Stored::I8($a) => $body,
            Stored::I16($a) => $body,
            Stored::I32($a) => $body,
            Stored::U8($a) => $body,
            Stored::U16($a) => $body,
            Stored::U32($a) => $body,
            Stored::U64($a) => $body,
            Stored::F8E4M3FN($a) => $body,
            Stored::F8E4M3FNUZ($a) => $body,
            Stored::F8E5M2($a) => $body,
            Stored::F8E5M2FNUZ($a) => $body,
            Stored::I4($a) => $body,
            Stored::U4($a) => $body,
            Stored::I2($a) => $body,
            Stored::U2($a) => $body,
            Stored::F4E2M1($a) => $body,
            Stored::F8E8M0($a) => $body,
        }
    };
}

/// The same operation on every variant, rebuilding the variant: `$f` maps an array to an array
/// of the same element type.
macro_rules! each_same {
    ($s:expr, $a:ident => $body:expr) => {
        match $s {
            Stored::F16($a) => Stored::F16($body),
            Stored::BF16($a) => Stored::BF16($body),
            Stored::I8($a) => Stored::I8($body),
            Stored::I16($a) => Stored::I16($body),
            Stored::I32($a) => Stored::I32($body),
            Stored::U8($a) => Stored::U8($body),
            Stored::U16($a) => Stored::U16($body),
            Stored::U32($a) => Stored::U32($body),
            Stored::U64($a) => Stored::U64($body),
            Stored::F8E4M3FN($a) => Stored::F8E4M3FN($body),
            Stored::F8E4M3FNUZ($a) => Stored::F8E4M3FNUZ($body),
            Stored::F8E5M2($a) => Stored::F8E5M2($body),
            Stored::F8E5M2FNUZ($a) => Stored::F8E5M2FNUZ($body),
            Stored::I4($a) => Stored::I4($body),
            Stored::U4($a) => Stored::U4($body),
            Stored::I2($a) => Stored::I2($body),
            Stored::U2($a) => Stored::U2($body),
            Stored::F4E2M1($a) => Stored::F4E2M1($body),
            Stored::F8E8M0($a) => Stored::F8E8M0($body),
        }
    };
}

/// How a dtype held as bit patterns decodes and encodes them.
#[derive(Clone, Copy)]
pub(crate) enum Codec {
    Float(Format),
    E8M0,
}

impl Codec {
    pub(crate) fn of(d: DType) -> Option<Codec> {
        match d {
            DType::F8E8M0 => Some(Codec::E8M0),
            d => Format::of(d).map(Codec::Float),
        }
    }

    pub(crate) fn decode(self, code: u8) -> f64 {
        match self {
            Codec::Float(f) => f.decode(code),
            Codec::E8M0 => e8m0::decode(code),
        }
    }

    pub(crate) fn encode(self, x: f64) -> u8 {
        match self {
            Codec::Float(f) => f.encode(x),
            Codec::E8M0 => e8m0::encode(x),
        }
    }

    /// The largest finite value.
    pub(crate) fn max(self) -> f64 {
        match self {
            Codec::Float(f) => f.max(),
            Codec::E8M0 => e8m0::max(),
        }
    }
}

/// The values of an array, exactly: floats as f64, integers as i128.
pub(crate) enum Values {
    Floats(Vec<f64>),
    Ints(Vec<i128>),
}

impl Stored {
    pub fn dtype(&self) -> DType {
        match self {
            Stored::F16(_) => DType::F16,
            Stored::BF16(_) => DType::BF16,
            Stored::I8(_) => DType::I8,
            Stored::I16(_) => DType::I16,
            Stored::I32(_) => DType::I32,
            Stored::U8(_) => DType::U8,
            Stored::U16(_) => DType::U16,
            Stored::U32(_) => DType::U32,
            Stored::U64(_) => DType::U64,
            Stored::F8E4M3FN(_) => DType::F8E4M3FN,
            Stored::F8E4M3FNUZ(_) => DType::F8E4M3FNUZ,
            Stored::F8E5M2(_) => DType::F8E5M2,
            Stored::F8E5M2FNUZ(_) => DType::F8E5M2FNUZ,
            Stored::I4(_) => DType::I4,
            Stored::U4(_) => DType::U4,
            Stored::I2(_) => DType::I2,
            Stored::U2(_) => DType::U2,
            Stored::F4E2M1(_) => DType::F4E2M1,
            Stored::F8E8M0(_) => DType::F8E8M0,
        }
    }

    pub fn shape(&self) -> &Shape {
        each!(self, a => a.shape())
    }

    pub fn reshaped(&self, shape: Shape) -> Stored {
        each_same!(self, a => a.reshaped(shape))
    }

    /// Entry `i` of the leading axis.
    pub fn row(&self, i: usize) -> Stored {
        each_same!(self, a => {
            let n = a.len() / a.dims()[0];
            Array::from_parts(
                Shape::new(a.dims()[1..].to_vec()),
                a.data()[i * n..(i + 1) * n].to_vec(),
            )
        })
    }

    /// The values, exactly (every f16 and bf16 is an f64, every integer an i128).
    pub(crate) fn values(&self) -> Values {
        match self {
            Stored::F16(a) => Values::Floats(a.data().iter().map(|x| x.to_f64()).collect()),
            Stored::BF16(a) => Values::Floats(a.data().iter().map(|x| x.to_f64()).collect()),
            Stored::I8(a) => Values::Ints(a.data().iter().map(|&x| x.into()).collect()),
            Stored::I16(a) => Values::Ints(a.data().iter().map(|&x| x.into()).collect()),
            Stored::I32(a) => Values::Ints(a.data().iter().map(|&x| x.into()).collect()),
            Stored::U8(a) => Values::Ints(a.data().iter().map(|&x| x.into()).collect()),
            Stored::U16(a) => Values::Ints(a.data().iter().map(|&x| x.into()).collect()),
            Stored::U32(a) => Values::Ints(a.data().iter().map(|&x| x.into()).collect()),
            Stored::U64(a) => Values::Ints(a.data().iter().map(|&x| x.into()).collect()),
            Stored::I4(a) | Stored::I2(a) => {
                Values::Ints(a.data().iter().map(|&x| x.into()).collect())
            }
            Stored::U4(a) | Stored::U2(a) => {
                Values::Ints(a.data().iter().map(|&x| x.into()).collect())
            }
            coded => {
                let codec = Codec::of(coded.dtype()).expect("a dtype held as patterns");
                Values::Floats(coded.codes().iter().map(|&c| codec.decode(c)).collect())
            }
        }
    }

    /// The bit patterns of an array of 8-bit or 4-bit floats or E8M0 (empty for the others).
    fn codes(&self) -> &[u8] {
        match self {
            Stored::F8E4M3FN(a)
            | Stored::F8E4M3FNUZ(a)
            | Stored::F8E5M2(a)
            | Stored::F8E5M2FNUZ(a)
            | Stored::F4E2M1(a)
            | Stored::F8E8M0(a) => a.data(),
            _ => &[],
        }
    }

    /// An array of a dtype held as patterns, from its patterns.
    fn from_codes(dtype: DType, codes: Array<u8>) -> Stored {
        match dtype {
            DType::F8E4M3FN => Stored::F8E4M3FN(codes),
            DType::F8E4M3FNUZ => Stored::F8E4M3FNUZ(codes),
            DType::F8E5M2 => Stored::F8E5M2(codes),
            DType::F4E2M1 => Stored::F4E2M1(codes),
            DType::F8E8M0 => Stored::F8E8M0(codes),
            _ => Stored::F8E5M2FNUZ(codes),
        }
    }

    /// The values widened to f64 (exact for f16, bf16 and integers below 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.values() {
            Values::Floats(v) => v,
            Values::Ints(v) => v.into_iter().map(|x| x as f64).collect(),
        }
    }

    /// Floats rounded into a float dtype (to nearest, ties to even; E8M0 up); for an integer
    /// dtype, truncated toward zero, which must land in range, except that the sub-byte
    /// integers take NaN, infinities and values out of their range as 0.
    pub fn from_f64s(dtype: DType, shape: Shape, data: &[f64]) -> Result<Stored, String> {
        if dtype.is_floating_point() {
            return Ok(Stored::rounded(dtype, shape, data));
        }
        if is_sub_byte_int(dtype) {
            let (lo, hi) = int_range(dtype);
            let t = data.iter().map(|&x| {
                let t = x.trunc();
                if t >= lo as f64 && t <= hi as f64 {
                    t as i128
                } else {
                    0
                }
            });
            return Ok(Stored::from_ints(dtype, shape, &t.collect::<Vec<_>>()));
        }
        Ok(Stored::from_ints(dtype, shape, &truncate(dtype, data)?))
    }

    /// Floats into a storage dtype, saturating: rounded into a float dtype as
    /// [`from_f64s`](Self::from_f64s) does; truncated toward zero and clamped into an integer
    /// dtype's range (NaN is 0).
    pub fn saturating(dtype: DType, shape: Shape, data: &[f64]) -> Stored {
        if dtype.is_floating_point() {
            return Stored::rounded(dtype, shape, data);
        }
        let (lo, hi) = int_range(dtype);
        let clamped: Vec<i128> = data
            .iter()
            .map(|&x| {
                if x.is_nan() {
                    0
                } else {
                    x.trunc().clamp(lo as f64, hi as f64) as i128
                }
            })
            .collect();
        Stored::from_ints(dtype, shape, &clamped)
    }

    /// Every element `value`, saturated into the dtype as [`saturating`](Self::saturating) does.
    ///
    /// ```
    /// use catml_core::tensor::{DType, Shape, Stored};
    /// let s = Stored::full(DType::I4, Shape::new(vec![2]), 100.0);
    /// assert_eq!(s.to_f64_vec(), [7.0, 7.0]);
    /// ```
    pub fn full(dtype: DType, shape: Shape, value: f64) -> Stored {
        let one = Stored::saturating(dtype, Shape::new(vec![1]), &[value]);
        each_same!(one, a => Array::full(shape.clone(), a.data()[0]))
    }

    /// Floats rounded into a float storage dtype.
    fn rounded(dtype: DType, shape: Shape, data: &[f64]) -> Stored {
        if let Some(codec) = Codec::of(dtype) {
            let codes = array(shape, data.iter().map(|&x| codec.encode(x)));
            return Stored::from_codes(dtype, codes);
        }
        match dtype {
            DType::F16 => Stored::F16(array(shape, data.iter().map(|&x| f16::from_f64(x)))),
            _ => Stored::BF16(array(shape, data.iter().map(|&x| bf16::from_f64(x)))),
        }
    }

    /// Integers into a storage dtype, wrapping modulo 2^bits (two's complement) for an integer
    /// dtype, rounded to nearest for f16 and bf16.
    pub fn from_ints(dtype: DType, shape: Shape, data: &[i128]) -> Stored {
        let it = data.iter().copied();
        if let Some(codec) = Codec::of(dtype) {
            return Stored::from_codes(dtype, array(shape, it.map(|x| codec.encode(x as f64))));
        }
        match dtype {
            DType::F16 => Stored::F16(array(shape, it.map(|x| f16::from_f64(x as f64)))),
            DType::BF16 => Stored::BF16(array(shape, it.map(|x| bf16::from_f64(x as f64)))),
            DType::I8 => Stored::I8(array(shape, it.map(|x| x as i8))),
            DType::I16 => Stored::I16(array(shape, it.map(|x| x as i16))),
            DType::I32 => Stored::I32(array(shape, it.map(|x| x as i32))),
            DType::U8 => Stored::U8(array(shape, it.map(|x| x as u8))),
            DType::U16 => Stored::U16(array(shape, it.map(|x| x as u16))),
            DType::U32 => Stored::U32(array(shape, it.map(|x| x as u32))),
            // The low bits, sign-extended for the signed ones.
            DType::I4 => Stored::I4(array(shape, it.map(|x| (x as i8) << 4 >> 4))),
            DType::U4 => Stored::U4(array(shape, it.map(|x| x as u8 & 0xf))),
            DType::I2 => Stored::I2(array(shape, it.map(|x| (x as i8) << 6 >> 6))),
            DType::U2 => Stored::U2(array(shape, it.map(|x| x as u8 & 0x3))),
            _ => Stored::U64(array(shape, it.map(|x| x as u64))),
        }
    }

    /// How many elements are NaN or infinite.
    pub fn count_non_finite(&self) -> usize {
        match self {
            Stored::F16(a) => a.data().iter().filter(|x| !x.is_finite()).count(),
            Stored::BF16(a) => a.data().iter().filter(|x| !x.is_finite()).count(),
            s if s.dtype().is_floating_point() => {
                let codec = Codec::of(s.dtype()).expect("a dtype held as patterns");
                s.codes()
                    .iter()
                    .filter(|&&c| !codec.decode(c).is_finite())
                    .count()
            }
            _ => 0,
        }
    }

    /// The elements as little-endian bytes (the layout of safetensors and ONNX raw data); the
    /// sub-byte dtypes a byte per element: the signed integers sign-extended, E2M1 its pattern.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Stored::F16(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::BF16(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::I8(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::I16(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::I32(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::U8(a) => a.data().to_vec(),
            Stored::U16(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::U32(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::U64(a) => a.data().iter().flat_map(|x| x.to_le_bytes()).collect(),
            Stored::I4(a) | Stored::I2(a) => a.data().iter().map(|&x| x as u8).collect(),
            Stored::U4(a) | Stored::U2(a) => a.data().to_vec(),
            coded => coded.codes().to_vec(),
        }
    }

    /// Little-endian bytes of a storage dtype, laid out as [`to_le_bytes`](Self::to_le_bytes)
    /// writes them; their length must be the element count times the element size, and a
    /// sub-byte dtype's bytes must hold its values.
    pub fn from_le_bytes(dtype: DType, shape: Shape, bytes: &[u8]) -> Result<Stored, TensorError> {
        let n = shape
            .checked_numel()
            .ok_or_else(|| TensorError::InvalidShape(shape.clone()))?;
        if bytes.len() != n * dtype.size() {
            return Err(TensorError::Length {
                shape,
                expected: n,
                found: bytes.len() / dtype.size().max(1),
            });
        }
        macro_rules! read {
            ($t:ty, $n:literal) => {
                array(
                    shape,
                    bytes
                        .chunks_exact($n)
                        .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk of $n"))),
                )
            };
        }
        Ok(match dtype {
            DType::F16 => Stored::F16(read!(f16, 2)),
            DType::BF16 => Stored::BF16(read!(bf16, 2)),
            DType::I8 => Stored::I8(read!(i8, 1)),
            DType::I16 => Stored::I16(read!(i16, 2)),
            DType::I32 => Stored::I32(read!(i32, 4)),
            DType::U8 => Stored::U8(array(shape, bytes.iter().copied())),
            DType::U16 => Stored::U16(read!(u16, 2)),
            DType::U32 => Stored::U32(read!(u32, 4)),
            DType::U64 => Stored::U64(read!(u64, 8)),
            DType::I4 | DType::I2 | DType::U4 | DType::U2 | DType::F4E2M1 => {
                let (lo, hi) = match dtype {
                    DType::F4E2M1 => (0, 15),
                    d => int_range(d),
                };
                let signed = lo < 0;
                let value = |b: u8| {
                    i128::from(if signed {
                        i16::from(b as i8)
                    } else {
                        i16::from(b)
                    })
                };
                if let Some(index) = bytes.iter().position(|&b| !(lo..=hi).contains(&value(b))) {
                    return Err(TensorError::Element {
                        index,
                        byte: bytes[index],
                        dtype,
                    });
                }
                match dtype {
                    DType::I4 => Stored::I4(array(shape, bytes.iter().map(|&b| b as i8))),
                    DType::I2 => Stored::I2(array(shape, bytes.iter().map(|&b| b as i8))),
                    DType::U4 => Stored::U4(array(shape, bytes.iter().copied())),
                    DType::U2 => Stored::U2(array(shape, bytes.iter().copied())),
                    _ => Stored::F4E2M1(array(shape, bytes.iter().copied())),
                }
            }
            d if Codec::of(d).is_some() => {
                Stored::from_codes(d, array(shape, bytes.iter().copied()))
            }
            other => {
                return Err(TensorError::DType {
                    expected: DType::U8,
                    found: other,
                })
            }
        })
    }
}

/// Floats truncated toward zero into an integer dtype; a non-finite value or one out of the
/// dtype's range is an error naming the element.
pub(crate) fn truncate(dtype: DType, data: &[f64]) -> Result<Vec<i128>, String> {
    let (lo, hi) = int_range(dtype);
    data.iter()
        .enumerate()
        .map(|(i, &x)| {
            let t = x.trunc();
            if t.is_finite() && t >= lo as f64 && t <= hi as f64 {
                Ok(t as i128)
            } else {
                Err(format!("element {i}: {x} is not in the range of {dtype}"))
            }
        })
        .collect()
}

/// The smallest and largest value of an integer dtype.
pub(crate) fn int_range(dtype: DType) -> (i128, i128) {
    match dtype {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        DType::I4 => (-8, 7),
        DType::U4 => (0, 15),
        DType::I2 => (-2, 1),
        DType::U2 => (0, 3),
        _ => (0, 1),
    }
}

/// The 4-bit and 2-bit integers.
pub(crate) fn is_sub_byte_int(d: DType) -> bool {
    matches!(d, DType::I4 | DType::U4 | DType::I2 | DType::U2)
}

/// An array from values whose count the caller has matched to the shape.
fn array<T: Clone>(shape: Shape, data: impl Iterator<Item = T>) -> Array<T> {
    Array::from_parts(shape, data.collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sub_byte_value_has_one_byte_and_reads_back() {
        for (d, lo, hi) in [
            (DType::I4, -8, 7),
            (DType::U4, 0, 15),
            (DType::I2, -2, 1),
            (DType::U2, 0, 3),
        ] {
            let values: Vec<i128> = (lo..=hi).collect();
            let n = values.len();
            let s = Stored::from_ints(d, Shape::new(vec![n]), &values);
            let bytes = s.to_le_bytes();
            // Signed values are their two's complement byte: -1 is 0xff.
            let want: Vec<u8> = values.iter().map(|&v| v as i8 as u8).collect();
            assert_eq!(bytes, want, "{d}");
            let back = Stored::from_le_bytes(d, Shape::new(vec![n]), &bytes).unwrap();
            assert_eq!(
                back.to_f64_vec(),
                values.iter().map(|&v| v as f64).collect::<Vec<_>>()
            );
        }
        // Every E2M1 pattern is a byte below 16; E8M0 takes every byte.
        let codes: Vec<u8> = (0..16).collect();
        let e = Stored::from_le_bytes(DType::F4E2M1, Shape::new(vec![16]), &codes).unwrap();
        assert_eq!(e.to_le_bytes(), codes);
        assert_eq!(e.to_f64_vec()[7], 6.0);
        let all: Vec<u8> = (0..=255).collect();
        let m = Stored::from_le_bytes(DType::F8E8M0, Shape::new(vec![256]), &all).unwrap();
        assert_eq!(m.to_le_bytes(), all);
        assert_eq!(m.count_non_finite(), 1);
    }

    #[test]
    fn bytes_outside_a_sub_byte_dtype_are_refused_by_element() {
        let one = |d, b: u8| Stored::from_le_bytes(d, Shape::new(vec![2]), &[0, b]);
        for (d, bad) in [
            (DType::I4, 0x08),
            (DType::I4, 0xf7),
            (DType::U4, 0x10),
            (DType::I2, 0x02),
            (DType::U2, 0x04),
            (DType::F4E2M1, 0x10),
        ] {
            let e = one(d, bad).err().expect("a refused byte").to_string();
            assert!(e.starts_with("element 1:") && e.contains(d.as_str()), "{e}");
        }
        assert!(one(DType::I4, 0xf8).is_ok(), "-8");
    }

    #[test]
    fn full_saturates_one_value_into_every_dtype() {
        let s = |d, v| Stored::full(d, Shape::new(vec![2]), v).to_f64_vec();
        assert_eq!(s(DType::I4, -100.0), [-8.0, -8.0]);
        assert_eq!(s(DType::U2, f64::NAN), [0.0, 0.0]);
        assert_eq!(s(DType::F4E2M1, 2.6), [3.0, 3.0]);
        assert_eq!(s(DType::U8, 255.9), [255.0, 255.0]);
    }
}
