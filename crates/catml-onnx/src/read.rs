//! Decoding: bytes to a `ModelProto`, and `TensorProto`s to known values, with every length,
//! dimension and size checked before anything is allocated for it.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use catml_core::tensor::{Shape, Stored, Tensor};
use prost::Message;

use crate::konst::{dtype_of, elem, Const, Data};
use crate::packed;
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

/// Bits per element of the element types the reader decodes.
fn elem_bits(code: i32) -> Option<u32> {
    if let Some(b) = packed::bits(code) {
        return Some(b);
    }
    Some(match code {
        elem::UINT8 | elem::INT8 | elem::BOOL | elem::FLOAT8E8M0 => 8,
        elem::FLOAT8E4M3FN..=elem::FLOAT8E5M2FNUZ => 8,
        elem::UINT16 | elem::INT16 | elem::FLOAT16 | elem::BFLOAT16 => 16,
        elem::FLOAT | elem::INT32 | elem::UINT32 => 32,
        elem::DOUBLE | elem::INT64 | elem::UINT64 => 64,
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
    let bits = elem_bits(code).ok_or_else(|| {
        OnnxError::field(
            format!("{field}.data_type"),
            format!("{} tensors are not supported", elem::name(code)),
        )
    })?;
    // In memory every element takes at least a byte.
    let dims = checked_dims(&t.dims, bits.div_ceil(8) as usize, field)?;
    let numel: usize = dims.iter().product();
    let nbytes = packed::packed_len(numel, bits);
    if t.segment.is_some() {
        return Err(OnnxError::field(
            format!("{field}.segment"),
            "segmented tensors are not supported",
        ));
    }
    let external;
    let raw: &[u8] = if t.data_location == 1 {
        external = read_external(t, field, dir, nbytes)?;
        &external
    } else {
        &t.raw_data
    };
    let data = if t.data_location == 1 || !raw.is_empty() {
        if raw.len() != nbytes {
            return Err(OnnxError::field(
                format!("{field}.raw_data"),
                format!(
                    "has {} bytes but dims {:?} of {} need {nbytes}",
                    raw.len(),
                    dims,
                    elem::name(code),
                ),
            ));
        }
        decode_raw(code, raw, numel)
    } else {
        typed_data(t, code, numel, &dims)
    };
    let data = data.map_err(|(f, e)| OnnxError::field(format!("{field}.{f}"), e))?;
    Ok(Const {
        elem: code,
        dims,
        data,
    })
}

/// A decoding failure: the protobuf field (under the tensor's) and what is wrong.
type Bad = (String, String);

/// The elements of `raw_data` (its length checked against the dims).
fn decode_raw(code: i32, raw: &[u8], numel: usize) -> Result<Data, Bad> {
    fn chunks<const N: usize>(raw: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        raw.chunks_exact(N)
            .map(|c| c.try_into().expect("exact chunks"))
    }
    Ok(match code {
        elem::FLOAT => Data::F(
            chunks::<4>(raw)
                .map(|b| f32::from_le_bytes(b) as f64)
                .collect(),
        ),
        elem::DOUBLE => Data::F(chunks::<8>(raw).map(f64::from_le_bytes).collect()),
        elem::INT64 => Data::I(chunks::<8>(raw).map(i64::from_le_bytes).collect()),
        elem::BOOL => Data::I(raw.iter().map(|&b| (b != 0) as i64).collect()),
        _ => stored_data(code, &packed::unpack(code, raw, numel), numel, "raw_data")?,
    })
}

/// The elements of a storage dtype from little-endian bytes, a byte per sub-byte element,
/// decoded by the tensor layer.
fn stored_data(code: i32, bytes: &[u8], numel: usize, field: &str) -> Result<Data, Bad> {
    let bad = |e: String| (field.to_string(), e);
    let d = dtype_of(code)
        .filter(|d| d.is_storage())
        .ok_or_else(|| bad(format!("{} is not a storage type", elem::name(code))))?;
    if numel == 0 {
        return Ok(if d.is_floating_point() {
            Data::F(Vec::new())
        } else {
            Data::I(Vec::new())
        });
    }
    let s =
        Stored::from_le_bytes(d, Shape::new(vec![numel]), bytes).map_err(|e| bad(e.to_string()))?;
    Ok(Const::from_tensor(&Tensor::Stored(s)).data)
}

/// Entries of `int32_data` that each hold a byte (8-bit floats, E8M0, packed sub-byte
/// elements): each must be in 0..=255.
fn int32_bytes(t: &TensorProto) -> Result<Vec<u8>, Bad> {
    t.int32_data
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            u8::try_from(x).map_err(|_| (format!("int32_data[{i}]"), format!("{x} is not a byte")))
        })
        .collect()
}

/// The typed-field elements of a tensor without raw data, their count checked against the
/// dims.
fn typed_data(t: &TensorProto, code: i32, numel: usize, dims: &[usize]) -> Result<Data, Bad> {
    let count = |name: &str, found: usize, need: usize| -> Result<(), Bad> {
        if found == need {
            return Ok(());
        }
        let per = packed::bits(code)
            .map(|b| format!(" ({} packed to an entry)", 8 / b))
            .unwrap_or_default();
        Err((
            name.to_string(),
            format!(
                "has {found} entries but dims {dims:?} of {} need {need}{per}",
                elem::name(code)
            ),
        ))
    };
    match code {
        elem::FLOAT => {
            count("float_data", t.float_data.len(), numel)?;
            Ok(Data::F(t.float_data.iter().map(|&x| x as f64).collect()))
        }
        elem::DOUBLE => {
            count("double_data", t.double_data.len(), numel)?;
            Ok(Data::F(t.double_data.clone()))
        }
        elem::INT64 => {
            count("int64_data", t.int64_data.len(), numel)?;
            Ok(Data::I(t.int64_data.clone()))
        }
        elem::UINT32 | elem::UINT64 => {
            count("uint64_data", t.uint64_data.len(), numel)?;
            Ok(Data::I(t.uint64_data.iter().map(|&x| x as i64).collect()))
        }
        elem::BOOL => {
            count("int32_data", t.int32_data.len(), numel)?;
            Ok(Data::I(
                t.int32_data.iter().map(|&x| (x != 0) as i64).collect(),
            ))
        }
        // The 16-bit floats' bit patterns, one to an entry.
        elem::FLOAT16 | elem::BFLOAT16 => {
            count("int32_data", t.int32_data.len(), numel)?;
            let bytes: Vec<u8> = t
                .int32_data
                .iter()
                .flat_map(|&x| (x as u16).to_le_bytes())
                .collect();
            stored_data(code, &bytes, numel, "int32_data")
        }
        elem::FLOAT8E4M3FN..=elem::FLOAT8E8M0 | elem::UINT2 | elem::INT2 => {
            let need = packed::bits(code).map_or(numel, |b| packed::packed_len(numel, b));
            count("int32_data", t.int32_data.len(), need)?;
            let bytes = int32_bytes(t)?;
            stored_data(
                code,
                &packed::unpack(code, &bytes, numel),
                numel,
                "int32_data",
            )
        }
        _ => {
            count("int32_data", t.int32_data.len(), numel)?;
            Ok(Data::I(t.int32_data.iter().map(|&x| x as i64).collect()))
        }
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
