//! Programs with i64 arithmetic export as the ONNX integer operators of the same meaning (Add,
//! Sub, Mul wrap; Div truncates) and import back to the same values, derivatives included.

use catml_core::ad;
use catml_core::interp::eval;
use catml_core::ir::{Builder, InputKind, Program};
use catml_core::prim::Ops;
use catml_core::tensor::{DType, Params, Tensor, TensorType};
use catml_onnx::{decode_model, export, export_vjp, import, ExportOptions, Exported, Shapes};
use prost::Message;

/// outputs: x+y, x-y, x*y, x/y, -x, |x|, sign x, x², max, min, Σx, x broadcast to (2, 4), and
/// f ⊙ convert(x / y, f64) (a float path through integer values).
fn program() -> Program {
    let mut b = Builder::new();
    let ty = TensorType::new(DType::I64, [4]);
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let y = b.input("y", ty, InputKind::Data).unwrap();
    let f = b
        .input("f", TensorType::new(DType::F64, [4]), InputKind::Data)
        .unwrap();
    let q = b.div(x, y).unwrap();
    let qf = b.convert(q, DType::F64).unwrap();
    let outs = vec![
        b.add(x, y).unwrap(),
        b.sub(x, y).unwrap(),
        b.mul(x, y).unwrap(),
        q,
        b.neg(x).unwrap(),
        b.abs(x).unwrap(),
        b.sign(x).unwrap(),
        b.square(x).unwrap(),
        b.maximum(x, y).unwrap(),
        b.minimum(x, y).unwrap(),
        b.sum(x, None).unwrap(),
        b.broadcast(x, vec![2, 4], vec![1]).unwrap(),
        b.mul(f, qf).unwrap(),
    ];
    b.finish(&outs).unwrap()
}

fn reimported(e: &Exported, args: &[Tensor]) -> Vec<Tensor> {
    let model = decode_model(&e.model.encode_to_vec()).unwrap();
    let imp = import(&model, &Shapes::new(), None).unwrap();
    eval(&imp.program, args).unwrap()
}

fn args() -> Vec<Tensor> {
    vec![
        Tensor::i64([4], vec![i64::MAX, -7, 7, 1 << 32]).unwrap(),
        Tensor::i64([4], vec![1, 2, -2, 3]).unwrap(),
        Tensor::f64([4], vec![0.5, 1.0, 2.0, -1.0]).unwrap(),
    ]
}

#[test]
fn integer_arithmetic_exports_and_imports_to_the_same_values() {
    let p = program();
    let x = args();
    let want = eval(&p, &x).unwrap();
    let e = export(&p, &Params::new(), &ExportOptions::default()).unwrap();
    assert!(
        e.lowered.is_empty(),
        "written as ONNX operators: {:?}",
        e.lowered
    );
    let got = reimported(&e, &x);
    assert_eq!(got, want);
    // Spot values: wrap at i64::MAX, truncation toward zero.
    assert_eq!(got[0].as_i64().unwrap().data()[0], i64::MIN);
    assert_eq!(
        got[3].as_i64().unwrap().data(),
        [i64::MAX, -3, -3, 1_431_655_765]
    );
    assert_eq!(got[7].as_i64().unwrap().data()[3], 0, "2^64 wraps to 0");
}

#[test]
fn the_reverse_program_through_integer_values_exports() {
    let p = program();
    let v = ad::vjp(&p).unwrap();
    let mut x = args();
    for ty in p.output_types() {
        x.push(Tensor::full(&ty, 1.0));
    }
    let want = eval(&v.program, &x).unwrap();
    let e = export_vjp(&p, &Params::new(), &ExportOptions::default()).unwrap();
    let got = reimported(&e, &x);
    assert_eq!(got, want);
    // d/df Σ f ⊙ trunc(x / y) = trunc(x / y) as f64
    let g = got.last().unwrap().to_f64_vec();
    assert_eq!(g, [i64::MAX as f64, -3.0, -3.0, 1_431_655_765.0]);
}
