//! The TENSOR JSON form: `{"dtype": "f64", "shape": [..], "data": [..]}`, data flat and
//! row-major, dtype optional (default f64). Non-finite floats are the strings `"nan"`, `"inf"`
//! and `"-inf"`, both ways (JSON numbers cannot hold them).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{DType, Shape, Tensor};

#[derive(Serialize)]
struct TensorOut<'a> {
    dtype: DType,
    shape: &'a [usize],
    data: DataOut<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum DataOut<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I64(&'a [i64]),
    Mixed(Vec<serde_json::Value>),
}

/// A float element as JSON: a number, or its name if it is not finite.
fn float_json(v: f64) -> serde_json::Value {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        v.into()
    }
}

fn floats_out<'a, T: Copy + Into<f64>>(
    data: &'a [T],
    plain: impl Fn(&'a [T]) -> DataOut<'a>,
) -> DataOut<'a> {
    if data.iter().all(|&v| v.into().is_finite()) {
        plain(data)
    } else {
        DataOut::Mixed(data.iter().map(|&v| float_json(v.into())).collect())
    }
}

impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let data = match self {
            Tensor::F32(a) => floats_out(a.data(), DataOut::F32),
            Tensor::F64(a) => floats_out(a.data(), DataOut::F64),
            Tensor::I64(a) => DataOut::I64(a.data()),
        };
        TensorOut {
            dtype: self.dtype(),
            shape: self.dims(),
            data,
        }
        .serialize(s)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorIn {
    #[serde(default)]
    dtype: Option<DType>,
    shape: Vec<usize>,
    data: Vec<Element>,
}

/// A data element: a JSON number, or a non-finite float named `"nan"`, `"inf"`, `"-inf"`.
enum Element {
    Number(serde_json::Number),
    NonFinite(f64),
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Element, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Element;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON number or \"nan\", \"inf\", \"-inf\"")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Element, E> {
                Ok(Element::Number(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Element, E> {
                Ok(Element::Number(v.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Element, E> {
                serde_json::Number::from_f64(v)
                    .map(Element::Number)
                    .ok_or_else(|| E::custom("not a number"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Element, E> {
                match v {
                    "nan" => Ok(Element::NonFinite(f64::NAN)),
                    "inf" => Ok(Element::NonFinite(f64::INFINITY)),
                    "-inf" => Ok(Element::NonFinite(f64::NEG_INFINITY)),
                    _ => Err(E::invalid_type(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl std::fmt::Display for Element {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Element::Number(n) => write!(f, "{n}"),
            Element::NonFinite(v) => write!(f, "\"{v}\""),
        }
    }
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
            DType::I64 => {
                let data = t
                    .data
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        let n = match x {
                            Element::Number(n) => n.as_i64(),
                            Element::NonFinite(_) => None,
                        };
                        n.ok_or_else(|| {
                            D::Error::custom(format!("data[{i}]: {x} is not an i64 integer"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Tensor::i64(shape, data)
            }
            DType::F32 | DType::F64 => {
                let data = t
                    .data
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        let n = match x {
                            Element::NonFinite(v) => return Ok(*v),
                            Element::Number(n) => n.as_f64(),
                        };
                        n.filter(|v| dtype == DType::F64 || (*v as f32).is_finite())
                            .ok_or_else(|| {
                                D::Error::custom(format!("data[{i}]: {x} is not a finite {dtype}"))
                            })
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
    fn round_trips_and_defaults_to_f64() {
        let t: Tensor = serde_json::from_str(r#"{"shape": [2], "data": [1, 2.5]}"#).unwrap();
        assert_eq!(t, Tensor::f64([2], vec![1.0, 2.5]).unwrap());
        let s = serde_json::to_string(&Tensor::f32([1], vec![0.1]).unwrap()).unwrap();
        assert_eq!(s, r#"{"dtype":"f32","shape":[1],"data":[0.1]}"#);
        let back: Tensor = serde_json::from_str(&s).unwrap();
        assert_eq!(back.as_f32().unwrap().data(), &[0.1f32]);
    }

    #[test]
    fn non_finite_floats_travel_as_strings() {
        let t: Tensor =
            serde_json::from_str(r#"{"dtype": "f32", "shape": [3], "data": ["nan", "inf", -1]}"#)
                .unwrap();
        let d = t.as_f32().unwrap().data();
        assert!(d[0].is_nan() && d[1] == f32::INFINITY && d[2] == -1.0);
        let s = serde_json::to_string(&Tensor::f64([2], vec![f64::NEG_INFINITY, 0.5]).unwrap());
        assert_eq!(
            s.unwrap(),
            r#"{"dtype":"f64","shape":[2],"data":["-inf",0.5]}"#
        );
        let e =
            serde_json::from_str::<Tensor>(r#"{"dtype": "i64", "shape": [1], "data": ["nan"]}"#);
        assert!(e.unwrap_err().to_string().contains("not an i64"));
        let e = serde_json::from_str::<Tensor>(r#"{"shape": [1], "data": ["NaN"]}"#);
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("invalid type: string \"NaN\""));
    }

    #[test]
    fn rejects_wrong_length_and_zero_dims() {
        let e = serde_json::from_str::<Tensor>(r#"{"shape": [2], "data": [1]}"#).unwrap_err();
        assert_eq!(e.to_string(), "data has 1 elements but shape [2] needs 2");
        let e = serde_json::from_str::<Tensor>(r#"{"shape": [0], "data": []}"#).unwrap_err();
        assert!(e.to_string().starts_with("invalid shape [0]"), "{e}");
    }
}
