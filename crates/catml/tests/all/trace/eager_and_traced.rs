use std::sync::Arc;

use catml::interp;
use catml::ir::listing;
use catml::nn::{seeded, Init};
use catml::prim::CustomPrimitive;
use catml::tensor::{DType, Tensor};
use catml::trace::{trace, trace_named, with_tag, TraceError, Value};

use super::{f64s, mlp, ty};

#[test]
fn the_000_mlp_traces_to_four_tagged_instructions() {
    let mut rng = seeded(0);
    let traced = trace(&[ty(DType::F32, &[2])], |x| mlp(&x[0], &mut rng)).unwrap();
    let expected = "\
program(
  inputs:
    v0: f32[2]
    lin1.W: f32[4, 2] param
    lin1.b: f32[4] param
    lin2.W: f32[1, 4] param
    lin2.b: f32[1] param
  instructions:
    0: v1: f32[4] = linear(v0, lin1.W, lin1.b) tag=lin1
    1: v2: f32[4] = relu(v1)
    2: v3: f32[1] = linear(v2, lin2.W, lin2.b) tag=lin2
    3: v4: f32[1] = sigmoid(v3)
  outputs: v4
)
";
    assert_eq!(listing::print(&traced.program), expected);
}

#[test]
fn the_shape_and_parameter_interpreters_read_the_traced_mlp_without_data() {
    let mut rng = seeded(0);
    let traced = trace(&[ty(DType::F32, &[2])], |x| mlp(&x[0], &mut rng)).unwrap();
    let p = &traced.program;
    assert_eq!(
        interp::shape(p, &p.input_types()).unwrap(),
        vec![ty(DType::F32, &[1])]
    );
    let count = interp::params(p);
    assert_eq!(count.total, 17);
    assert_eq!(count.by_tag["lin1"], 12);
    assert_eq!(count.by_tag["lin2"], 5);
    assert_eq!(traced.params.numel(), 17);
}

#[test]
fn an_eager_run_equals_the_evaluation_of_the_trace_bit_for_bit() {
    let x = Tensor::f32([2], vec![0.75, -1.5]).unwrap();
    let eager = mlp(&Value::from(x.clone()), &mut seeded(3))
        .into_tensor()
        .unwrap();
    let mut rng = seeded(3);
    let traced = trace(&[ty(DType::F32, &[2])], |v| mlp(&v[0], &mut rng)).unwrap();
    assert_eq!(traced.eval(&[x]).unwrap(), vec![eager]);
}

#[test]
fn parameters_start_from_the_seeded_initialisers_in_declaration_order() {
    let mut rng = seeded(5);
    let traced = trace(&[ty(DType::F64, &[2])], |x| mlp(&x[0], &mut rng)).unwrap();
    let mut again = seeded(5);
    let w1 = Init::Glorot.sample(&ty(DType::F64, &[4, 2]), &mut again);
    let b1 = Init::Zeros.sample(&ty(DType::F64, &[4]), &mut again);
    let w2 = Init::Glorot.sample(&ty(DType::F64, &[1, 4]), &mut again);
    assert_eq!(traced.params.get("lin1.W"), Some(&w1));
    assert_eq!(traced.params.get("lin1.b"), Some(&b1));
    assert_eq!(traced.params.get("lin2.W"), Some(&w2));
    // Glorot bound for (4, 2): √(6 / 6) = 1.
    assert!(w1.to_f64_vec().iter().all(|v| v.abs() <= 1.0));
    assert_ne!(w1.to_f64_vec(), vec![0.0; 8]);
}

#[test]
fn scalars_on_either_side_and_division_mean_what_they_say() {
    let f = |x: &Value| {
        let a = 2.0 * x - 1.0; // 2x - 1
        let b = 1.0 - x; // 1 - x
        let c = x / 4.0 + 3.0 / x; // x/4 + 3/x
        vec![a, b, c, -x]
    };
    let x = f64s(&[2], &[2.0, -0.5]);
    let eager: Vec<Tensor> = f(&Value::from(x.clone()))
        .into_iter()
        .map(|v| v.into_tensor().unwrap())
        .collect();
    assert_eq!(eager[0].to_f64_vec(), vec![3.0, -2.0]);
    assert_eq!(eager[1].to_f64_vec(), vec![-1.0, 1.5]);
    assert_eq!(eager[2].to_f64_vec(), vec![2.0, -6.125]);
    assert_eq!(eager[3].to_f64_vec(), vec![-2.0, 0.5]);
    let traced = trace(&[ty(DType::F64, &[2])], |v| f(&v[0])).unwrap();
    assert_eq!(traced.eval(&[x]).unwrap(), eager);
}

#[test]
fn operators_take_values_and_references_alike() {
    let x = Value::from(f64s(&[2], &[1.0, 2.0]));
    let y = Value::from(f64s(&[2], &[3.0, 5.0]));
    let sums = [
        &x + &y,
        x.clone() + &y,
        &x + y.clone(),
        x.clone() + y.clone(),
    ];
    for s in sums {
        assert_eq!(s.into_tensor().unwrap().to_f64_vec(), vec![4.0, 7.0]);
    }
    let p = (&x * &y - &x).into_tensor().unwrap();
    assert_eq!(p.to_f64_vec(), vec![2.0, 8.0]);
}

#[test]
fn every_layout_and_reduction_method_records_one_node_and_agrees_with_eager() {
    let f = |x: &Value| {
        let m = x.reshape([2, 3]);
        let t = m.t(); // (3, 2)
        let p = m.permute(&[1, 0]);
        let same = &t - &p; // zeros
        let g = m.gather(1, &[2, 0]); // (2, 2)
        let c = Value::concat(&[&g, &g], 0); // (4, 2)
        let s = c.sum_axes(&[0]); // (2)
        let r = s.broadcast_rows(3).sum_all(); // scalar
        let b = x.sum_all().broadcast_to([2, 2]).sum_all();
        let e = x
            .exp()
            .log()
            .rsqrt()
            .reciprocal()
            .sigmoid()
            .tanh()
            .stop_gradient();
        let mm = m.matmul(&t).convert(DType::F32).convert(DType::F64);
        vec![same, r, b, e, mm]
    };
    let x = f64s(&[6], &[0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
    let eager: Vec<Tensor> = f(&Value::from(x.clone()))
        .into_iter()
        .map(|v| v.into_tensor().unwrap())
        .collect();
    assert_eq!(eager[0].to_f64_vec(), vec![0.0; 6]);
    // gather columns 2, 0 of [[.5, 1, 1.5], [2, 2.5, 3]]: [[1.5, .5], [3, 2]]; concat twice,
    // sum rows: [9, 5]; three rows of it: 42.
    assert_eq!(eager[1].to_f64_vec(), vec![42.0]);
    assert_eq!(eager[2].to_f64_vec(), vec![4.0 * 10.5]);
    assert_eq!(eager[4].dims(), &[2, 2]);
    let traced = trace(&[ty(DType::F64, &[6])], |v| f(&v[0])).unwrap();
    assert_eq!(traced.eval(&[x]).unwrap(), eager);
}

#[test]
fn captured_tensors_become_constants_of_the_trace() {
    let shift = Value::from(f64s(&[2], &[10.0, 20.0]));
    let traced = trace(&[ty(DType::F64, &[2])], |x| &x[0] + &shift).unwrap();
    let ops: Vec<&str> = traced
        .program
        .nodes()
        .iter()
        .map(|n| n.prim.name())
        .collect();
    assert_eq!(ops, vec!["constant", "add"]);
    let out = traced.eval(&[f64s(&[2], &[1.0, 2.0])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![11.0, 22.0]);
}

#[test]
fn tags_nest_and_are_restored_after_their_extent() {
    let traced = trace(&[ty(DType::F64, &[2])], |x| {
        with_tag("outer", || {
            let a = x[0].tanh();
            let b = with_tag("inner", || a.exp());

            b.sigmoid()
        })
        .relu()
    })
    .unwrap();
    let tags: Vec<Option<&str>> = traced
        .program
        .nodes()
        .iter()
        .map(|n| n.tag.as_deref())
        .collect();
    assert_eq!(
        tags,
        vec![Some("outer"), Some("inner"), Some("outer"), None]
    );
}

#[test]
fn a_custom_primitive_applies_eagerly_and_in_a_trace() {
    let cube: catml::ir::Prim = Arc::new(CustomPrimitive::new(
        "cube",
        |t| Ok(t[0].clone()),
        |x| {
            let v = x[0].to_f64_vec().iter().map(|v| v * v * v).collect();
            Ok(Tensor::f64(x[0].dims().to_vec(), v).unwrap())
        },
    ));
    let x = f64s(&[2], &[2.0, -1.0]);
    let eager = Value::apply(cube.clone(), &[&Value::from(x.clone())]);
    assert_eq!(eager.into_tensor().unwrap().to_f64_vec(), vec![8.0, -1.0]);
    let traced = trace(&[ty(DType::F64, &[2])], |v| {
        Value::apply(cube.clone(), &[&v[0]])
    })
    .unwrap();
    assert_eq!(traced.program.nodes()[0].prim.name(), "cube");
    assert_eq!(traced.eval(&[x]).unwrap()[0].to_f64_vec(), vec![8.0, -1.0]);
}

#[test]
fn a_custom_kernel_written_with_values_runs_eagerly() {
    let soft: catml::ir::Prim = Arc::new(CustomPrimitive::new(
        "tanh_twice",
        |t| Ok(t[0].clone()),
        |x| {
            Value::from(x[0].clone())
                .tanh()
                .tanh()
                .into_tensor()
                .map_err(|e| catml::ir::KernelError::Unsupported(e.to_string()))
        },
    ));
    let x = f64s(&[1], &[0.5]);
    let y = Value::apply(soft, &[&Value::from(x)])
        .into_tensor()
        .unwrap();
    // The tanh kernel agrees with libm's to a few ulps.
    assert!((y.to_f64_vec()[0] - 0.5f64.tanh().tanh()).abs() < 1e-15);
}

#[test]
fn a_trace_inside_a_traced_function_records_separately() {
    let outer = trace(&[ty(DType::F64, &[2])], |x| {
        let inner = trace(&[ty(DType::F64, &[2])], |y| y[0].exp()).unwrap();
        assert_eq!(inner.program.n_nodes(), 1);
        x[0].tanh()
    })
    .unwrap();
    assert_eq!(outer.program.n_nodes(), 1);
    assert_eq!(outer.program.nodes()[0].prim.name(), "tanh");
}

#[test]
fn named_inputs_and_a_result_returning_function_trace() {
    let traced = trace_named(
        &[("X", ty(DType::F64, &[2, 2]))],
        |x| -> Result<Value, TraceError> {
            let h = x[0].matmul(&x[0]).checked()?;
            Ok(h.tanh())
        },
    )
    .unwrap();
    assert_eq!(traced.program.inputs()[0].name, "X");
    assert_eq!(traced.program.n_nodes(), 2);
    assert_eq!(traced.data_types(), vec![ty(DType::F64, &[2, 2])]);
}

#[test]
fn a_function_of_no_input_is_a_constant_program() {
    let traced = trace(&[], |_| Value::full(1.5, &ty(DType::F32, &[3]))).unwrap();
    let out = traced.eval(&[]).unwrap();
    assert_eq!(out[0], Tensor::f32([3], vec![1.5; 3]).unwrap());
}
