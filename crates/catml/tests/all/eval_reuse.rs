//! Evaluation hands dying operands to kernels, which may overwrite their buffers: that must
//! never change a tensor the caller holds, an output, or a value another node still reads.

use catml::interp::eval;
use catml::ir::{Builder, InputKind};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};

#[test]
fn reused_buffers_never_alias_inputs_outputs_or_live_values() {
    let ty = TensorType::new(DType::F64, [4]);
    let mut b = Builder::new();
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let e = b.exp(x).unwrap(); // output, and read twice more
    let n = b.neg(e).unwrap(); // reads e, which lives on
    let t = b.tanh(n).unwrap(); // n dies here: may be overwritten
    let s = b.add(t, e).unwrap(); // t dies here
    let m = b.mul(s, s).unwrap(); // a repeated operand
    let p = b.finish(&[e, m, x]).unwrap();

    let xs = vec![0.5, -1.0, 2.0, 0.0];
    let input = Tensor::f64([4], xs.clone()).unwrap();
    let out = eval(&p, std::slice::from_ref(&input)).unwrap();
    assert_eq!(input.to_f64_vec(), xs, "the caller's input is untouched");
    let want_e: Vec<f64> = xs.iter().map(|v| v.exp()).collect();
    assert_eq!(out[0].to_f64_vec(), want_e);
    let want_m: Vec<f64> = want_e
        .iter()
        .map(|e| {
            let s = (-e).tanh() + e;
            s * s
        })
        .collect();
    let got_m = out[1].to_f64_vec();
    for (g, w) in got_m.iter().zip(&want_m) {
        assert!((g - w).abs() <= 1e-15, "{g} vs {w}");
    }
    assert_eq!(out[2], input);
    // Evaluating again from the same input gives the same values.
    assert_eq!(eval(&p, std::slice::from_ref(&input)).unwrap(), out);
}
