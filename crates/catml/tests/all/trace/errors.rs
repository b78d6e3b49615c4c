use catml::ir::{KernelError, TypeError};
use catml::nn::{linear, seeded};
use catml::tensor::DType;
use catml::trace::{trace, TraceError, Value};

use super::{f64s, ty};

#[test]
fn a_shape_error_while_tracing_names_the_call_site_and_the_shapes() {
    let line = line!() + 1;
    let r = trace(&[ty(DType::F64, &[2, 3])], |x| x[0].matmul(&x[0]).tanh());
    let e = r.unwrap_err();
    let at = e.location().unwrap();
    assert_eq!((at.file(), at.line()), (file!(), line));
    let text = e.to_string();
    assert!(text.starts_with(&format!("{}:{line}:", file!())), "{text}");
    assert!(text.contains("matmul(f64[2, 3], f64[2, 3])"), "{text}");
    assert!(matches!(e, TraceError::Type { .. }));
}

#[test]
fn the_same_shape_error_eagerly_is_a_failed_value_with_the_same_story() {
    let x = Value::from(f64s(&[2, 3], &[1.0; 6]));
    let line = line!() + 1;
    let y = x.matmul(&x);
    let e = y.error().unwrap().clone();
    assert_eq!(e.location().unwrap().line(), line);
    assert!(e.to_string().contains("matmul(f64[2, 3], f64[2, 3])"));
    // It passes through later operations unchanged, and surfaces where a tensor is asked for.
    let z = (y.tanh() + 1.0).sum_all();
    assert_eq!(z.into_tensor().unwrap_err(), e);
}

#[test]
fn operator_misuse_reports_the_operator_line() {
    let line = line!() + 2;
    let r = trace(&[ty(DType::F64, &[2]), ty(DType::F64, &[3])], |x| {
        &x[0] + &x[1]
    });
    let e = r.unwrap_err();
    assert_eq!(e.location().unwrap().line(), line);
    match e {
        TraceError::Type { op, source, .. } => {
            assert_eq!(op, "add");
            assert!(matches!(source, TypeError::Mismatch { .. }));
        }
        other => panic!("expected a type error, found {other}"),
    }
}

#[test]
fn the_first_error_wins_even_when_its_value_is_dropped() {
    let first = line!() + 3;
    let r = trace(&[ty(DType::F64, &[2]), ty(DType::F32, &[2])], |x| {
        // Mixed dtypes: rejected, then dropped.
        let _unused = &x[0] * &x[1];
        let _also_bad = x[0].reshape([3]);
        x[0].tanh()
    });
    assert_eq!(r.unwrap_err().location().unwrap().line(), first);
}

#[test]
fn an_eager_domain_violation_is_a_kernel_error_at_the_call() {
    let x = Value::from(f64s(&[2], &[1.0, -1.0]));
    let line = line!() + 1;
    let e = x.log().into_tensor().unwrap_err();
    assert_eq!(e.location().unwrap().line(), line);
    assert!(matches!(
        e,
        TraceError::Kernel {
            source: KernelError::Domain(_),
            ..
        }
    ));
}

#[test]
fn an_eager_overflow_is_a_non_finite_error() {
    let x = Value::from(f64s(&[3], &[0.0, 1000.0, 2000.0]));
    match x.exp().into_tensor().unwrap_err() {
        TraceError::NonFinite {
            op, count, first, ..
        } => assert_eq!((op.as_str(), count, first), ("exp", 2, 1)),
        other => panic!("expected a non-finite error, found {other}"),
    }
}

#[test]
fn a_traced_value_has_no_data_and_cannot_outlive_its_trace() {
    let mut leaked = None;
    trace(&[ty(DType::F64, &[2])], |x| {
        assert!(matches!(
            x[0].tensor().unwrap_err(),
            TraceError::Symbolic { .. }
        ));
        leaked = Some(x[0].clone());
        x[0].tanh()
    })
    .unwrap();
    let after = leaked.unwrap().exp();
    assert!(matches!(
        after.error().unwrap(),
        TraceError::ForeignValue { .. }
    ));
}

#[test]
fn a_value_of_an_outer_trace_is_refused_by_an_inner_one() {
    trace(&[ty(DType::F64, &[2])], |x| {
        let inner = trace(&[ty(DType::F64, &[2])], |y| &y[0] + &x[0]);
        assert!(matches!(
            inner.unwrap_err(),
            TraceError::ForeignValue { index: 1, .. }
        ));
        x[0].tanh()
    })
    .unwrap();
}

#[test]
fn one_tag_used_twice_declares_a_parameter_twice() {
    let mut rng = seeded(0);
    let line = line!() + 3;
    let r = trace(&[ty(DType::F64, &[2])], |x| {
        let h = linear(&x[0], 2, &mut rng, "layer");
        linear(&h, 2, &mut rng, "layer")
    });
    let e = r.unwrap_err();
    assert_eq!(e.location().unwrap().line(), line);
    assert_eq!(
        e.to_string(),
        format!(
            "{}:{line}:9: parameter `layer.W` is declared twice in one trace",
            file!()
        )
    );
}

#[test]
fn a_parameter_named_like_a_data_input_is_a_duplicate_definition() {
    let r = trace(&[ty(DType::F64, &[2])], |x| {
        &x[0] * &Value::param("v0", f64s(&[2], &[1.0, 2.0]))
    });
    let e = r.unwrap_err();
    assert!(matches!(e, TraceError::Build { .. }), "{e}");
    assert!(
        e.to_string().ends_with("duplicate definition of `v0`"),
        "{e}"
    );
}

#[test]
fn a_layer_error_names_the_layer_call_not_the_library() {
    let mut rng = seeded(0);
    let line = line!() + 2;
    let r = trace(&[ty(DType::F64, &[])], |x| {
        linear(&x[0], 3, &mut rng, "lin")
    });
    let e = r.unwrap_err();
    assert_eq!(e.location().unwrap().file(), file!());
    assert_eq!(e.location().unwrap().line(), line);
    assert!(
        e.to_string().contains("linear(f64[], f64[3, 1], f64[3])"),
        "{e}"
    );
}

#[test]
fn a_function_with_no_outputs_is_refused() {
    let r = trace(&[ty(DType::F64, &[2])], |_| Vec::<Value>::new());
    assert!(matches!(r.unwrap_err(), TraceError::NoOutputs { .. }));
}
