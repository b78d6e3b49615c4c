//! The TENSOR JSON form: `{"dtype": "f64", "shape": [..], "data": [..]}`, data flat and
//! row-major, dtype optional (default f64). JSON has no NaN or infinity, so a non-finite float
//! is written as one of the strings `"nan"`, `"inf"` and `"-inf"`, and read back from them.

use serde::de::Error as _;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::stored::int_range;
use super::{DType, Shape, Stored, Tensor};

/// The string for a non-finite float, `None` for a finite one.
fn non_finite_text(x: f64) -> Option<&'static str> {
    if x.is_nan() {
        Some("nan")
    } else if x == f64::INFINITY {
        Some("inf")
    } else if x == f64::NEG_INFINITY {
        Some("-inf")
    } else {
        None
    }
}

#[derive(Serialize)]
struct TensorOut<'a> {
    dtype: DType,
    shape: &'a [usize],
    data: DataOut<'a>,
}

/// Floats as numbers (f32 in its own shortest form), non-finite ones as strings.
struct Floats<'a, T>(&'a [T]);

impl<T: Copy + Serialize + Into<f64>> Serialize for Floats<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for &x in self.0 {
            match non_finite_text(x.into()) {
                Some(text) => seq.serialize_element(text)?,
                None => seq.serialize_element(&x)?,
            }
        }
        seq.end()
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum DataOut<'a> {
    F32(Floats<'a, f32>),
    F64(Floats<'a, f64>),
    I64(&'a [i64]),
    Bool(&'a [bool]),
    Unsigned(&'a [u64]),
}

impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let halves: Vec<f32>;
        let ints: Vec<i64>;
        let data = match self {
            Tensor::F32(a) => DataOut::F32(Floats(a.data())),
            Tensor::F64(a) => DataOut::F64(Floats(a.data())),
            Tensor::I64(a) => DataOut::I64(a.data()),
            Tensor::Bool(a) => DataOut::Bool(a.data()),
            Tensor::Stored(Stored::U64(a)) => DataOut::Unsigned(a.data()),
            // f16 and bf16 values are exactly f32s; the other integers fit i64.
            Tensor::Stored(st) if st.dtype().is_floating_point() => {
                halves = st.to_f64_vec().iter().map(|&x| x as f32).collect();
                DataOut::F32(Floats(&halves))
            }
            Tensor::Stored(st) => {
                ints = st.to_f64_vec().iter().map(|&x| x as i64).collect();
                DataOut::I64(&ints)
            }
        };
        TensorOut {
            dtype: self.dtype(),
            shape: self.dims(),
            data,
        }
        .serialize(s)
    }
}

/// One element as written: a number, or a string for a non-finite float.
/// Whether a finite f64 stays finite in a float dtype (after rounding).
fn in_range(dtype: DType, v: f64) -> bool {
    match dtype {
        // E2M1 saturates by itself: 7 and beyond would round past 6. E8M0 has no zero or sign.
        DType::F4E2M1 => return v.abs() < 7.0,
        DType::F8E8M0 if v <= 0.0 => return false,
        _ => {}
    }
    dtype == DType::F64
        || Tensor::f64([1], vec![v])
            .ok()
            .and_then(|t| t.convert(dtype).ok())
            .is_some_and(|t| t.count_non_finite() == 0)
}

#[derive(Deserialize, Serialize)]
#[serde(untagged)]
enum ElementIn {
    Number(serde_json::Number),
    Text(String),
    Truth(bool),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorIn {
    #[serde(default)]
    dtype: Option<DType>,
    shape: Vec<usize>,
    data: Vec<ElementIn>,
}

impl<'de> Deserialize<'de> for Tensor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tensor, D::Error> {
        let t = TensorIn::deserialize(d)?;
        let shape = Shape::new(t.shape);
        let n = shape.checked_numel().ok_or_else(|| {
            D::Error::custom(format!(
                "invalid shape {shape}: dimensions must be positive and the element count must fit"
            ))
        })?;
        if n != t.data.len() {
            return Err(D::Error::custom(format!(
                "data has {} elements but shape {shape} needs {n}",
                t.data.len()
            )));
        }
        let dtype = t.dtype.unwrap_or(DType::F64);
        let tensor = match dtype {
            d if d.is_storage() && !d.is_floating_point() => {
                let (lo, hi) = int_range(d);
                let data = t
                    .data
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        let v = match x {
                            ElementIn::Number(x) => x
                                .as_i64()
                                .map(i128::from)
                                .or_else(|| x.as_u64().map(i128::from)),
                            _ => None,
                        };
                        v.filter(|v| (lo..=hi).contains(v)).ok_or_else(|| {
                            D::Error::custom(format!(
                                "data[{i}]: {} is not a {d} integer",
                                serde_json::to_string(x).unwrap_or_default()
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Tensor::Stored(Stored::from_ints(d, shape, &data)))
            }
            DType::I64 => {
                let data = t
                    .data
                    .iter()
                    .enumerate()
                    .map(|(i, x)| match x {
                        ElementIn::Number(x) => x.as_i64().ok_or_else(|| {
                            D::Error::custom(format!("data[{i}]: {x} is not an i64 integer"))
                        }),
                        ElementIn::Text(x) => Err(D::Error::custom(format!(
                            "data[{i}]: \"{x}\" is not an i64 integer"
                        ))),
                        ElementIn::Truth(x) => Err(D::Error::custom(format!(
                            "data[{i}]: {x} is not an i64 integer"
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Tensor::i64(shape, data)
            }
            DType::Bool => {
                let data = t
                    .data
                    .iter()
                    .enumerate()
                    .map(|(i, x)| match x {
                        ElementIn::Truth(x) => Ok(*x),
                        ElementIn::Number(x) => Err(D::Error::custom(format!(
                            "data[{i}]: {x} is not a bool (write true or false)"
                        ))),
                        ElementIn::Text(x) => Err(D::Error::custom(format!(
                            "data[{i}]: \"{x}\" is not a bool (write true or false)"
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Tensor::bool(shape, data)
            }
            _ => {
                let data = t
                    .data
                    .iter()
                    .enumerate()
                    .map(|(i, x)| match x {
                        ElementIn::Number(x) => {
                            x.as_f64().filter(|v| in_range(dtype, *v)).ok_or_else(|| {
                                D::Error::custom(format!(
                                    "data[{i}]: {x} is out of range for {dtype} (write \
                                     non-finite numbers as \"nan\", \"inf\" or \"-inf\")"
                                ))
                            })
                        }
                        ElementIn::Text(x) => match x.as_str() {
                            "nan" => Ok(f64::NAN),
                            "inf" => Ok(f64::INFINITY),
                            "-inf" => Ok(f64::NEG_INFINITY),
                            _ => Err(D::Error::custom(format!(
                                "data[{i}]: \"{x}\" is not a number (the only strings are \
                                 \"nan\", \"inf\" and \"-inf\")"
                            ))),
                        },
                        ElementIn::Truth(x) => Err(D::Error::custom(format!(
                            "data[{i}]: {x} is not a number (convert bools with `convert`)"
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Tensor::from_f64s(dtype, shape, data)
            }
        };
        tensor.map_err(|e| D::Error::custom(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_byte_dtypes_round_trip_and_refuse_what_they_cannot_hold() {
        for text in [
            r#"{"dtype":"i4","shape":[3],"data":[-8,0,7]}"#,
            r#"{"dtype":"u2","shape":[2],"data":[0,3]}"#,
            r#"{"dtype":"f4e2m1","shape":[3],"data":[-6.0,0.5,1.5]}"#,
            r#"{"dtype":"f8e8m0","shape":[2],"data":[0.25,"nan"]}"#,
        ] {
            let t: Tensor = serde_json::from_str(text).unwrap();
            let back: Tensor = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                serde_json::to_string(&t).unwrap()
            );
        }
        for bad in [
            r#"{"dtype":"i4","shape":[1],"data":[8]}"#,
            r#"{"dtype":"u2","shape":[1],"data":[-1]}"#,
            r#"{"dtype":"f4e2m1","shape":[1],"data":[7]}"#,
            r#"{"dtype":"f8e8m0","shape":[1],"data":[0]}"#,
        ] {
            let e = serde_json::from_str::<Tensor>(bad).unwrap_err().to_string();
            assert!(e.starts_with("data[0]"), "{e}");
        }
    }

    #[test]
    fn round_trips_and_defaults_to_f64() {
        let t: Tensor = serde_json::from_str(r#"{"shape": [2], "data": [1, 2.5]}"#).unwrap();
        assert_eq!(t, Tensor::f64([2], vec![1.0, 2.5]).unwrap());
        let s = serde_json::to_string(&Tensor::f32([1], vec![0.1]).unwrap()).unwrap();
        assert_eq!(s, r#"{"dtype":"f32","shape":[1],"data":[0.1]}"#);
        let back: Tensor = serde_json::from_str(&s).unwrap();
        assert_eq!(back.as_f32().unwrap().data(), &[0.1f32]);
    }

    #[test]
    fn storage_dtypes_round_trip_and_check_their_range() {
        let u: Tensor = serde_json::from_str(
            r#"{"dtype": "u64", "shape": [2], "data": [0, 18446744073709551615]}"#,
        )
        .unwrap();
        assert_eq!(u.dtype(), DType::U64);
        let s = serde_json::to_string(&u).unwrap();
        assert_eq!(
            s,
            r#"{"dtype":"u64","shape":[2],"data":[0,18446744073709551615]}"#
        );
        let e = serde_json::from_str::<Tensor>(r#"{"dtype": "i8", "shape": [1], "data": [128]}"#)
            .unwrap_err();
        assert!(
            e.to_string().contains("data[0]: 128 is not a i8 integer"),
            "{e}"
        );
        let h: Tensor =
            serde_json::from_str(r#"{"dtype": "f16", "shape": [3], "data": [0.1, "-inf", 2]}"#)
                .unwrap();
        let s = serde_json::to_string(&h).unwrap();
        // 0.1 rounds to the f16 0.0999755859375, written as the shortest f32 text.
        assert_eq!(
            s,
            r#"{"dtype":"f16","shape":[3],"data":[0.099975586,"-inf",2.0]}"#
        );
        assert_eq!(serde_json::from_str::<Tensor>(&s).unwrap(), h);
        assert!(serde_json::from_str::<Tensor>(
            r#"{"dtype": "f16", "shape": [1], "data": [70000]}"#
        )
        .is_err());
    }

    #[test]
    fn non_finite_floats_are_the_strings_nan_inf_and_minus_inf() {
        let t = Tensor::f32([3], vec![f32::NAN, f32::INFINITY, -1.5]).unwrap();
        let s = serde_json::to_string(&t).unwrap();
        assert_eq!(
            s,
            r#"{"dtype":"f32","shape":[3],"data":["nan","inf",-1.5]}"#
        );
        let back: Tensor = serde_json::from_str(&s).unwrap();
        let d = back.as_f32().unwrap().data();
        assert!(d[0].is_nan() && d[1] == f32::INFINITY && d[2] == -1.5);
        let t: Tensor = serde_json::from_str(r#"{"shape": [1], "data": ["-inf"]}"#).unwrap();
        assert_eq!(t.to_f64_vec(), [f64::NEG_INFINITY]);
        let e = serde_json::from_str::<Tensor>(r#"{"shape": [1], "data": ["NaN"]}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"data[0]: "NaN" is not a number (the only strings are "nan", "inf" and "-inf")"#
        );
        let e =
            serde_json::from_str::<Tensor>(r#"{"dtype": "i64", "shape": [1], "data": ["inf"]}"#)
                .unwrap_err();
        assert_eq!(e.to_string(), r#"data[0]: "inf" is not an i64 integer"#);
    }

    #[test]
    fn bools_are_json_true_and_false() {
        let t = Tensor::bool([3], vec![true, false, true]).unwrap();
        let s = serde_json::to_string(&t).unwrap();
        assert_eq!(
            s,
            r#"{"dtype":"bool","shape":[3],"data":[true,false,true]}"#
        );
        assert_eq!(serde_json::from_str::<Tensor>(&s).unwrap(), t);
        let e = serde_json::from_str::<Tensor>(r#"{"dtype": "bool", "shape": [1], "data": [1]}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "data[0]: 1 is not a bool (write true or false)"
        );
        let e = serde_json::from_str::<Tensor>(r#"{"shape": [1], "data": [true]}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "data[0]: true is not a number (convert bools with `convert`)"
        );
    }

    #[test]
    fn rejects_wrong_length_and_zero_dims() {
        let e = serde_json::from_str::<Tensor>(r#"{"shape": [2], "data": [1]}"#).unwrap_err();
        assert_eq!(e.to_string(), "data has 1 elements but shape [2] needs 2");
        let e = serde_json::from_str::<Tensor>(r#"{"shape": [0], "data": []}"#).unwrap_err();
        assert!(e.to_string().starts_with("invalid shape [0]"), "{e}");
    }
}
