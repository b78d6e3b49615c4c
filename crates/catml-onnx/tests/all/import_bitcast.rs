//! BitCast of values known at import and SpaceToDepth in both modes: values worked out by hand
//! (IEEE 754 bit patterns), and the refusals naming the node.

use crate::common::*;
use crate::import_recurrent::{ints_init, run_node, str_attr, t};
use catml_core::interp::eval;
use catml_core::tensor::Tensor;
use catml_onnx::proto::{NodeProto, TensorProto};
use catml_onnx::{import, OnnxError, Shapes};

fn bitcast(to: i64, x: TensorProto, out_elem: i32) -> Result<Tensor, OnnxError> {
    let mut n = node("BitCast", &["x"], &["Y"]);
    n.attribute = vec![int_attr("to", to)];
    let mut m = model(
        vec![n],
        vec![],
        vec![value_info("Y", out_elem, &[])],
        vec![x],
    );
    m.opset_import[0].version = 26;
    let im = import(&m, &Shapes::new(), None)?;
    // A float initializer is a parameter (its value known at import).
    let args: Vec<Tensor> = im
        .program
        .inputs()
        .iter()
        .map(|i| im.params.get(&i.name).unwrap().clone())
        .collect();
    Ok(eval(&im.program, &args).unwrap().remove(0))
}

#[test]
fn bitcast_reinterprets_known_bits() {
    // 0x3F800000 is 1.0f32, 0xBF800000 is -1.0f32.
    let y = bitcast(1, ints_init("x", 6, &[2], &[1065353216, -1082130432]), 1).unwrap();
    assert_eq!(y.to_f64_vec(), [1.0, -1.0]);
    let y = bitcast(6, floats("x", &[2], &[1.0, -2.0]), 6).unwrap();
    // -2.0f32 is 0xC0000000.
    assert_eq!(y.to_f64_vec(), [1065353216.0, -1073741824.0]);
    let y = bitcast(5, ints_init("x", 4, &[3], &[65535, 32768, 7]), 5).unwrap();
    assert_eq!(y.to_f64_vec(), [-1.0, -32768.0, 7.0]);
    let y = bitcast(2, ints_init("x", 9, &[2], &[1, 0]), 2).unwrap();
    assert_eq!(y.to_f64_vec(), [1.0, 0.0]);
    // 1.0f64 is 0x3FF0000000000000.
    let mut x = ints_init("x", 7, &[1], &[0x3FF0000000000000]);
    x.data_type = 7;
    let y = bitcast(11, x, 11).unwrap();
    assert_eq!(y.to_f64_vec(), [1.0]);
}

#[test]
fn bitcast_refuses_unequal_widths_non_bools_and_program_values() {
    let e = bitcast(11, ints_init("x", 6, &[1], &[1]), 11).unwrap_err();
    assert!(
        e.to_string().contains("BitCast") && e.to_string().contains("equal widths"),
        "{e}"
    );
    let e = bitcast(9, ints_init("x", 2, &[1], &[2]), 9).unwrap_err();
    assert!(e.to_string().contains("not a bool"), "{e}");
    let mut n = node("BitCast", &["x"], &["Y"]);
    n.attribute = vec![int_attr("to", 6)];
    let e = run_node(n, &[("x", t(&[2], &[1.0, 2.0]))], vec![], 26).unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("known at import"),
        "{e}"
    );
}

#[test]
fn space_to_depth_orders_blocks_by_mode() {
    let x: Vec<f32> = (1..=8).map(|v| v as f32).collect();
    let x = t(&[1, 2, 2, 2], &x);
    let run = |mode: &str| {
        let mut n: NodeProto = node("SpaceToDepth", &["x"], &["Y"]);
        n.attribute = vec![int_attr("blocksize", 2), str_attr("mode", mode)];
        run_node(n, &[("x", x.clone())], vec![], 28)
    };
    // CRD: channel c·4 + block offset; DCR: block offset·2 + c.
    let y = run("CRD").unwrap();
    assert_eq!(y[0].dims(), &[1, 8, 1, 1]);
    assert_eq!(y[0].to_f64_vec(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let y = run("DCR").unwrap();
    assert_eq!(y[0].to_f64_vec(), [1.0, 5.0, 2.0, 6.0, 3.0, 7.0, 4.0, 8.0]);
    let e = run("RDC").unwrap_err();
    assert!(e.to_string().contains("`mode`"), "{e}");
}
