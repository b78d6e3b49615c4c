//! The sub-byte element types (int4, uint4, int2, uint2, float4e2m1) and float8e8m0 through the
//! importer: packed tensors read, Cast into and out of them, QuantizeLinear and
//! DequantizeLinear, and typed errors for malformed packing. Expected values are computed by
//! hand from `docs/dtypes.md`'s rules (which follow the ONNX reference implementation).

use crate::common::*;
use catml_core::tensor::{DType, Tensor};
use catml_onnx::proto::{attribute_proto::AttributeType, AttributeProto, ModelProto, TensorProto};
use catml_onnx::{import, Shapes};

const FLOAT: i32 = 1;
const UINT8: i32 = 2;
const INT8: i32 = 3;
const FLOAT8E4M3FN: i32 = 17;
const UINT4: i32 = 21;
const INT4: i32 = 22;
const FLOAT4E2M1: i32 = 23;
const FLOAT8E8M0: i32 = 24;
const UINT2: i32 = 25;
const FLOAT6E2M3: i32 = 27;

fn opset25(mut m: ModelProto) -> ModelProto {
    m.opset_import[0].version = 25;
    m
}

fn import_err(m: &ModelProto) -> String {
    import(m, &Shapes::new(), None).unwrap_err().to_string()
}

fn cast(to: i32, attrs: Vec<AttributeProto>) -> catml_onnx::proto::NodeProto {
    let mut n = node("Cast", &["x"], &["y"]);
    n.attribute.push(int_attr("to", to.into()));
    n.attribute.extend(attrs);
    n
}

/// y = Cast(x) of a float graph input x of `n` elements.
fn cast_input(to: i32, n: i64, attrs: Vec<AttributeProto>) -> ModelProto {
    opset25(model(
        vec![cast(to, attrs)],
        vec![value_info("x", FLOAT, &[n])],
        vec![value_info("y", to, &[n])],
        vec![],
    ))
}

/// y = Cast(x) of an initializer x.
fn cast_init(x: TensorProto, to: i32) -> ModelProto {
    let n = x.dims.iter().product::<i64>();
    opset25(model(
        vec![cast(to, vec![])],
        vec![],
        vec![value_info("y", to, &[n])],
        vec![x],
    ))
}

fn packed(code: i32, dims: &[i64], raw: &[u8]) -> TensorProto {
    TensorProto {
        name: "x".to_string(),
        dims: dims.to_vec(),
        data_type: code,
        raw_data: raw.to_vec(),
        ..Default::default()
    }
}

fn entries(code: i32, dims: &[i64], int32: &[i32]) -> TensorProto {
    TensorProto {
        name: "x".to_string(),
        dims: dims.to_vec(),
        data_type: code,
        int32_data: int32.to_vec(),
        ..Default::default()
    }
}

fn f32s(v: &[f32]) -> Tensor {
    Tensor::f32([v.len()], v.to_vec()).unwrap()
}

#[test]
fn packed_int4_raw_data_reads_low_nibble_first() {
    // 0x7f: -1 (0xf) then 7; 0x08: -8 then 0; 0x0a: -6 and a zero pad nibble.
    let y = run(
        &cast_init(packed(INT4, &[5], &[0x7f, 0x08, 0x0a]), INT8),
        vec![],
    );
    assert_eq!(y.dtype(), DType::I8);
    assert_eq!(y.to_f64_vec(), [-1.0, 7.0, -8.0, 0.0, -6.0]);
    let u = run(
        &cast_init(packed(UINT4, &[3], &[0x7f, 0x08]), UINT8),
        vec![],
    );
    assert_eq!(u.to_f64_vec(), [15.0, 7.0, 8.0]);
}

#[test]
fn packed_uint2_int32_data_holds_four_to_an_entry() {
    // 0b10_01_00_11 is 3, 0, 1, 2; the fifth element starts the next entry.
    let y = run(
        &cast_init(entries(UINT2, &[5], &[0b1001_0011, 1]), UINT8),
        vec![],
    );
    assert_eq!(y.to_f64_vec(), [3.0, 0.0, 1.0, 2.0, 1.0]);
}

#[test]
fn cast_to_int4_truncates_and_zeroes_what_it_cannot_hold() {
    let m = cast_input(INT4, 6, vec![]);
    let y = run(&m, vec![f32s(&[-8.9, 7.9, 8.0, -9.0, f32::NAN, -2.5])]);
    assert_eq!(y.dtype(), DType::I4);
    assert_eq!(y.to_f64_vec(), [-8.0, 7.0, 0.0, 0.0, 0.0, -2.0]);
}

#[test]
fn cast_to_float4e2m1_rounds_to_even_and_saturates() {
    let m = cast_input(FLOAT4E2M1, 6, vec![]);
    let y = run(
        &m,
        vec![f32s(&[0.48, 2.5, -3.5, 9.0, f32::NAN, f32::NEG_INFINITY])],
    );
    assert_eq!(y.dtype(), DType::F4E2M1);
    assert_eq!(y.to_f64_vec(), [0.5, 2.0, -4.0, 6.0, 0.0, -6.0]);
}

#[test]
fn cast_to_float8e8m0_rounds_up_and_refuses_other_round_modes() {
    let m = cast_input(FLOAT8E8M0, 4, vec![]);
    let y = run(&m, vec![f32s(&[0.0, 0.124, 1.1, f32::INFINITY])]);
    assert_eq!(y.dtype(), DType::F8E8M0);
    assert_eq!(
        y.to_f64_vec(),
        [2f64.powi(-127), 0.125, 2.0, 2f64.powi(127)]
    );
    let nearest = AttributeProto {
        name: "round_mode".to_string(),
        r#type: AttributeType::String as i32,
        s: b"nearest".to_vec(),
        ..Default::default()
    };
    let e = import_err(&cast_input(FLOAT8E8M0, 4, vec![nearest]));
    assert!(e.contains("round_mode") && e.contains("nearest"), "{e}");
}

fn quantize(zp: TensorProto, x: usize, attrs: Vec<AttributeProto>) -> ModelProto {
    let code = zp.data_type;
    let mut n = node("QuantizeLinear", &["x", "s", "z"], &["y"]);
    n.attribute.extend(attrs);
    opset25(model(
        vec![n],
        vec![value_info("x", FLOAT, &[x as i64])],
        vec![value_info("y", code, &[x as i64])],
        vec![
            floats("s", &[], &[2.0]),
            TensorProto {
                name: "z".to_string(),
                ..zp
            },
        ],
    ))
}

#[test]
fn quantize_to_int4_clips_to_its_range() {
    // round(x / 2) + 1: 1.25 -> 2, 2.4 -> 3, 4.3 -> 5, -15 + 1 and -10 + 1 clip to -8.
    let m = quantize(packed(INT4, &[], &[0x01]), 5, vec![]);
    let y = run(&m, vec![f32s(&[2.5, 4.8, 8.6, -30.0, -20.0])]);
    assert_eq!(y.dtype(), DType::I4);
    assert_eq!(y.to_f64_vec(), [2.0, 3.0, 5.0, -8.0, -8.0]);
}

#[test]
fn quantize_to_e4m3fn_saturates_unless_told_not_to() {
    // 100000 / 2 is past 448; 200 / 2 = 100 ties between 96 and 104 and goes to even, 96.
    let zp = || packed(FLOAT8E4M3FN, &[], &[0]);
    let y = run(
        &quantize(zp(), 3, vec![]),
        vec![f32s(&[1.0, 100000.0, 200.0])],
    );
    assert_eq!(y.dtype(), DType::F8E4M3FN);
    assert_eq!(y.to_f64_vec(), [0.5, 448.0, 96.0]);
    let m = quantize(zp(), 3, vec![int_attr("saturate", 0)]);
    let y = run(&m, vec![f32s(&[1.0, 100000.0, 200.0])]).to_f64_vec();
    assert!(y[1].is_nan());
}

#[test]
fn dequantize_float4e2m1_multiplies_by_the_scale() {
    // Patterns 0, 2, 0xa, 3, 0xe: 0, 1, -1, 1.5, -4; times 2.
    let x = TensorProto {
        name: "q".to_string(),
        ..entries(FLOAT4E2M1, &[5], &[0x20, 0x3a, 0x0e])
    };
    let m = opset25(model(
        vec![node("DequantizeLinear", &["q", "s"], &["y"])],
        vec![],
        vec![value_info("y", FLOAT, &[5])],
        vec![x, floats("s", &[], &[2.0])],
    ));
    let y = run(&m, vec![]);
    assert_eq!(y.to_f64_vec(), [0.0, 2.0, -2.0, 3.0, -8.0]);
}

#[test]
fn packing_that_disagrees_with_the_dims_is_a_typed_error() {
    // Five int4 elements take three bytes (or three int32 entries), not two.
    let e = import_err(&cast_init(packed(INT4, &[5], &[0x7f, 0x08]), INT8));
    assert!(
        e.contains("raw_data") && e.contains("has 2 bytes") && e.contains("need 3"),
        "{e}"
    );
    let e = import_err(&cast_init(entries(INT4, &[5], &[0x7f, 0x08]), INT8));
    assert!(e.contains("int32_data") && e.contains("need 3"), "{e}");
    // An entry of int32_data holds one byte of packed elements.
    let e = import_err(&cast_init(entries(UINT4, &[2], &[300]), UINT8));
    assert!(e.contains("int32_data[0]") && e.contains("300"), "{e}");
    // An element type the reader does not know names the field.
    let e = import_err(&cast_init(packed(FLOAT6E2M3, &[1], &[0]), FLOAT));
    assert!(e.contains("data_type") && e.contains("27"), "{e}");
}

#[test]
fn exported_sub_byte_parameters_pack_and_import_back() {
    use catml_core::ir::{Builder, InputKind};
    use catml_core::prim::Ops;
    use catml_core::tensor::{Params, TensorType};
    use catml_onnx::{decode_model, export, ExportOptions};
    use prost::Message;

    let mut b = Builder::new();
    let q = b
        .input("q", TensorType::new(DType::I4, vec![5]), InputKind::Param)
        .unwrap();
    let y = b.convert(q, DType::F32).unwrap();
    let p = b.finish(&[y]).unwrap();
    let values = Tensor::i64([5], vec![-1, 7, -8, 0, -6])
        .unwrap()
        .convert(DType::I4)
        .unwrap();
    let mut params = Params::new();
    params.insert("q", values);
    let e = export(&p, &params, &ExportOptions::default()).unwrap();
    let init = &e.model.graph.as_ref().unwrap().initializer[0];
    // Two to a byte, low nibble first: the same bytes as the packed reading test.
    assert_eq!(
        (init.data_type, &init.raw_data[..]),
        (INT4, &[0x7f, 0x08, 0x0a][..])
    );
    let back = decode_model(&e.model.encode_to_vec()).unwrap();
    let y = run(&back, vec![]);
    assert_eq!(y.to_f64_vec(), [-1.0, 7.0, -8.0, 0.0, -6.0]);
}
