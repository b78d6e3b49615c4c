//! Values known at import time (constants, initializer values, shape arithmetic): any ONNX
//! element type the reader decodes, any shape (zero-sized included), folded without a program.

use catml_core::tensor::{DType, Stored, Tensor};

/// ONNX `TensorProto.DataType` codes the importer knows by name.
pub mod elem {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const STRING: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;
    pub const FLOAT8E4M3FN: i32 = 17;
    pub const FLOAT8E4M3FNUZ: i32 = 18;
    pub const FLOAT8E5M2: i32 = 19;
    pub const FLOAT8E5M2FNUZ: i32 = 20;
    pub const UINT4: i32 = 21;
    pub const INT4: i32 = 22;
    pub const FLOAT4E2M1: i32 = 23;
    pub const FLOAT8E8M0: i32 = 24;
    pub const UINT2: i32 = 25;
    pub const INT2: i32 = 26;

    /// The ONNX name of an element type code.
    pub fn name(code: i32) -> String {
        let known = match code {
            FLOAT => "float",
            UINT8 => "uint8",
            INT8 => "int8",
            UINT16 => "uint16",
            INT16 => "int16",
            INT32 => "int32",
            INT64 => "int64",
            STRING => "string",
            BOOL => "bool",
            FLOAT16 => "float16",
            DOUBLE => "double",
            UINT32 => "uint32",
            UINT64 => "uint64",
            14 => "complex64",
            15 => "complex128",
            BFLOAT16 => "bfloat16",
            FLOAT8E4M3FN => "float8e4m3fn",
            FLOAT8E4M3FNUZ => "float8e4m3fnuz",
            FLOAT8E5M2 => "float8e5m2",
            FLOAT8E5M2FNUZ => "float8e5m2fnuz",
            UINT4 => "uint4",
            INT4 => "int4",
            FLOAT4E2M1 => "float4e2m1",
            FLOAT8E8M0 => "float8e8m0",
            UINT2 => "uint2",
            INT2 => "int2",
            _ => return format!("element type {code}"),
        };
        known.to_string()
    }

    /// Whether values of this type are integers (bool included) held as i64 at import time.
    pub fn is_integer(code: i32) -> bool {
        matches!(
            code,
            UINT8
                | INT8
                | UINT16
                | INT16
                | INT32
                | INT64
                | BOOL
                | UINT32
                | UINT64
                | UINT4
                | INT4
                | UINT2
                | INT2
        )
    }
}

/// The CatML dtypes and their ONNX element type codes.
const CODES: [(DType, i32); 23] = [
    (DType::F32, elem::FLOAT),
    (DType::F64, elem::DOUBLE),
    (DType::I64, elem::INT64),
    (DType::Bool, elem::BOOL),
    (DType::F16, elem::FLOAT16),
    (DType::BF16, elem::BFLOAT16),
    (DType::I8, elem::INT8),
    (DType::I16, elem::INT16),
    (DType::I32, elem::INT32),
    (DType::U8, elem::UINT8),
    (DType::U16, elem::UINT16),
    (DType::U32, elem::UINT32),
    (DType::U64, elem::UINT64),
    (DType::F8E4M3FN, elem::FLOAT8E4M3FN),
    (DType::F8E4M3FNUZ, elem::FLOAT8E4M3FNUZ),
    (DType::F8E5M2, elem::FLOAT8E5M2),
    (DType::F8E5M2FNUZ, elem::FLOAT8E5M2FNUZ),
    (DType::I4, elem::INT4),
    (DType::U4, elem::UINT4),
    (DType::I2, elem::INT2),
    (DType::U2, elem::UINT2),
    (DType::F4E2M1, elem::FLOAT4E2M1),
    (DType::F8E8M0, elem::FLOAT8E8M0),
];

/// The CatML dtype of an ONNX element type, if the tensor layer has it.
pub fn dtype_of(code: i32) -> Option<DType> {
    CODES.iter().find(|(_, c)| *c == code).map(|(d, _)| *d)
}

/// The ONNX element type code of a CatML dtype.
pub fn code_of(dtype: DType) -> i32 {
    CODES
        .iter()
        .find(|(d, _)| *d == dtype)
        .map_or(0, |(_, c)| *c)
}

/// The elements of a known value: floats widened to f64, integers (and bools) as i64.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F(Vec<f64>),
    I(Vec<i64>),
}

/// A value known at import time.
#[derive(Debug, Clone, PartialEq)]
pub struct Const {
    /// The ONNX element type code.
    pub elem: i32,
    pub dims: Vec<usize>,
    pub data: Data,
}

impl Const {
    pub fn ints(elem: i32, dims: Vec<usize>, data: Vec<i64>) -> Const {
        Const {
            elem,
            dims,
            data: Data::I(data),
        }
    }

    pub fn floats(elem: i32, dims: Vec<usize>, data: Vec<f64>) -> Const {
        Const {
            elem,
            dims,
            data: Data::F(data),
        }
    }

    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_float(&self) -> bool {
        matches!(self.data, Data::F(_))
    }

    /// The elements as i64 (floats truncated toward zero).
    pub fn as_i64s(&self) -> Vec<i64> {
        match &self.data {
            Data::I(v) => v.clone(),
            Data::F(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }

    /// The elements as f64.
    pub fn as_f64s(&self) -> Vec<f64> {
        match &self.data {
            Data::I(v) => v.iter().map(|&x| x as f64).collect(),
            Data::F(v) => v.clone(),
        }
    }

    /// The CatML tensor of this value, or why the tensor layer cannot hold it.
    pub fn to_tensor(&self) -> Result<Tensor, String> {
        let dtype = dtype_of(self.elem).ok_or_else(|| {
            format!(
                "dtype {} is not held by the CatML tensor layer",
                elem::name(self.elem)
            )
        })?;
        if self.dims.contains(&0) {
            return Err(format!(
                "a tensor of shape {:?} has no elements, which CatML tensors cannot hold",
                self.dims
            ));
        }
        let t = match (&self.data, dtype) {
            (Data::F(v), DType::F32) => {
                Tensor::f32(self.dims.clone(), v.iter().map(|&x| x as f32).collect())
            }
            (Data::F(v), DType::F64) => Tensor::f64(self.dims.clone(), v.clone()),
            (Data::I(v), DType::I64) => Tensor::i64(self.dims.clone(), v.clone()),
            (Data::I(v), DType::Bool) => {
                Tensor::bool(self.dims.clone(), v.iter().map(|&x| x != 0).collect())
            }
            (Data::I(v), d) if d.is_storage() => Ok(Tensor::Stored(Stored::from_ints(
                d,
                self.dims.clone().into(),
                &v.iter().map(|&x| i128::from(x)).collect::<Vec<_>>(),
            ))),
            (Data::F(v), d) if d.is_storage() => Ok(Tensor::Stored(Stored::from_f64s(
                d,
                self.dims.clone().into(),
                v,
            )?)),
            _ => return Err("element data does not match its dtype".to_string()),
        };
        t.map_err(|e| e.to_string())
    }

    /// The known value of a CatML tensor.
    pub fn from_tensor(t: &Tensor) -> Const {
        let dims = t.dims().to_vec();
        match t.dtype() {
            DType::I64 => Const::ints(
                elem::INT64,
                dims,
                t.as_i64().map(|a| a.data().to_vec()).unwrap_or_default(),
            ),
            DType::Bool => Const::ints(
                elem::BOOL,
                dims,
                t.as_bool()
                    .map(|a| a.data().iter().map(|&x| i64::from(x)).collect())
                    .unwrap_or_default(),
            ),
            d if d.is_floating_point() => Const::floats(code_of(d), dims, t.to_f64_vec()),
            // Integers of every width are held as i64 (a u64 wraps, as `convert` does).
            d => Const::ints(
                code_of(d),
                dims,
                t.convert(DType::I64)
                    .ok()
                    .and_then(|w| w.as_i64().map(|a| a.data().to_vec()))
                    .unwrap_or_default(),
            ),
        }
    }
}
