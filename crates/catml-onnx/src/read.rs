//! Decoding: bytes to a `ModelProto`, and `TensorProto`s to known values, with every length,
//! dimension and size checked before anything is allocated for it.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use catml_core::tensor::{Shape, Stored};
use prost::Message;

use crate::konst::{elem, Const, Data};
use crate::proto::{ModelProto, TensorProto};
use crate::OnnxError;

/// The largest tensor the reader decodes, in bytes (the evaluator's own limit).
pub const MAX_TENSOR_BYTES: u64 = catml_core::interp::MAX_VALUE_BYTES;

/// Decodes a serialized `ModelProto`.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto, OnnxError> {
    let model = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    if model.graph.is_none() {
        return Err(OnnxError::field("model.graph", "is missing"));
    }
    Ok(model)
}

/// Bytes per element of the element types the reader decodes.
fn elem_size(code: i32) -> Option<usize> {
    Some(match code {
        elem::UINT8 | elem::INT8 | elem::BOOL => 1,
        elem::FLOAT8E4M3FN..=elem::FLOAT8E5M2FNUZ => 1,
        elem::UINT16 | elem::INT16 | elem::FLOAT16 | elem::BFLOAT16 => 2,
        elem::FLOAT | elem::INT32 | elem::UINT32 => 4,
        elem::DOUBLE | elem::INT64 | elem::UINT64 => 8,
        _ => return None,
    })
}

/// The dimensions of a tensor, checked: non-negative and at most `MAX_TENSOR_BYTES` in all.
pub(crate) fn checked_dims(
    dims: &[i64],
    size: usize,
    field: &str,
) -> Result<Vec<usize>, OnnxError> {
    let mut numel: u64 = 1;
    let mut out = Vec::with_capacity(dims.len().min(64));
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 {
            return Err(OnnxError::field(
                format!("{field}.dims[{i}]"),
                format!("{d} is negative"),
            ));
        }
        numel = numel.saturating_mul(d as u64);
        out.push(d as usize);
    }
    let bytes = numel.saturating_mul(size as u64);
    if bytes > MAX_TENSOR_BYTES {
        return Err(OnnxError::field(
            format!("{field}.dims"),
            format!("{dims:?} would hold {bytes} bytes, more than the limit of {MAX_TENSOR_BYTES}"),
        ));
    }
    Ok(out)
}

/// Reads a `TensorProto` (`field` names it in errors; `dir` is where external data lives).
pub fn read_tensor(t: &TensorProto, field: &str, dir: Option<&Path>) -> Result<Const, OnnxError> {
    let code = t.data_type;
    let size = elem_size(code).ok_or_else(|| {
        OnnxError::field(
            format!("{field}.data_type"),
            format!("{} tensors are not supported", elem::name(code)),
        )
    })?;
    let dims = checked_dims(&t.dims, size, field)?;
    let numel: usize = dims.iter().product();
    if t.segment.is_some() {
        return Err(OnnxError::field(
            format!("{field}.segment"),
            "segmented tensors are not supported",
        ));
    }
    let external;
    let raw: &[u8] = if t.data_location == 1 {
        external = read_external(t, field, dir, numel * size)?;
        &external
    } else {
        &t.raw_data
    };
    if t.data_location == 1 || !raw.is_empty() {
        if raw.len() != numel * size {
            return Err(OnnxError::field(
                format!("{field}.raw_data"),
                format!(
                    "has {} bytes but dims {:?} of {} need {}",
                    raw.len(),
                    dims,
                    elem::name(code),
                    numel * size
                ),
            ));
        }
        return Ok(Const {
            elem: code,
            dims,
            data: decode_raw(code, raw),
        });
    }
    let (data, found, typed_field) = typed_data(t, code);
    if found != numel {
        return Err(OnnxError::field(
            format!("{field}.{typed_field}"),
            format!("has {found} elements but dims {dims:?} need {numel}"),
        ));
    }
    Ok(Const {
        elem: code,
        dims,
        data,
    })
}

fn decode_raw(code: i32, raw: &[u8]) -> Data {
    fn chunks<const N: usize>(raw: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        raw.chunks_exact(N)
            .map(|c| c.try_into().expect("exact chunks"))
    }
    match code {
        elem::FLOAT => Data::F(
            chunks::<4>(raw)
                .map(|b| f32::from_le_bytes(b) as f64)
                .collect(),
        ),
        elem::DOUBLE => Data::F(chunks::<8>(raw).map(f64::from_le_bytes).collect()),
        elem::FLOAT16 => Data::F(
            chunks::<2>(raw)
                .map(|b| half::f16::from_le_bytes(b).to_f64())
                .collect(),
        ),
        elem::BFLOAT16 => Data::F(
            chunks::<2>(raw)
                .map(|b| half::bf16::from_le_bytes(b).to_f64())
                .collect(),
        ),
        elem::FLOAT8E4M3FN..=elem::FLOAT8E5M2FNUZ => Data::F(float8_values(code, raw)),
        elem::UINT8 => Data::I(raw.iter().map(|&b| b as i64).collect()),
        elem::INT8 => Data::I(raw.iter().map(|&b| b as i8 as i64).collect()),
        elem::BOOL => Data::I(raw.iter().map(|&b| (b != 0) as i64).collect()),
        elem::UINT16 => Data::I(
            chunks::<2>(raw)
                .map(|b| u16::from_le_bytes(b) as i64)
                .collect(),
        ),
        elem::INT16 => Data::I(
            chunks::<2>(raw)
                .map(|b| i16::from_le_bytes(b) as i64)
                .collect(),
        ),
        elem::INT32 => Data::I(
            chunks::<4>(raw)
                .map(|b| i32::from_le_bytes(b) as i64)
                .collect(),
        ),
        elem::UINT32 => Data::I(
            chunks::<4>(raw)
                .map(|b| u32::from_le_bytes(b) as i64)
                .collect(),
        ),
        elem::UINT64 => Data::I(
            chunks::<8>(raw)
                .map(|b| u64::from_le_bytes(b) as i64)
                .collect(),
        ),
        _ => Data::I(chunks::<8>(raw).map(i64::from_le_bytes).collect()),
    }
}

/// The values of 8-bit float patterns (the tensor layer's decoding).
fn float8_values(code: i32, bytes: &[u8]) -> Vec<f64> {
    let Some(d) = crate::konst::dtype_of(code) else {
        return Vec::new();
    };
    Stored::from_le_bytes(d, Shape::new(vec![bytes.len()]), bytes)
        .map(|s| s.to_f64_vec())
        .unwrap_or_default()
}

/// The typed-field elements of a tensor without raw data, their count and the field's name.
fn typed_data(t: &TensorProto, code: i32) -> (Data, usize, &'static str) {
    match code {
        elem::FLOAT => (
            Data::F(t.float_data.iter().map(|&x| x as f64).collect()),
            t.float_data.len(),
            "float_data",
        ),
        elem::DOUBLE => (
            Data::F(t.double_data.clone()),
            t.double_data.len(),
            "double_data",
        ),
        elem::INT64 => (
            Data::I(t.int64_data.clone()),
            t.int64_data.len(),
            "int64_data",
        ),
        elem::UINT32 | elem::UINT64 => (
            Data::I(t.uint64_data.iter().map(|&x| x as i64).collect()),
            t.uint64_data.len(),
            "uint64_data",
        ),
        elem::FLOAT16 => (
            Data::F(
                t.int32_data
                    .iter()
                    .map(|&x| half::f16::from_bits(x as u16).to_f64())
                    .collect(),
            ),
            t.int32_data.len(),
            "int32_data",
        ),
        elem::BFLOAT16 => (
            Data::F(
                t.int32_data
                    .iter()
                    .map(|&x| half::bf16::from_bits(x as u16).to_f64())
                    .collect(),
            ),
            t.int32_data.len(),
            "int32_data",
        ),
        elem::FLOAT8E4M3FN..=elem::FLOAT8E5M2FNUZ => (
            Data::F(float8_values(
                code,
                &t.int32_data.iter().map(|&x| x as u8).collect::<Vec<_>>(),
            )),
            t.int32_data.len(),
            "int32_data",
        ),
        elem::BOOL => (
            Data::I(t.int32_data.iter().map(|&x| (x != 0) as i64).collect()),
            t.int32_data.len(),
            "int32_data",
        ),
        _ => (
            Data::I(t.int32_data.iter().map(|&x| x as i64).collect()),
            t.int32_data.len(),
            "int32_data",
        ),
    }
}

/// The bytes of a tensor stored outside the model: `location` relative to the model's folder
/// (no absolute paths, no `..`), from `offset`, exactly `expected` bytes.
fn read_external(
    t: &TensorProto,
    field: &str,
    dir: Option<&Path>,
    expected: usize,
) -> Result<Vec<u8>, OnnxError> {
    let at = format!("{field}.external_data");
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for e in &t.external_data {
        match e.key.as_str() {
            "location" => location = Some(e.value.clone()),
            "offset" => {
                offset = e.value.parse().map_err(|_| {
                    OnnxError::field(&at, format!("offset `{}` is not a count", e.value))
                })?
            }
            "length" => {
                length = Some(e.value.parse::<u64>().map_err(|_| {
                    OnnxError::field(&at, format!("length `{}` is not a count", e.value))
                })?)
            }
            _ => {}
        }
    }
    let location = location.ok_or_else(|| OnnxError::field(&at, "has no `location`"))?;
    let rel = Path::new(&location);
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(OnnxError::field(
            &at,
            format!("location `{location}` must be a relative path inside the model's folder"),
        ));
    }
    if let Some(len) = length {
        if len != expected as u64 {
            return Err(OnnxError::field(
                &at,
                format!("length {len} disagrees with the {expected} bytes the dims need"),
            ));
        }
    }
    let dir = dir.ok_or_else(|| {
        OnnxError::field(
            &at,
            format!("refers to `{location}`, but the model was not read from a file"),
        )
    })?;
    let path = dir.join(rel);
    let fail = |e: std::io::Error| OnnxError::field(&at, format!("{}: {e}", path.display()));
    let mut file = std::fs::File::open(&path).map_err(fail)?;
    let len = file.metadata().map_err(fail)?.len();
    if offset.saturating_add(expected as u64) > len {
        return Err(OnnxError::field(
            &at,
            format!(
                "{} has {len} bytes, fewer than offset {offset} plus the {expected} bytes the dims need",
                path.display()
            ),
        ));
    }
    file.seek(SeekFrom::Start(offset)).map_err(fail)?;
    let mut buf = vec![0u8; expected];
    file.read_exact(&mut buf).map_err(fail)?;
    Ok(buf)
}
