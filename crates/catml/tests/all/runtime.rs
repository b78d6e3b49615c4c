//! Runtime rejections: inputs of the wrong shape, missing or extra inputs, values outside a
//! primitive's domain and non-finite results. Each asserts the error variant and its exact
//! message; an error means no outputs at all.

use std::collections::BTreeMap;

use catml::interp::{self, EvalError};
use catml::ir::{Builder, InputKind, KernelError, Program};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};

fn f64s(shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::f64(shape.to_vec(), data.to_vec()).unwrap()
}

/// x: f64[2] -> tanh(x) + x
fn two_input_program() -> Program {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let w = b
        .input("w", TensorType::new(DType::F64, [2]), InputKind::Param)
        .unwrap();
    let t = b.tanh(x).unwrap();
    let y = b.mul(t, w).unwrap();
    b.finish(&[y]).unwrap()
}

/// One unary node `f` applied to a data input x: f64[3].
fn unary(f: impl Fn(&mut Builder, catml::ir::Var) -> catml::ir::Var) -> Program {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [3]), InputKind::Data)
        .unwrap();
    let y = f(&mut b, x);
    b.finish(&[y]).unwrap()
}

#[test]
fn input_of_the_wrong_shape_is_rejected() {
    let p = two_input_program();
    let err =
        interp::eval(&p, &[f64s(&[3], &[1.0, 2.0, 3.0]), f64s(&[2], &[1.0, 1.0])]).unwrap_err();
    assert_eq!(
        err,
        EvalError::InputType {
            name: "x".into(),
            expected: TensorType::new(DType::F64, [2]),
            found: TensorType::new(DType::F64, [3]),
        }
    );
    assert_eq!(
        err.to_string(),
        "input `x` has type f64[3], expected f64[2]"
    );
}

#[test]
fn input_of_the_wrong_dtype_is_rejected() {
    let p = two_input_program();
    let w32 = Tensor::f32([2], vec![1.0, 1.0]).unwrap();
    let err = interp::eval(&p, &[f64s(&[2], &[1.0, 2.0]), w32]).unwrap_err();
    assert!(matches!(err, EvalError::InputType { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "input `w` has type f32[2], expected f64[2]"
    );
}

#[test]
fn a_matrix_where_a_vector_is_declared_is_rejected() {
    let p = two_input_program();
    let err = interp::eval(&p, &[f64s(&[1, 2], &[1.0, 2.0]), f64s(&[2], &[1.0, 1.0])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "input `x` has type f64[1, 2], expected f64[2]"
    );
}

#[test]
fn wrong_number_of_positional_inputs_is_rejected() {
    let p = two_input_program();
    let err = interp::eval(&p, &[f64s(&[2], &[1.0, 2.0])]).unwrap_err();
    assert_eq!(
        err,
        EvalError::InputCount {
            expected: 2,
            found: 1
        }
    );
    assert_eq!(err.to_string(), "expected 2 inputs, found 1");
}

#[test]
fn missing_named_input_is_rejected() {
    let p = two_input_program();
    let named = BTreeMap::from([("x".to_string(), f64s(&[2], &[1.0, 2.0]))]);
    let err = interp::eval_named(&p, &named).unwrap_err();
    assert_eq!(
        err,
        EvalError::MissingInput {
            name: "w".into(),
            ty: TensorType::new(DType::F64, [2]),
        }
    );
    assert_eq!(err.to_string(), "missing input `w` (f64[2])");
}

#[test]
fn extra_named_input_is_rejected() {
    let p = two_input_program();
    let named = BTreeMap::from([
        ("x".to_string(), f64s(&[2], &[1.0, 2.0])),
        ("w".to_string(), f64s(&[2], &[1.0, 1.0])),
        ("bias".to_string(), f64s(&[2], &[0.0, 0.0])),
    ]);
    let err = interp::eval_named(&p, &named).unwrap_err();
    assert_eq!(
        err,
        EvalError::ExtraInput {
            name: "bias".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "unknown input `bias`: the program has no such input"
    );
}

#[test]
fn named_inputs_are_ordered_by_declaration() {
    let p = two_input_program();
    let named = BTreeMap::from([
        ("w".to_string(), f64s(&[2], &[2.0, -1.0])),
        ("x".to_string(), f64s(&[2], &[0.0, 0.5])),
    ]);
    let out = interp::eval_named(&p, &named).unwrap();
    assert_eq!(out, vec![f64s(&[2], &[0.0, -(0.5f64.tanh())])]);
}

fn kernel_error(err: EvalError) -> (usize, String, String, KernelError) {
    match err {
        EvalError::Kernel {
            index,
            name,
            op,
            source,
        } => (index, name, op, source),
        other => panic!("expected a kernel error, found {other:?}"),
    }
}

#[test]
fn reciprocal_of_zero_names_the_node() {
    let p = unary(|b, x| b.reciprocal(x).unwrap());
    let err = interp::eval(&p, &[f64s(&[3], &[2.0, 0.0, -1.0])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 0 `t` (reciprocal): outside the admissible domain: reciprocal of 0 at element 1, expected a nonzero value"
    );
    let (index, name, op, source) = kernel_error(err);
    assert_eq!((index, name.as_str(), op.as_str()), (0, "t", "reciprocal"));
    assert!(matches!(source, KernelError::Domain(_)));
}

#[test]
fn log_of_zero_names_the_node() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [3]), InputKind::Data)
        .unwrap();
    let e = b.exp(x).unwrap();
    let d = b.sub(e, e).unwrap();
    let l = b
        .apply_named("logd", std::sync::Arc::new(catml::prim::Log), &[d])
        .unwrap();
    let p = b.finish(&[l]).unwrap();
    let err = interp::eval(&p, &[f64s(&[3], &[0.5, 1.0, 2.0])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 2 `logd` (log): outside the admissible domain: log of 0 at element 0, expected a positive value"
    );
    let (index, name, _, source) = kernel_error(err);
    assert_eq!((index, name.as_str()), (2, "logd"));
    assert!(matches!(source, KernelError::Domain(_)));
}

#[test]
fn rsqrt_of_a_negative_names_the_node() {
    let p = unary(|b, x| b.rsqrt(x).unwrap());
    let err = interp::eval(&p, &[f64s(&[3], &[4.0, 0.25, -9.0])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 0 `t` (rsqrt): outside the admissible domain: rsqrt of -9 at element 2, expected a positive value"
    );
    assert!(matches!(kernel_error(err).3, KernelError::Domain(_)));
}

#[test]
fn rsqrt_of_zero_is_outside_the_domain_in_f32_too() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F32, [2]), InputKind::Data)
        .unwrap();
    let y = b.rsqrt(x).unwrap();
    let p = b.finish(&[y]).unwrap();
    let err = interp::eval(&p, &[Tensor::f32([2], vec![1.0, 0.0]).unwrap()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 0 `t` (rsqrt): outside the admissible domain: rsqrt of 0 at element 1, expected a positive value"
    );
}

#[test]
fn exp_overflow_is_non_finite_and_names_the_node() {
    let p = unary(|b, x| b.exp(x).unwrap());
    let err = interp::eval(&p, &[f64s(&[3], &[0.0, 1000.0, 1.0])]).unwrap_err();
    assert_eq!(
        err,
        EvalError::NonFinite {
            index: 0,
            name: "t".into(),
            op: "exp".into(),
            count: 1,
            first: 1,
        }
    );
    assert_eq!(
        err.to_string(),
        "node 0 `t` (exp) produced 1 non-finite value (first at element 1)"
    );
}

#[test]
fn non_finite_counts_every_element_and_reports_the_first() {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F32, [4]), InputKind::Data)
        .unwrap();
    let h = b.tanh(x).unwrap();
    let e = b.exp(x).unwrap();
    let y = b.add(h, e).unwrap();
    let p = b.finish(&[y]).unwrap();
    // f32 overflows at e^89 already; e^80 does not.
    let x = Tensor::f32([4], vec![1.0, 89.0, 80.0, 100.0]).unwrap();
    let err = interp::eval(&p, &[x]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 1 `t.1` (exp) produced 2 non-finite values (first at element 1)"
    );
}

#[test]
fn a_later_node_fails_after_earlier_nodes_succeed() {
    // exp(x) is finite; its reciprocal of exp(x) - exp(x) = 0 is not admissible.
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2]), InputKind::Data)
        .unwrap();
    let e = b.exp(x).unwrap();
    let z = b.sub(e, e).unwrap();
    let r = b.reciprocal(z).unwrap();
    let p = b.finish(&[e, r]).unwrap();
    let result = interp::eval(&p, &[f64s(&[2], &[1.0, 2.0])]);
    // No partial outputs: the first output (exp) was computed, but nothing is returned.
    let err = result.unwrap_err();
    assert_eq!(kernel_error(err).0, 2);
}

#[test]
fn eval_with_report_also_returns_nothing_on_error() {
    let p = unary(|b, x| b.log(x).unwrap());
    let err = interp::eval_with_report(&p, &[f64s(&[3], &[1.0, -2.0, 3.0])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 0 `t` (log): outside the admissible domain: log of -2 at element 1, expected a positive value"
    );
}

#[test]
fn admissible_inputs_evaluate() {
    let p = unary(|b, x| b.rsqrt(x).unwrap());
    let out = interp::eval(&p, &[f64s(&[3], &[4.0, 0.25, 16.0])]).unwrap();
    assert_eq!(out, vec![f64s(&[3], &[0.5, 2.0, 0.25])]);
}

#[test]
fn shape_interpreter_rejects_input_types_the_program_cannot_take() {
    let p = two_input_program();
    let t3 = TensorType::new(DType::F64, [3]);
    let t2 = TensorType::new(DType::F64, [2]);
    let err = interp::shape(&p, &[t3.clone(), t2.clone()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 1 `t.1` (mul): operand types differ: operand 0 is f64[3], operand 1 is f64[2]; shapes are never broadcast implicitly: broadcast one with `broadcast` first"
    );
    let err = interp::shape(&p, &[t2]).unwrap_err();
    assert_eq!(err.to_string(), "expected 2 input types, found 1");
}

#[test]
fn a_value_beyond_the_memory_limit_is_refused_before_allocating() {
    let p = unary(|b, x| {
        let s = b.sum(x, None).unwrap();
        b.broadcast(s, [1_000_000, 1_000_000], vec![]).unwrap()
    });
    let err = interp::eval(&p, &[f64s(&[3], &[1.0, 2.0, 3.0])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 1 `t.1` (broadcast) would hold 8000000000000 bytes, more than the limit of 17179869184"
    );
}

#[test]
fn a_non_finite_input_is_caught_even_by_a_copying_node() {
    // reshape only copies, so its result is not scanned again, except when it copies an input.
    let p = unary(|b, x| {
        let r = b.reshape(x, [3, 1]).unwrap();
        b.reshape(r, [3]).unwrap()
    });
    let err = interp::eval(&p, &[f64s(&[3], &[0.0, f64::NAN, 1.0])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 0 `t` (reshape) produced 1 non-finite value (first at element 1)"
    );
}
