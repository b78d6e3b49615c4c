use std::collections::BTreeSet;

use serde_json::Value;

use super::primitive::{Attrs, TypeError};
use crate::tensor::{DType, Shape};

/// Reads a primitive's attributes with typed errors naming the key, and rejects keys nobody read.
///
/// ```
/// use catml_core::ir::AttrReader;
/// let attrs = serde_json::json!({"rows": 2}).as_object().unwrap().clone();
/// let mut r = AttrReader::new(&attrs);
/// assert_eq!(r.usize("rows").unwrap(), 2);
/// r.finish().unwrap();
/// ```
pub struct AttrReader<'a> {
    attrs: &'a Attrs,
    seen: BTreeSet<&'a str>,
}

impl<'a> AttrReader<'a> {
    pub fn new(attrs: &'a Attrs) -> AttrReader<'a> {
        AttrReader {
            attrs,
            seen: BTreeSet::new(),
        }
    }

    /// The raw value, if present.
    pub fn get(&mut self, key: &'a str) -> Option<&'a Value> {
        self.seen.insert(key);
        self.attrs.get(key)
    }

    /// The raw value, required.
    pub fn require(&mut self, key: &'a str) -> Result<&'a Value, TypeError> {
        self.get(key).ok_or_else(|| TypeError::attr(key, "missing"))
    }

    /// The raw value, required; a missing key is reported with what was expected there.
    fn require_a(&mut self, key: &'a str, expected: &str) -> Result<&'a Value, TypeError> {
        self.get(key)
            .ok_or_else(|| TypeError::attr(key, format!("missing, expected {expected}")))
    }

    pub fn usize(&mut self, key: &'a str) -> Result<usize, TypeError> {
        as_usize(key, self.require_a(key, "a non-negative integer")?)
    }

    pub fn opt_usize(&mut self, key: &'a str) -> Result<Option<usize>, TypeError> {
        self.get(key).map(|v| as_usize(key, v)).transpose()
    }

    /// A boolean flag; absent means false.
    pub fn flag(&mut self, key: &'a str) -> Result<bool, TypeError> {
        match self.get(key) {
            None => Ok(false),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| TypeError::attr(key, format!("expected a boolean, found {v}"))),
        }
    }

    pub fn f64(&mut self, key: &'a str) -> Result<f64, TypeError> {
        let v = self.require_a(key, "a number")?;
        v.as_f64()
            .ok_or_else(|| TypeError::attr(key, format!("expected a number, found {}", found(v))))
    }

    pub fn usize_list(&mut self, key: &'a str) -> Result<Vec<usize>, TypeError> {
        as_usize_list(key, self.require_a(key, "a list of integers")?)
    }

    pub fn opt_usize_list(&mut self, key: &'a str) -> Result<Option<Vec<usize>>, TypeError> {
        self.get(key).map(|v| as_usize_list(key, v)).transpose()
    }

    /// A shape: a list of positive dimensions whose element count fits.
    pub fn shape(&mut self, key: &'a str) -> Result<Shape, TypeError> {
        let shape = Shape::new(self.usize_list(key)?);
        if shape.checked_numel().is_none() {
            return Err(TypeError::attr(
                key,
                format!("invalid shape {shape}: dimensions must be positive and the element count must fit"),
            ));
        }
        Ok(shape)
    }

    pub fn dtype(&mut self, key: &'a str) -> Result<DType, TypeError> {
        let v = self.require_a(key, "\"f32\", \"f64\" or \"i64\"")?;
        v.as_str().and_then(DType::parse).ok_or_else(|| {
            TypeError::attr(
                key,
                format!("expected \"f32\", \"f64\" or \"i64\", found {v}"),
            )
        })
    }

    pub fn string(&mut self, key: &'a str) -> Result<&'a str, TypeError> {
        let v = self.require_a(key, "a string")?;
        v.as_str()
            .ok_or_else(|| TypeError::attr(key, format!("expected a string, found {}", found(v))))
    }

    /// Fails on any key that was not read.
    pub fn finish(self) -> Result<(), TypeError> {
        match self.attrs.keys().find(|k| !self.seen.contains(k.as_str())) {
            Some(k) => Err(TypeError::attr(k, "unknown attribute")),
            None => Ok(()),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What was found, for messages: scalars with their value, containers by kind.
fn found(v: &Value) -> String {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::String(_) => format!("the string {v}"),
        Value::Array(_) | Value::Object(_) => kind(v).to_string(),
    }
}

fn as_usize(key: &str, v: &Value) -> Result<usize, TypeError> {
    match v.as_u64() {
        Some(n) => {
            usize::try_from(n).map_err(|_| TypeError::attr(key, format!("{n} is too large")))
        }
        None => Err(TypeError::attr(
            key,
            format!("expected a non-negative integer, found {}", found(v)),
        )),
    }
}

fn as_usize_list(key: &str, v: &Value) -> Result<Vec<usize>, TypeError> {
    let items = v.as_array().ok_or_else(|| {
        TypeError::attr(
            key,
            format!("expected a list of integers, found {}", found(v)),
        )
    })?;
    items.iter().map(|x| as_usize(key, x)).collect()
}

/// Attributes from key-value pairs (for `Primitive::attrs`).
pub fn attrs_of<const N: usize>(pairs: [(&str, Value); N]) -> Attrs {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Attributes from a JSON object literal written in the source (an example instance's).
///
/// # Panics
/// If `json` is not a JSON object: a defect in the literal, not an input.
pub fn attrs_json(json: &str) -> Attrs {
    match serde_json::from_str(json) {
        Ok(Value::Object(m)) => m,
        _ => panic!("attrs_json: not a JSON object literal: {json}"),
    }
}
