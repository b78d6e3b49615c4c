//! A store of named tensors (parameters, optimiser state) with safetensors I/O, so weights move
//! to and from the Python ecosystem.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, View};

use super::{DType, Stored, Tensor};

/// Why a store could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("safetensors: {0}")]
    Format(String),
    #[error(
        "tensor `{name}` has dtype {dtype}, which catml does not read or write in safetensors"
    )]
    UnsupportedDType { name: String, dtype: String },
}

/// An ordered map (by name) of named tensors.
///
/// ```
/// use catml_core::tensor::{Params, Tensor};
/// let mut p = Params::new();
/// p.insert("lin1.b", Tensor::f32([2], vec![0.5, -1.0]).unwrap());
/// let bytes = p.to_safetensors().unwrap();
/// assert_eq!(Params::from_safetensors(&bytes).unwrap(), p);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    map: BTreeMap<String, Tensor>,
}

struct Bytes<'a>(&'a Tensor);

impl View for Bytes<'_> {
    fn dtype(&self) -> Dtype {
        SAFETENSORS_DTYPES
            .iter()
            .find(|(d, _)| *d == self.0.dtype())
            .map_or(Dtype::U8, |(_, s)| *s)
    }
    fn shape(&self) -> &[usize] {
        self.0.dims()
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Owned(match self.0 {
            Tensor::F32(a) => a.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
            Tensor::F64(a) => a.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
            Tensor::I64(a) => a.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
            Tensor::Bool(a) => a.data().iter().map(|&v| u8::from(v)).collect(),
            Tensor::Stored(st) => st.to_le_bytes(),
        })
    }
    fn data_len(&self) -> usize {
        self.0.numel() * self.0.dtype().size()
    }
}

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, value: Tensor) -> Option<Tensor> {
        self.map.insert(name.into(), value)
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.map.get(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Tensor> {
        self.map.get_mut(name)
    }

    pub fn remove(&mut self, name: &str) -> Option<Tensor> {
        self.map.remove(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Total number of elements.
    pub fn numel(&self) -> usize {
        self.map.values().map(Tensor::numel).sum()
    }

    /// The safetensors encoding, with optional string metadata; a tensor of a dtype safetensors
    /// does not have (the sub-byte ones) is refused by name.
    pub fn to_safetensors_with(
        &self,
        metadata: Option<HashMap<String, String>>,
    ) -> Result<Vec<u8>, ParamsError> {
        if let Some((name, t)) = self
            .map
            .iter()
            .find(|(_, t)| !SAFETENSORS_DTYPES.iter().any(|(d, _)| *d == t.dtype()))
        {
            return Err(ParamsError::UnsupportedDType {
                name: name.clone(),
                dtype: t.dtype().to_string(),
            });
        }
        let views = self.map.iter().map(|(k, v)| (k.clone(), Bytes(v)));
        safetensors::serialize(views, metadata).map_err(|e| ParamsError::Format(e.to_string()))
    }

    pub fn to_safetensors(&self) -> Result<Vec<u8>, ParamsError> {
        self.to_safetensors_with(None)
    }

    /// Decodes a safetensors buffer (f32, f64, i64 and bool tensors).
    pub fn from_safetensors(bytes: &[u8]) -> Result<Params, ParamsError> {
        Ok(Self::from_safetensors_with_metadata(bytes)?.0)
    }

    /// Decodes a buffer and returns its string metadata too.
    pub fn from_safetensors_with_metadata(
        bytes: &[u8],
    ) -> Result<(Params, HashMap<String, String>), ParamsError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| ParamsError::Format(e.to_string()))?;
        let (_, meta) =
            SafeTensors::read_metadata(bytes).map_err(|e| ParamsError::Format(e.to_string()))?;
        let metadata = meta.metadata().clone().unwrap_or_default();
        let mut out = Params::new();
        for (name, view) in st.tensors() {
            let shape = view.shape().to_vec();
            let data = view.data();
            let tensor = match view.dtype() {
                Dtype::F32 => Tensor::f32(
                    shape,
                    data.chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                        .collect(),
                ),
                Dtype::F64 => Tensor::f64(
                    shape,
                    data.chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                        .collect(),
                ),
                Dtype::I64 => Tensor::i64(
                    shape,
                    data.chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                        .collect(),
                ),
                Dtype::BOOL => match data.iter().position(|&v| v > 1) {
                    Some(i) => {
                        return Err(ParamsError::Format(format!(
                            "tensor `{name}`: bool element {i} is the byte {}, expected 0 or 1",
                            data[i]
                        )))
                    }
                    None => Tensor::bool(shape, data.iter().map(|&v| v == 1).collect()),
                },
                other => match stored_dtype(other) {
                    Some(d) => Stored::from_le_bytes(d, shape.into(), data).map(Tensor::Stored),
                    None => {
                        return Err(ParamsError::UnsupportedDType {
                            name,
                            dtype: format!("{other:?}"),
                        })
                    }
                },
            }
            .map_err(|e| ParamsError::Format(format!("tensor `{name}`: {e}")))?;
            out.insert(name, tensor);
        }
        Ok((out, metadata))
    }

    /// Writes the store atomically: a temporary file beside `path`, then a rename, so a failed
    /// write leaves no partial file.
    pub fn save(&self, path: &Path) -> Result<(), ParamsError> {
        write_atomic(path, &self.to_safetensors()?)
    }

    pub fn load(path: &Path) -> Result<Params, ParamsError> {
        let bytes = std::fs::read(path).map_err(|source| ParamsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Params::from_safetensors(&bytes)
    }
}

/// Writes bytes to `path` through a temporary sibling and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ParamsError> {
    let io = |source| ParamsError::Io {
        path: path.display().to_string(),
        source,
    };
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

impl FromIterator<(String, Tensor)> for Params {
    fn from_iter<I: IntoIterator<Item = (String, Tensor)>>(iter: I) -> Params {
        Params {
            map: iter.into_iter().collect(),
        }
    }
}

impl<'a> IntoIterator for &'a Params {
    type Item = (&'a String, &'a Tensor);
    type IntoIter = std::collections::btree_map::Iter<'a, String, Tensor>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

/// Each dtype and its safetensors dtype. safetensors has no 4-bit or 2-bit integers, and packs
/// its 4-bit float two to a byte: the sub-byte dtypes are not written.
const SAFETENSORS_DTYPES: [(DType, Dtype); 18] = [
    (DType::F32, Dtype::F32),
    (DType::F64, Dtype::F64),
    (DType::I64, Dtype::I64),
    (DType::Bool, Dtype::BOOL),
    (DType::F16, Dtype::F16),
    (DType::BF16, Dtype::BF16),
    (DType::I8, Dtype::I8),
    (DType::I16, Dtype::I16),
    (DType::I32, Dtype::I32),
    (DType::U8, Dtype::U8),
    (DType::U16, Dtype::U16),
    (DType::U32, Dtype::U32),
    (DType::U64, Dtype::U64),
    (DType::F8E4M3FN, Dtype::F8_E4M3),
    (DType::F8E4M3FNUZ, Dtype::F8_E4M3FNUZ),
    (DType::F8E5M2, Dtype::F8_E5M2),
    (DType::F8E5M2FNUZ, Dtype::F8_E5M2FNUZ),
    (DType::F8E8M0, Dtype::F8_E8M0),
];

/// The storage dtype of a safetensors dtype.
fn stored_dtype(d: Dtype) -> Option<DType> {
    SAFETENSORS_DTYPES
        .iter()
        .find(|(_, s)| *s == d)
        .map(|(d, _)| *d)
        .filter(|d| d.is_storage())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_byte_tensors_are_refused_by_name_and_e8m0_round_trips() {
        let mut p = Params::new();
        let four = Tensor::i64([2], vec![-1, 7])
            .unwrap()
            .convert(DType::I4)
            .unwrap();
        p.insert("q", four);
        let e = p.to_safetensors().unwrap_err().to_string();
        assert!(e.contains("`q`") && e.contains("i4"), "{e}");
        let mut p = Params::new();
        let scale = Tensor::f32([2], vec![0.5, 8.0]).unwrap();
        p.insert("s", scale.convert(DType::F8E8M0).unwrap());
        let back = Params::from_safetensors(&p.to_safetensors().unwrap()).unwrap();
        assert_eq!(back, p);
    }
}
