//! Integer operators on program values (graph inputs): the core's i64 arithmetic, wrapping
//! modulo 2^64 and truncating division. Expected values are the `onnx` reference's
//! (`ReferenceEvaluator`, onnx 1.23.2) on the same graph, which agree with working by hand.

use crate::common::*;
use crate::import_recurrent::ints_init;
use catml_core::interp::eval;
use catml_core::tensor::{DType, Tensor};
use catml_onnx::{import, OnnxError, Shapes};

const MIN: i64 = i64::MIN;
const MAX: i64 = i64::MAX;

fn i64s(v: &[i64]) -> Tensor {
    Tensor::i64([v.len()], v.to_vec()).unwrap()
}

fn values(t: &Tensor) -> Vec<i64> {
    t.as_i64().expect("an i64 output").data().to_vec()
}

#[test]
fn int64_inputs_through_arithmetic_comparisons_and_reductions() {
    let mut mod1 = node("Mod", &["a", "b"], &["m1"]);
    mod1.attribute = vec![int_attr("fmod", 1)];
    let mut rs = node("ReduceSum", &["a"], &["rs"]);
    rs.attribute = vec![int_attr("keepdims", 0)];
    let nodes = vec![
        node("Add", &["a", "b"], &["s"]),
        node("Sub", &["a", "b"], &["d"]),
        node("Mul", &["a", "b"], &["p"]),
        node("Div", &["a", "b"], &["q"]),
        node("Mod", &["a", "b"], &["m0"]),
        mod1,
        node("Less", &["a", "b"], &["lt"]),
        node("Where", &["lt", "a", "b"], &["w"]),
        node("Neg", &["a"], &["n"]),
        node("Abs", &["a"], &["ab"]),
        node("Max", &["a", "b"], &["mx"]),
        rs,
        node("CumSum", &["a", "ax"], &["cs"]),
        node("Add", &["a", "c"], &["ac"]),
        node("Clip", &["a", "lo", "hi"], &["cl"]),
    ];
    let outs = [
        "s", "d", "p", "q", "m0", "m1", "w", "n", "ab", "mx", "rs", "cs", "ac", "cl",
    ];
    let m = model(
        nodes,
        vec![
            value_info("a", 7, &[4]),
            value_info("b", 7, &[4]),
            value_info("c", 7, &[1]),
        ],
        outs.iter().map(|o| value_info(o, 7, &[])).collect(),
        vec![
            ints_init("ax", 7, &[], &[0]),
            ints_init("lo", 7, &[], &[-3]),
            ints_init("hi", 7, &[], &[5]),
        ],
    );
    let im = import(&m, &Shapes::new(), None).unwrap();
    assert_eq!(
        im.program.inputs().len(),
        3,
        "a, b and c stay program values"
    );
    let got = eval(
        &im.program,
        &[i64s(&[7, -7, 7, MAX]), i64s(&[2, 2, -2, 1]), i64s(&[10])],
    )
    .unwrap();
    let want: [&[i64]; 14] = [
        &[9, -5, 5, MIN],
        &[5, -9, 9, MAX - 1],
        &[14, -14, -14, MAX],
        &[3, -3, -3, MAX],
        &[1, 1, -1, 0],
        &[1, -1, 1, 0],
        &[2, -7, -2, 1],
        &[-7, 7, -7, -MAX],
        &[7, 7, 7, MAX],
        &[7, 2, 7, MAX],
        &[MIN + 6],
        &[7, 0, 7, MIN + 6],
        &[17, 3, 17, MIN + 9],
        &[5, -3, 5, 5],
    ];
    for ((name, t), w) in outs.iter().zip(&got).zip(want) {
        assert_eq!(values(t), w, "output {name}");
    }
}

#[test]
fn narrow_integer_results_wrap_in_their_own_width() {
    // int32 Add and Mul compute in i64 and convert back modulo 2^32; uint8 Sub modulo 2^8.
    let m = model(
        vec![
            node("Add", &["a", "b"], &["s"]),
            node("Mul", &["a", "b"], &["p"]),
            node("Sub", &["u", "v"], &["d"]),
        ],
        vec![
            value_info("a", 6, &[2]),
            value_info("b", 6, &[2]),
            value_info("u", 2, &[2]),
            value_info("v", 2, &[2]),
        ],
        vec![
            value_info("s", 6, &[2]),
            value_info("p", 6, &[2]),
            value_info("d", 2, &[2]),
        ],
        vec![],
    );
    let im = import(&m, &Shapes::new(), None).unwrap();
    let i32s = |v: &[i64]| {
        Tensor::i64([2], v.to_vec())
            .unwrap()
            .convert(DType::I32)
            .unwrap()
    };
    let u8s = |v: &[i64]| {
        Tensor::i64([2], v.to_vec())
            .unwrap()
            .convert(DType::U8)
            .unwrap()
    };
    let got = eval(
        &im.program,
        &[
            i32s(&[i32::MAX as i64, -3]),
            i32s(&[1, 65_536]),
            u8s(&[1, 200]),
            u8s(&[2, 100]),
        ],
    )
    .unwrap();
    assert_eq!(got[0].dtype(), DType::I32);
    assert_eq!(got[0].to_f64_vec(), [i32::MIN as f64, 65_533.0]);
    // 2^31 - 1 and -3 · 2^16 = -196608
    assert_eq!(got[1].to_f64_vec(), [i32::MAX as f64, -196_608.0]);
    assert_eq!(got[2].dtype(), DType::U8);
    assert_eq!(got[2].to_f64_vec(), [255.0, 100.0]);
}

#[test]
fn integer_division_by_zero_is_an_error_naming_the_node() {
    let m = model(
        vec![node("Div", &["a", "b"], &["q"])],
        vec![value_info("a", 7, &[2]), value_info("b", 7, &[2])],
        vec![value_info("q", 7, &[2])],
        vec![],
    );
    let im = import(&m, &Shapes::new(), None).unwrap();
    let e = eval(&im.program, &[i64s(&[1, 2]), i64s(&[1, 0])])
        .unwrap_err()
        .to_string();
    // The program node carries the ONNX output's name.
    assert!(e.contains("`q` (div)"), "{e}");
    assert!(e.contains("operand 1 = 0 at element 1"), "{e}");
}

#[test]
fn uint64_program_values_are_not_ordered_as_i64() {
    let m = model(
        vec![node("Div", &["a", "b"], &["q"])],
        vec![value_info("a", 13, &[2]), value_info("b", 13, &[2])],
        vec![value_info("q", 13, &[2])],
        vec![],
    );
    let e = import(&m, &Shapes::new(), None).unwrap_err();
    assert!(matches!(e, OnnxError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("uint64"), "{e}");
}

#[test]
fn integer_operators_without_an_integer_meaning_still_need_floats() {
    let m = model(
        vec![node("Exp", &["a"], &["y"])],
        vec![value_info("a", 7, &[2])],
        vec![value_info("y", 7, &[2])],
        vec![],
    );
    let e = import(&m, &Shapes::new(), None).unwrap_err();
    assert!(matches!(e, OnnxError::Unsupported { .. }), "{e}");
}
