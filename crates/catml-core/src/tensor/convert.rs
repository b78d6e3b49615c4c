//! Conversion between dtypes, the semantics of the `convert` primitive (`docs/dtypes.md`):
//! floats round to nearest (ties to even); floats become integers by truncation toward zero and
//! must land in range; integers wrap modulo 2^bits into a narrower integer; a bool is 0 or 1 and
//! any number becomes the bool x != 0 (NaN is true).

use super::stored::{truncate, Stored, Values};
use super::{Array, DType, Tensor};

impl Tensor {
    /// This tensor's values in another dtype; an error names the first element a float to
    /// integer conversion cannot hold.
    ///
    /// ```
    /// use catml_core::tensor::{DType, Tensor};
    /// let x = Tensor::f32([3], vec![-1.5, 300.0, 2.9]).unwrap();
    /// assert_eq!(x.convert(DType::I16).unwrap().to_f64_vec(), [-1.0, 300.0, 2.0]);
    /// assert!(x.convert(DType::U8).is_err()); // -1 and 300 are out of range
    /// let h = x.convert(DType::F16).unwrap();
    /// assert_eq!(h.convert(DType::F32).unwrap().to_f64_vec(), [-1.5, 300.0, 2.900390625]);
    /// ```
    pub fn convert(&self, to: DType) -> Result<Tensor, String> {
        self.convert_with(to, false)
    }

    /// [`convert`](Self::convert); with `saturate`, a float target takes values beyond its
    /// largest finite value (infinities included) as that value of their sign (NaN stays NaN).
    ///
    /// ```
    /// use catml_core::tensor::{DType, Tensor};
    /// let x = Tensor::f32([2], vec![1e6, f32::NEG_INFINITY]).unwrap();
    /// let s = x.convert_with(DType::F8E4M3FN, true).unwrap();
    /// assert_eq!(s.to_f64_vec(), [448.0, -448.0]);
    /// assert!(x.convert(DType::F8E4M3FN).unwrap().to_f64_vec()[0].is_nan());
    /// ```
    pub fn convert_with(&self, to: DType, saturate: bool) -> Result<Tensor, String> {
        if saturate && to.is_floating_point() {
            let max = largest_finite(to);
            let clamped = self.map_f64(|x| if x.is_nan() { x } else { x.clamp(-max, max) });
            return clamped.convert_with(to, false);
        }
        if self.dtype() == to {
            return Ok(self.clone());
        }
        let shape = self.shape().clone();
        // The conversions among the compute dtypes, element by element.
        match (self, to) {
            (Tensor::F32(a), DType::F64) => return Ok(Tensor::F64(a.map(|&v| v as f64))),
            (Tensor::F64(a), DType::F32) => return Ok(Tensor::F32(a.map(|&v| v as f32))),
            (Tensor::I64(a), DType::F32) => return Ok(Tensor::F32(a.map(|&v| v as f32))),
            (Tensor::I64(a), DType::F64) => return Ok(Tensor::F64(a.map(|&v| v as f64))),
            _ => {}
        }
        let values = match self {
            Tensor::F32(a) => Values::Floats(a.data().iter().map(|&v| v as f64).collect()),
            Tensor::F64(a) => Values::Floats(a.data().to_vec()),
            Tensor::I64(a) => Values::Ints(a.data().iter().map(|&v| v.into()).collect()),
            Tensor::Bool(a) => Values::Ints(a.data().iter().map(|&v| i128::from(v)).collect()),
            Tensor::Stored(s) => s.values(),
        };
        Ok(match (values, to) {
            (Values::Floats(v), DType::Bool) => Tensor::Bool(Array::from_parts(
                shape,
                v.iter().map(|&x| x != 0.0).collect::<Vec<_>>(),
            )),
            (Values::Ints(v), DType::Bool) => Tensor::Bool(Array::from_parts(
                shape,
                v.iter().map(|&x| x != 0).collect::<Vec<_>>(),
            )),
            (Values::Floats(v), DType::F32) => Tensor::F32(Array::from_parts(
                shape,
                v.iter().map(|&x| x as f32).collect::<Vec<_>>(),
            )),
            (Values::Ints(v), DType::F32) => Tensor::F32(Array::from_parts(
                shape,
                v.iter().map(|&x| x as f32).collect::<Vec<_>>(),
            )),
            (Values::Floats(v), DType::F64) => Tensor::F64(Array::from_parts(shape, v)),
            (Values::Ints(v), DType::F64) => Tensor::F64(Array::from_parts(
                shape,
                v.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            )),
            (Values::Floats(v), DType::I64) => Tensor::I64(Array::from_parts(
                shape,
                truncate(DType::I64, &v)?
                    .into_iter()
                    .map(|x| x as i64)
                    .collect::<Vec<_>>(),
            )),
            (Values::Ints(v), DType::I64) => Tensor::I64(Array::from_parts(
                shape,
                v.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            )),
            (Values::Floats(v), d) => Tensor::Stored(Stored::from_f64s(d, shape, &v)?),
            (Values::Ints(v), d) => Tensor::Stored(Stored::from_ints(d, shape, &v)),
        })
    }
}

/// The largest finite value of a float dtype.
fn largest_finite(d: DType) -> f64 {
    match d {
        DType::F32 => f32::MAX.into(),
        DType::F16 => half::f16::MAX.to_f64(),
        DType::BF16 => half::bf16::MAX.to_f64(),
        d => super::stored::Codec::of(d).map_or(f64::MAX, |c| c.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(t: &Tensor) -> Vec<f64> {
        t.to_f64_vec()
    }

    #[test]
    fn integers_wrap_into_narrower_integers_and_widen_exactly() {
        let x = Tensor::i64([4], vec![-1, 255, 256, 70000]).unwrap();
        assert_eq!(
            ints(&x.convert(DType::U8).unwrap()),
            [255.0, 255.0, 0.0, 112.0]
        );
        assert_eq!(
            ints(&x.convert(DType::I8).unwrap()),
            [-1.0, -1.0, 0.0, 112.0]
        );
        let u = x.convert(DType::U64).unwrap();
        assert_eq!(u.to_f64_vec()[0], u64::MAX as f64);
        assert_eq!(u.convert(DType::I64).unwrap(), x);
    }

    #[test]
    fn floats_round_to_nearest_even_in_half_precision() {
        // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties go to even, 1.
        let x = Tensor::f64(
            [3],
            vec![1.0 + 2f64.powi(-11), 65520.0, 1.0 + 3.0 * 2f64.powi(-11)],
        )
        .unwrap();
        let h = x.convert(DType::F16).unwrap();
        assert_eq!(h.dtype(), DType::F16);
        let back = h.convert(DType::F64).unwrap().to_f64_vec();
        assert_eq!(back[0], 1.0);
        assert!(
            back[1].is_infinite(),
            "65520 rounds past the largest f16, 65504"
        );
        assert_eq!(back[2], 1.0 + 2.0 * 2f64.powi(-10));
        // bfloat16 keeps f32's range with 8 significant bits.
        let b = Tensor::f32([1], vec![3.0e38])
            .unwrap()
            .convert(DType::BF16)
            .unwrap();
        let v = b.convert(DType::F32).unwrap().to_f64_vec()[0];
        assert!((v - 3.0e38).abs() / 3.0e38 < 2f64.powi(-8));
    }

    #[test]
    fn floats_truncate_into_integers_and_refuse_what_does_not_fit() {
        let x = Tensor::f32([3], vec![-2.7, 0.5, 2.7]).unwrap();
        assert_eq!(ints(&x.convert(DType::I32).unwrap()), [-2.0, 0.0, 2.0]);
        assert_eq!(ints(&x.convert(DType::I64).unwrap()), [-2.0, 0.0, 2.0]);
        let e = x.convert(DType::U16).unwrap_err();
        assert!(e.contains("element 0") && e.contains("u16"), "{e}");
        let nan = Tensor::f64([1], vec![f64::NAN]).unwrap();
        assert!(nan.convert(DType::I8).is_err());
        assert_eq!(nan.convert(DType::Bool).unwrap().to_f64_vec(), [1.0]);
    }

    #[test]
    fn sub_byte_integers_wrap_from_integers_and_zero_what_floats_cannot_hold() {
        let x = Tensor::i64([5], vec![-9, -8, 7, 8, 17]).unwrap();
        // Modulo 16, two's complement: -9 is 7, 8 is -8, 17 is 1.
        assert_eq!(
            ints(&x.convert(DType::I4).unwrap()),
            [7.0, -8.0, 7.0, -8.0, 1.0]
        );
        assert_eq!(
            ints(&x.convert(DType::U4).unwrap()),
            [7.0, 8.0, 7.0, 8.0, 1.0]
        );
        // Modulo 4: -9 is 3 (u2) and -1 (i2).
        assert_eq!(
            ints(&x.convert(DType::U2).unwrap()),
            [3.0, 0.0, 3.0, 0.0, 1.0]
        );
        assert_eq!(
            ints(&x.convert(DType::I2).unwrap()),
            [-1.0, 0.0, -1.0, 0.0, 1.0]
        );
        // Floats truncate toward zero; NaN, infinities and truncations out of range are 0.
        let f = Tensor::f64(
            [7],
            vec![-8.9, 7.9, 8.0, -9.0, f64::NAN, f64::INFINITY, -2.5],
        )
        .unwrap();
        assert_eq!(
            ints(&f.convert(DType::I4).unwrap()),
            [-8.0, 7.0, 0.0, 0.0, 0.0, 0.0, -2.0]
        );
        assert_eq!(
            ints(&f.convert(DType::U4).unwrap()),
            [0.0, 7.0, 8.0, 0.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(
            ints(&f.convert(DType::I2).unwrap()),
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0]
        );
        // Back to i64 exactly; saturating construction clamps instead.
        let u = Tensor::from_f64s(DType::U2, [2], vec![-5.0, 9.0]).unwrap();
        assert_eq!(ints(&u), [0.0, 3.0]);
        let b = Tensor::bool([2], vec![true, false]).unwrap();
        assert_eq!(ints(&b.convert(DType::I2).unwrap()), [1.0, 0.0]);
    }

    #[test]
    fn small_floats_round_saturate_and_keep_nan_as_their_formats_allow() {
        let x = Tensor::f32(
            [6],
            vec![0.48, 1.05, -3.5, 9.0, f32::NAN, f32::NEG_INFINITY],
        )
        .unwrap();
        let e = x.convert(DType::F4E2M1).unwrap();
        assert_eq!(e.to_f64_vec(), [0.5, 1.0, -4.0, 6.0, 0.0, -6.0]);
        // E8M0 rounds up to a power of two; with saturation zero is 2^-127 and inf 2^127.
        let s = Tensor::f32([5], vec![0.0, 0.124, 1.1, f32::INFINITY, f32::NAN]).unwrap();
        let m = s.convert_with(DType::F8E8M0, true).unwrap().to_f64_vec();
        assert_eq!(m[..4], [2f64.powi(-127), 0.125, 2.0, 2f64.powi(127)]);
        assert!(m[4].is_nan());
        assert!(s.convert(DType::F8E8M0).unwrap().to_f64_vec()[3].is_nan());
        let back = Tensor::full(&crate::tensor::TensorType::new(DType::F8E8M0, vec![1]), 3.0);
        assert_eq!(back.convert(DType::F32).unwrap().to_f64_vec(), [4.0]);
    }
}
