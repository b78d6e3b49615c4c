//! vmap: per-example gradients against loops (bitwise), vmap of vmap, vmap and grad in both
//! orders, the tracing form, every registered primitive batched over every axis, and the
//! errors for a missing rule and bad axes.

use catml::ad;
use catml::interp;
use catml::ir::{Builder, InputKind, Program};
use catml::nn::{flatten, seeded, Conv2d, Linear, Pool2d, Sequential};
use catml::prim::{self, CustomPrimitive, Ops};
use catml::tensor::{DType, Tensor, TensorType};
use catml::trace::{self, trace_named, Value};
use catml::transform::{parse_axes, vmap, Axis, VmapError};
use catml::verify::generate::{generate, random_inputs, random_tensor, GenConfig};
use catml::verify::vmap::{against_loop, slice_at};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const BATCH: usize = 5;

/// The gradient program of `net`'s mean cross-entropy on one example (`x` of `x_ty`, one
/// label), and the initial parameters in input order.
fn per_example_grad(net: &Sequential, x_ty: TensorType) -> (Program, Vec<Tensor>) {
    let inputs = [("x", x_ty), ("labels", TensorType::new(DType::I64, [1]))];
    let loss = trace_named(&inputs, |v| {
        net.apply(&v[0], &mut seeded(3), "").cross_entropy(&v[1])
    })
    .unwrap();
    let g = ad::grad(&loss.program).unwrap();
    let params = loss
        .program
        .inputs()
        .iter()
        .filter(|i| i.kind == InputKind::Param)
        .map(|i| loss.params.get(&i.name).unwrap().clone())
        .collect();
    (g.program, params)
}

/// vmap(grad) over examples, against grad evaluated once per example: bitwise.
fn check_per_example_gradients(net: Sequential, example: TensorType, dtype_scale: f64) {
    let (g, params) = per_example_grad(&net, example.clone());
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut examples = Vec::new();
    for i in 0..BATCH {
        let mut inputs = vec![
            random_tensor(&example, &mut rng, dtype_scale),
            Tensor::i64([1], vec![(i as i64 * 3) % 10]).unwrap(),
        ];
        inputs.extend(params.iter().cloned());
        examples.push(inputs);
    }
    let mut in_axes: Vec<Axis> = vec![Some(0), Some(0)];
    in_axes.resize(g.n_inputs(), None);
    let out_axes = vec![Some(0); g.outputs().len()];
    let err = against_loop(&g, &in_axes, &out_axes, &examples).unwrap();
    assert_eq!(err, 0.0, "per-example gradients differ from the loop");
    // The batched program is an ordinary program: one node per node of the gradient program
    // at most a few more, not one per example.
    let q = vmap(&g, BATCH, &in_axes, &out_axes).unwrap();
    assert!(
        q.n_nodes() < 4 * g.n_nodes(),
        "{} vs {}",
        q.n_nodes(),
        g.n_nodes()
    );
}

#[test]
fn per_example_gradients_of_an_mlp_equal_a_loop_bitwise() {
    let net = Sequential::new()
        .push("h", Linear::new(8))
        .push("act", |x: &Value| x.tanh())
        .push("out", Linear::new(10));
    check_per_example_gradients(net, TensorType::new(DType::F32, [1, 6]), 1.0);
}

#[test]
fn per_example_gradients_of_a_cnn_equal_a_loop_bitwise() {
    let net = Sequential::new()
        .push("conv1", Conv2d::new(4, [3, 3]).pad(1))
        .push("relu1", |x: &Value| x.relu())
        .push("pool1", Pool2d::max([2, 2]))
        .push("conv2", Conv2d::new(6, [3, 3]).pad(1))
        .push("relu2", |x: &Value| x.relu())
        .push("pool2", Pool2d::max([2, 2]))
        .push("flatten", flatten)
        .push("out", Linear::new(10));
    check_per_example_gradients(net, TensorType::new(DType::F32, [1, 1, 8, 8]), 1.0);
}

/// f(x, w) = sum(tanh(x * w)) * x over vectors of 3.
fn small() -> Program {
    let mut b = Builder::new();
    let t = TensorType::new(DType::F64, [3]);
    let x = b.input("x", t.clone(), InputKind::Data).unwrap();
    let w = b.input("w", t, InputKind::Param).unwrap();
    let h = b.mul(x, w).unwrap();
    let h = b.tanh(h).unwrap();
    let s = b.sum(h, None).unwrap();
    let s = b.broadcast(s, [3], vec![]).unwrap();
    let y = b.mul(s, x).unwrap();
    let l = b.sum(y, None).unwrap();
    b.finish(&[l, y]).unwrap()
}

fn draw(ty: &TensorType, seed: u64) -> Tensor {
    random_tensor(ty, &mut ChaCha8Rng::seed_from_u64(seed), 1.0)
}

#[test]
fn vmap_of_vmap_equals_a_double_loop() {
    let p = small();
    // Inner batch of 4 along x's axis 0; outer batch of 2 along the inner program's axis 1.
    let inner = vmap(&p, 4, &[Some(0), None], &[Some(0), Some(1)]).unwrap();
    let outer = vmap(&inner, 2, &[Some(1), None], &[Some(0), Some(2)]).unwrap();
    assert_eq!(outer.inputs()[0].ty.dims(), [4, 2, 3]);
    let xs = draw(&TensorType::new(DType::F64, [4, 2, 3]), 1);
    let w = draw(&TensorType::new(DType::F64, [3]), 2);
    let got = interp::eval(&outer, &[xs.clone(), w.clone()]).unwrap();
    assert_eq!(got[0].dims(), [2, 4]);
    assert_eq!(got[1].dims(), [3, 4, 2]);
    for i in 0..4 {
        for j in 0..2 {
            let x = slice_at(&slice_at(&xs, 0, i), 0, j);
            let want = interp::eval(&p, &[x, w.clone()]).unwrap();
            let l = slice_at(&slice_at(&got[0], 0, j), 0, i);
            let y = slice_at(&slice_at(&got[1], 2, j), 1, i);
            assert_eq!(l, want[0]);
            assert_eq!(y, want[1]);
        }
    }
}

fn close(a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.ty(), b.ty());
    let d = a.max_abs_diff(b);
    assert!(d <= tol, "differ by {d:e}");
}

#[test]
fn vmap_of_grad_equals_grad_of_vmap() {
    let p = small();
    let x_ty = TensorType::new(DType::F64, [BATCH, 3]);
    let xs = draw(&x_ty, 5);
    let w = draw(&TensorType::new(DType::F64, [3]), 6);
    // vmap(grad): per-example gradients with respect to x and w.
    let g = ad::grad(&p).unwrap().program;
    let vg = vmap(
        &g,
        BATCH,
        &[Some(0), None],
        &vec![Some(0); g.outputs().len()],
    )
    .unwrap();
    let per = interp::eval(&vg, &[xs.clone(), w.clone()]).unwrap();
    // grad(vmap): the gradient of the sum of the batched losses.
    let mut b = Builder::new();
    let vp = vmap(&p, BATCH, &[Some(0), None], &[Some(0), Some(0)]).unwrap();
    let xv = b.input("x", x_ty, InputKind::Data).unwrap();
    let wv = b.input("w", w.ty(), InputKind::Param).unwrap();
    let outs = b.inline(&vp, &[xv, wv]).unwrap();
    let total = b.sum(outs[0], None).unwrap();
    let summed = b.finish(&[total]).unwrap();
    let gv = ad::grad(&summed).unwrap();
    let whole = interp::eval(&gv.program, &[xs, w]).unwrap();
    let dx = &whole[gv.program.outputs().len() - 2];
    let dw = &whole[gv.program.outputs().len() - 1];
    let layout = ad::grad(&p).unwrap().layout;
    let (gx, gw) = (
        layout.gradient_output(0).unwrap(),
        layout.gradient_output(1).unwrap(),
    );
    // Each example's x gradient is its row of the summed gradient; w's add over examples.
    close(dx, &per[gx], 1e-13);
    let summed_w = Tensor::f64(
        [3],
        (0..3)
            .map(|c| {
                (0..BATCH)
                    .map(|i| slice_at(&per[gw], 0, i).to_f64_vec()[c])
                    .sum()
            })
            .collect(),
    )
    .unwrap();
    close(dw, &summed_w, 1e-13);
}

#[test]
fn jvp_of_vmap_equals_vmap_of_jvp() {
    let p = small();
    let xs = draw(&TensorType::new(DType::F64, [BATCH, 3]), 7);
    let dxs = draw(&TensorType::new(DType::F64, [BATCH, 3]), 8);
    let w = draw(&TensorType::new(DType::F64, [3]), 9);
    let dw = draw(&TensorType::new(DType::F64, [3]), 10);
    let j = ad::jvp(&p).unwrap().program;
    let vj = vmap(&j, BATCH, &[Some(0), None, Some(0), None], &[Some(0); 4]).unwrap();
    let a = interp::eval(&vj, &[xs.clone(), w.clone(), dxs.clone(), dw.clone()]).unwrap();
    let jv = ad::jvp(&vmap(&p, BATCH, &[Some(0), None], &[Some(0), Some(0)]).unwrap())
        .unwrap()
        .program;
    let b = interp::eval(&jv, &[xs, w, dxs, dw]).unwrap();
    for (x, y) in a.iter().zip(&b) {
        close(x, y, 1e-13);
    }
}

#[test]
fn grad_of_a_per_example_node_matches_the_loop() {
    // linear batches per example; the gradient of the batched program differentiates that
    // node through the inner primitive's own rules.
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [2, 3]), InputKind::Data)
        .unwrap();
    let w = b
        .input("W", TensorType::new(DType::F64, [4, 3]), InputKind::Param)
        .unwrap();
    let bias = b
        .input("b", TensorType::new(DType::F64, [4]), InputKind::Param)
        .unwrap();
    let y = b.linear(x, w, bias).unwrap();
    let y = b.tanh(y).unwrap();
    let l = b.sum(y, None).unwrap();
    let p = b.finish(&[l]).unwrap();
    let vp = vmap(&p, 3, &[Some(0), Some(0), None], &[Some(0)]).unwrap();
    assert!(vp.nodes().iter().any(|n| n.prim.name() == "per_example"));
    let mut sb = Builder::new();
    let ins: Vec<_> = vp
        .inputs()
        .iter()
        .map(|i| sb.input(&i.name, i.ty.clone(), i.kind).unwrap())
        .collect();
    let outs = sb.inline(&vp, &ins).unwrap();
    let total = sb.sum(outs[0], None).unwrap();
    let summed = sb.finish(&[total]).unwrap();
    let g = ad::grad(&summed).unwrap();
    let inputs: Vec<Tensor> = summed
        .inputs()
        .iter()
        .enumerate()
        .map(|(k, i)| draw(&i.ty, 20 + k as u64))
        .collect();
    let got = interp::eval(&g.program, &inputs).unwrap();
    let gp = ad::grad(&p).unwrap();
    let mut dw = [0.0; 12];
    for e in 0..3 {
        let mut one = vec![
            slice_at(&inputs[0], 0, e),
            slice_at(&inputs[1], 0, e),
            inputs[2].clone(),
        ];
        one.truncate(3);
        let want = interp::eval(&gp.program, &one).unwrap();
        let gx = slice_at(&got[g.layout.gradient_output(0).unwrap()], 0, e);
        close(&gx, &want[gp.layout.gradient_output(0).unwrap()], 1e-13);
        let gw = slice_at(&got[g.layout.gradient_output(1).unwrap()], 0, e);
        close(&gw, &want[gp.layout.gradient_output(1).unwrap()], 1e-13);
        for (s, v) in dw
            .iter_mut()
            .zip(want[gp.layout.gradient_output(2).unwrap()].to_f64_vec())
        {
            *s += v;
        }
    }
    let gb = &got[g.layout.gradient_output(2).unwrap()];
    close(gb, &Tensor::f64([4], dw[..4].to_vec()).unwrap(), 1e-13);
}

/// Every operand value of the first node applying `name` in a generated program, for a few
/// random draws of the program's inputs, with that node alone as a program.
fn one_node(name: &str, seed: u64) -> Option<(Program, Vec<Vec<Tensor>>)> {
    let cfg = GenConfig {
        n_nodes: 3,
        n_params: 0,
        prims: vec![name.to_string()],
        ..GenConfig::default()
    };
    let p = generate(&cfg, seed).ok()?;
    let node = p
        .nodes()
        .iter()
        .find(|n| n.prim.name() == name && !n.operands.is_empty())?
        .clone();
    let mut b = Builder::new();
    let xs: Vec<_> = node
        .operands
        .iter()
        .enumerate()
        .map(|(k, &o)| {
            b.input(&format!("x{k}"), p.ty(o).clone(), InputKind::Data)
                .unwrap()
        })
        .collect();
    let y = b.apply(node.prim.clone(), &xs).unwrap();
    let single = b.finish(&[y]).unwrap();
    let operands = Builder::from_program(&p).finish(&node.operands).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let draws = (0..3)
        .map(|_| interp::eval(&operands, &random_inputs(&p, &mut rng)).unwrap())
        .collect();
    Some((single, draws))
}

#[test]
fn every_registered_primitive_batches_over_every_axis_of_every_operand() {
    let registry = prim::builtins();
    let mut untested = Vec::new();
    let mut cases = 0;
    for name in registry.names() {
        assert!(registry.example(name).is_some(), "{name} has no example");
        let Some((p, draws)) = one_node(name, 17) else {
            untested.push(name.to_string());
            continue;
        };
        let n = p.n_inputs();
        let mut plans: Vec<Vec<Axis>> = Vec::new();
        for k in 0..n {
            for a in 0..=p.inputs()[k].ty.rank() {
                let mut axes = vec![None; n];
                axes[k] = Some(a);
                plans.push(axes);
            }
        }
        plans.push(vec![Some(0); n]);
        let rank = p.output_types()[0].rank();
        for (i, in_axes) in plans.iter().enumerate() {
            let out_axes = vec![Some(i % (rank + 1))];
            let err = against_loop(&p, in_axes, &out_axes, &draws)
                .unwrap_or_else(|e| panic!("{name}, in {in_axes:?}: {e}"));
            assert_eq!(
                err, 0.0,
                "{name}, in {in_axes:?}: differs from the loop by {err:e}"
            );
            cases += 1;
        }
    }
    // A primitive without operands (constant) is not batched on its own.
    untested.sort();
    assert_eq!(untested, ["constant"], "primitives not batched");
    assert!(cases > 150, "{cases} cases");
}

#[test]
fn a_primitive_without_a_batching_rule_is_named_with_its_node() {
    let double = CustomPrimitive::new(
        "double",
        |t| Ok(t[0].clone()),
        |x| Ok(x[0].map_f64(|v| 2.0 * v)),
    );
    let mut b = Builder::new();
    let t = TensorType::new(DType::F64, [2]);
    let x = b.input("x", t.clone(), InputKind::Data).unwrap();
    let z = b.input("z", t, InputKind::Data).unwrap();
    let y = b.apply_hinted("twice", double.into_prim(), &[x]).unwrap();
    let s = b.add(z, z).unwrap();
    let p = b.finish(&[y, s]).unwrap();
    let e = vmap(&p, 3, &[Some(0), None], &[Some(0), Some(0)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "node 0 `twice` (double): primitive `double` has no batching rule"
    );
    // Nodes that do not read the batch need no rule; their outputs are repeated.
    let q = vmap(&p, 3, &[None, Some(0)], &[Some(1), Some(0)]).unwrap();
    assert_eq!(q.output_types()[0].dims(), [2, 3]);
}

#[test]
fn bad_axes_are_errors_that_say_where() {
    let p = small();
    assert!(matches!(
        vmap(&p, 2, &[Some(0)], &[Some(0), Some(0)]),
        Err(VmapError::Count {
            what: "input",
            expected: 2,
            found: 1
        })
    ));
    assert_eq!(
        vmap(&p, 2, &[Some(2), None], &[Some(0), Some(0)])
            .unwrap_err()
            .to_string(),
        "input `x`: batch axis 2 is out of range for its rank 1 (at most 1)"
    );
    assert!(matches!(
        vmap(&p, 2, &[None, None], &[Some(0), Some(0)]),
        Err(VmapError::NothingBatched)
    ));
    assert!(matches!(
        vmap(&p, 2, &[Some(0), None], &[None, Some(0)]),
        Err(VmapError::OutputBatched { index: 0, .. })
    ));
    assert!(matches!(
        vmap(&p, 2, &[Some(0), None], &[Some(0), Some(2)]),
        Err(VmapError::OutAxis {
            index: 1,
            axis: 2,
            ..
        })
    ));
    assert_eq!(
        parse_axes("0, none,1").unwrap(),
        vec![Some(0), None, Some(1)]
    );
    assert_eq!(
        parse_axes("0,x").unwrap_err(),
        "entry 1 `x` is neither a non-negative axis nor `none`"
    );
}

#[test]
fn traced_vmap_runs_a_function_of_one_example_on_a_batch() {
    let mut f = trace::vmap(
        |v: &[Value]| {
            let w = Value::param("w", Tensor::f64([3], vec![0.5, -1.0, 2.0]).unwrap());
            (&v[0] * &w).tanh().sum_all()
        },
        &[Some(1)],
    );
    let xs = draw(&TensorType::new(DType::F64, [3, 4]), 30);
    let params = f.init_types(&[xs.ty()]).unwrap();
    let got = f.call(&params, std::slice::from_ref(&xs)).unwrap();
    assert_eq!(got[0].dims(), [4]);
    let w = params.get("w").unwrap().to_f64_vec();
    for i in 0..4 {
        let x = slice_at(&xs, 1, i).to_f64_vec();
        let want: f64 = x.iter().zip(&w).map(|(a, b)| (a * b).tanh()).sum();
        assert!((got[0].to_f64_vec()[i] - want).abs() < 1e-14);
    }
    assert_eq!(f.trace_count(), 1);
    let e = f
        .call(&params, &[draw(&TensorType::new(DType::F64, [3]), 1)])
        .unwrap_err();
    assert!(
        e.to_string().contains("batch axis 1 is out of range"),
        "{e}"
    );
}
