use catml::ir::{json, structural_difference};
use catml::nn::{param, seeded, ChaCha8Rng, Init};
use catml::tensor::{DType, Tensor};
use catml::trace::{trace_named, TraceError, Value};

use super::ty;

/// The tied residual block (docs/examples.md): A = XW + b, H = tanh A, Y = X + HW + b, one W
/// and one b each used twice.
fn tied_block(x: &Value, rng: &mut ChaCha8Rng) -> Result<Value, TraceError> {
    let t = x.ty()?;
    let (rows, d) = (t.dims()[0], t.dims()[1]);
    let w = param("W", &ty(t.dtype, &[d, d]), Init::Glorot, rng);
    let b = param("b", &ty(t.dtype, &[d]), Init::Zeros, rng);
    let bb = b.broadcast_rows(rows);
    let a = x.matmul(&w) + &bb;
    let h = a.tanh();
    Ok(x + (h.matmul(&w) + &bb))
}

fn module_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules")
}

#[test]
fn the_traced_tied_block_is_the_module_up_to_names() {
    let traced = trace_named(&[("X", ty(DType::F64, &[2, 3]))], |x| {
        tied_block(&x[0], &mut seeded(0))
    })
    .unwrap();
    let text = std::fs::read_to_string(module_dir().join("tied_residual.json")).unwrap();
    let module = json::from_str(&text, catml::prim::builtins()).unwrap();
    assert_eq!(structural_difference(&traced.program, &module), None);

    // And through JSON: the traced program's own module reads back the same.
    let again = json::from_str(&json::to_string(&traced.program), catml::prim::builtins()).unwrap();
    assert_eq!(again, traced.program);
}

#[test]
fn the_traced_tied_block_evaluates_like_the_module_on_its_inputs() {
    let traced = trace_named(&[("X", ty(DType::F64, &[2, 3]))], |x| {
        tied_block(&x[0], &mut seeded(0))
    })
    .unwrap();
    let text = std::fs::read_to_string(module_dir().join("tied_residual.json")).unwrap();
    let module = json::from_str(&text, catml::prim::builtins()).unwrap();
    let inputs: std::collections::BTreeMap<String, Tensor> = serde_json::from_str(
        &std::fs::read_to_string(module_dir().join("tied_residual.inputs.json")).unwrap(),
    )
    .unwrap();
    let expected = catml::interp::eval_named(&module, &inputs).unwrap();
    let ordered: Vec<Tensor> = ["X", "W", "b"].iter().map(|n| inputs[*n].clone()).collect();
    assert_eq!(
        catml::interp::eval(&traced.program, &ordered).unwrap(),
        expected
    );
}

#[test]
fn a_differently_wired_block_is_told_apart() {
    // Y = X + HW + b with a second bias broadcast: one node more than the module.
    let traced = trace_named(&[("X", ty(DType::F64, &[2, 3]))], |x| {
        let mut rng = seeded(0);
        let w = param("W", &ty(DType::F64, &[3, 3]), Init::Glorot, &mut rng);
        let b = param("b", &ty(DType::F64, &[3]), Init::Zeros, &mut rng);
        let a = x[0].matmul(&w) + b.broadcast_rows(2);
        &x[0] + (a.tanh().matmul(&w) + b.broadcast_rows(2))
    })
    .unwrap();
    let text = std::fs::read_to_string(module_dir().join("tied_residual.json")).unwrap();
    let module = json::from_str(&text, catml::prim::builtins()).unwrap();
    let d = structural_difference(&traced.program, &module).unwrap();
    assert_eq!(d.to_string(), "node counts differ: 8 vs 7");
}
