//! Round trips: LensIR JSON -> Program -> JSON -> Program, and listing -> Program -> listing,
//! give equal programs that evaluate equally; for the tied residual module and for a program
//! using every built-in primitive, names that need quoting, and tags.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use catml::interp;
use catml::ir::{json, listing, Builder, InputKind, Program, Var};
use catml::prim::{builtins, MatMul, Ops};
use catml::tensor::{DType, Tensor, TensorType};

fn workspace_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Both round trips hold for `p`, and each reparsed program evaluates like `p` on `inputs`.
fn assert_round_trips(p: &Program, inputs: &[Tensor]) {
    let text = json::to_string(p);
    let from_json = json::from_str(&text, builtins()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        &from_json, p,
        "JSON round trip changed the program:\n{text}"
    );
    assert_eq!(
        json::to_string(&from_json),
        text,
        "JSON is not a fixed point"
    );

    let shown = listing::print(p);
    let from_listing =
        listing::parse(&shown, builtins()).unwrap_or_else(|e| panic!("{e}\n{shown}"));
    assert_eq!(
        &from_listing, p,
        "listing round trip changed the program:\n{shown}"
    );
    assert_eq!(
        listing::print(&from_listing),
        shown,
        "listing is not a fixed point"
    );

    let expected = interp::eval(p, inputs).unwrap();
    assert_eq!(interp::eval(&from_json, inputs).unwrap(), expected);
    assert_eq!(interp::eval(&from_listing, inputs).unwrap(), expected);
}

fn tied_residual() -> (Program, Vec<Tensor>) {
    let p = json::from_str(&workspace_file("modules/tied_residual.json"), builtins()).unwrap();
    let named: BTreeMap<String, Tensor> =
        serde_json::from_str(&workspace_file("modules/tied_residual.inputs.json")).unwrap();
    let inputs = interp::order_inputs_named(&p, &named).unwrap();
    (p, inputs)
}

#[test]
fn tied_residual_round_trips() {
    let (p, inputs) = tied_residual();
    assert_eq!(p.n_nodes(), 7);
    let names: Vec<&str> = p.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["X", "W", "b"]);
    assert_eq!(p.param_indices(), [1, 2]);
    assert_round_trips(&p, &inputs);
}

#[test]
fn tied_residual_listing_is_exact() {
    let (p, _) = tied_residual();
    assert_eq!(
        listing::print(&p),
        "program(
  inputs:
    X: f64[2, 3]
    W: f64[3, 3] param
    b: f64[3] param
  instructions:
    0: bb: f64[2, 3] = broadcast_rows(b) {\"rows\":2}
    1: XW: f64[2, 3] = matmul(X, W)
    2: A: f64[2, 3] = add(XW, bb)
    3: H: f64[2, 3] = tanh(A)
    4: HW: f64[2, 3] = matmul(H, W)
    5: HWb: f64[2, 3] = add(HW, bb)
    6: Y: f64[2, 3] = add(X, HWb)
  outputs: Y
)
"
    );
}

fn input(b: &mut Builder, name: &str, dtype: DType, dims: &[usize], kind: InputKind) -> Var {
    b.input(name, TensorType::new(dtype, dims.to_vec()), kind)
        .unwrap()
}

/// A program applying every built-in primitive at least once (and matmul with each
/// transpose flag, sum with and without axes, linear on a vector and on a batch).
fn every_primitive() -> (Program, Vec<Tensor>) {
    let mut b = Builder::new();
    let x = input(&mut b, "x", DType::F64, &[2, 3], InputKind::Data);
    let w = input(&mut b, "W", DType::F64, &[3, 3], InputKind::Param);
    let bias = input(&mut b, "b", DType::F64, &[3], InputKind::Param);
    let k = input(&mut b, "k", DType::I64, &[3], InputKind::Data);
    let c = b
        .constant(Tensor::f64([2, 3], vec![0.5, -1.0, 2.0, 0.25, 3.0, -0.125]).unwrap())
        .unwrap();
    let a = b.add(x, c).unwrap();
    let s = b.sub(a, x).unwrap();
    let n = b.neg(s).unwrap();
    let m = b.mul(n, x).unwrap();
    let mm = b.matmul(m, w).unwrap();
    let mta = b.op(Arc::new(MatMul::new(true, false)), &[x, x]).unwrap();
    let mtb = b.op(Arc::new(MatMul::new(false, true)), &[x, x]).unwrap();
    let mtt = b.op(Arc::new(MatMul::new(true, true)), &[w, w]).unwrap();
    let e = b.exp(x).unwrap();
    let l = b.log(e).unwrap();
    let t = b.tanh(mm).unwrap();
    let sg = b.sigmoid(t).unwrap();
    let r = b.relu(x).unwrap();
    let st = b.heaviside(x).unwrap();
    let rc = b.reciprocal(e).unwrap();
    let rs = b.rsqrt(e).unwrap();
    let all = b.sum(rs, None).unwrap();
    let rows = b.sum(rc, Some(vec![1])).unwrap();
    let bc = b.broadcast(all, [2, 3], vec![]).unwrap();
    let bc2 = b.broadcast(rows, [2, 3], vec![0]).unwrap();
    let brr = b.broadcast_rows(bias, 2).unwrap();
    let rsh = b.reshape(x, [3, 2]).unwrap();
    let pm = b.permute(rsh, vec![1, 0]).unwrap();
    let g = b.gather(x, 1, vec![2, 0, 2]).unwrap();
    let sa = b.scatter_add(g, 1, vec![0, 1, 0], 2).unwrap();
    let cc = b.concat(&[x, brr, bc], 0).unwrap();
    let to32 = b.convert(x, DType::F32).unwrap();
    let to64 = b.convert(to32, DType::F64).unwrap();
    let kf = b.convert(k, DType::F64).unwrap();
    let lin1 = b.linear(kf, w, bias).unwrap();
    let lin2 = b.linear(x, w, bias).unwrap();
    let sgr = b.stop_gradient(lin2).unwrap();
    let mut outputs = vec![
        m, mm, mta, mtb, mtt, l, sg, r, st, all, bc2, pm, sa, cc, to32, to64, lin1, sgr, l,
    ];
    outputs.extend(composite_nodes(&mut b, x, w));
    outputs.extend(window_nodes(&mut b));
    outputs.extend(row_nodes(&mut b, rc));
    let per_example =
        catml::prim::batching::PerExample::new(Arc::new(catml::prim::Mul), vec![true, false]);
    outputs.push(b.op(Arc::new(per_example), &[x, bias]).unwrap());
    outputs.extend(statistics_and_random_nodes(&mut b, x, bias));
    outputs.push(selection_node(&mut b, x));
    outputs.push(scan_node(&mut b, x, bias));
    let p = b.finish(&outputs).unwrap();
    let inputs = vec![
        Tensor::f64([2, 3], vec![1.0, -2.0, 0.5, 0.0, 3.0, -0.25]).unwrap(),
        Tensor::f64(
            [3, 3],
            vec![0.5, -1.0, 0.0, 2.0, 0.25, 1.0, -0.5, 1.5, 0.75],
        )
        .unwrap(),
        Tensor::f64([3], vec![0.125, -0.5, 1.0]).unwrap(),
        Tensor::i64([3], vec![2, -1, 7]).unwrap(),
    ];
    (p, inputs)
}

/// Every elementwise row, from the tables, applied to `x` (positive, away from 0) with the
/// row's example attributes.
fn row_nodes(b: &mut Builder, x: Var) -> Vec<Var> {
    use catml::prim::{BINARY_ROWS, UNARY_ROWS};
    let mut v = Vec::new();
    for row in UNARY_ROWS {
        let attrs = (row.sample_attrs)(&mut || 0.5);
        v.push(b.unary_row(row.name, &attrs, x).unwrap());
    }
    for row in BINARY_ROWS {
        v.push(b.binary_row(row.name, x, x).unwrap());
    }
    v
}

/// The softmax, normalisation, attention, loss and runtime-index composites applied to x (2, 3)
/// and W (3, 3), with non-default attributes.
fn composite_nodes(b: &mut Builder, x: Var, w: Var) -> Vec<Var> {
    use catml::prim::AttentionMask;
    let idx = b.constant(Tensor::i64([2], vec![1, 0]).unwrap()).unwrap();
    let q = b.reshape(x, [1, 1, 2, 3]).unwrap();
    let x3 = b.reshape(x, [1, 2, 3]).unwrap();
    let causal = AttentionMask::causal();
    let lengths = AttentionMask::none().with_key_lengths(vec![1]);
    vec![
        b.softmax(x, 1).unwrap(),
        b.log_softmax(x, 0).unwrap(),
        b.reduce_max(x, Some(vec![1])).unwrap(),
        b.max_weights(x, None).unwrap(),
        b.softmax_pullback(x, x, 1, 0.5).unwrap(),
        b.tanh_pullback(x, x).unwrap(),
        b.masked_softmax(q, causal.clone(), 0.5).unwrap(),
        b.batch_matmul(x3, x3, false, true).unwrap(),
        b.attention_probs(q, q, lengths).unwrap(),
        b.sdpa(q, q, q, causal).unwrap(),
        b.layer_norm(x, vec![1], 0.1, None).unwrap(),
        b.cross_entropy(x, idx).unwrap(),
        b.mse(x, x).unwrap(),
        b.take(w, idx).unwrap(),
        b.scatter_rows(x, idx, 4).unwrap(),
        b.one_hot(idx, 3, DType::F64).unwrap(),
    ]
}

/// Convolutions, pooling and the primitives their rules emit, on a constant (1, 1, 4, 4) image.
fn window_nodes(b: &mut Builder) -> Vec<Var> {
    use catml::prim::{
        Conv1dAttrs, Conv2dAttrs, ConvInputGrad, ConvSpec, ConvWeightGrad, MaxPool2dScatter,
        MaxPool2dSelect, Pool2dAttrs, SumPool2dTranspose,
    };
    let values: Vec<f64> = (0..16).map(|v| (v * 7 % 16) as f64 - 8.0).collect();
    let img = b
        .constant(Tensor::f64([1, 1, 4, 4], values).unwrap())
        .unwrap();
    let k2 = b
        .constant(Tensor::f64([1, 1, 2, 2], vec![0.5, -1.0, 0.25, 2.0]).unwrap())
        .unwrap();
    let line = b.reshape(img, [1, 1, 16]).unwrap();
    let k1 = b.reshape(k2, [1, 1, 4]).unwrap();
    let pool = Pool2dAttrs::new([2, 2]);
    let spec2: ConvSpec = Conv2dAttrs::default().into();
    let spec1: ConvSpec = Conv1dAttrs::default().into();
    let y2 = b.conv2d(img, k2, None, Conv2dAttrs::default()).unwrap();
    let y1 = b.conv1d(line, k1, None, Conv1dAttrs::default()).unwrap();
    let pooled = b.max_pool2d(img, pool).unwrap();
    vec![
        y2,
        y1,
        ConvInputGrad::new(spec2, [4, 4]).apply(b, y2, k2).unwrap(),
        ConvWeightGrad::new(spec2, [2, 2])
            .apply(b, img, y2)
            .unwrap(),
        ConvInputGrad::new(spec1, [1, 16]).apply(b, y1, k1).unwrap(),
        ConvWeightGrad::new(spec1, [1, 4])
            .apply(b, line, y1)
            .unwrap(),
        b.sum_pool2d(img, pool).unwrap(),
        b.avg_pool2d(img, pool).unwrap(),
        pooled,
        b.op(
            Arc::new(SumPool2dTranspose {
                attrs: pool,
                input_size: [4, 4],
            }),
            &[pooled],
        )
        .unwrap(),
        b.op(Arc::new(MaxPool2dSelect { attrs: pool }), &[img, img])
            .unwrap(),
        b.op(Arc::new(MaxPool2dScatter { attrs: pool }), &[img, pooled])
            .unwrap(),
    ]
}

/// A scan over the rows of `x` (2, 3) from `bias` (3): c' = c x_t + x_t, and its last carry.
fn scan_node(b: &mut Builder, x: Var, bias: Var) -> Var {
    let t = TensorType::new(DType::F64, [3]);
    let mut body = Builder::new();
    let c = body.input("c", t.clone(), InputKind::Data).unwrap();
    let xt = body.input("x_t", t, InputKind::Data).unwrap();
    let cx = body.mul(c, xt).unwrap();
    let c2 = body.add(cx, xt).unwrap();
    let body = body.finish(&[c2]).unwrap();
    let s = catml::prim::scan::Scan::new(body, 2, 1, 1, 0).unwrap();
    catml::prim::scan::scan(b, s, &[bias], &[x], &[])
        .unwrap()
        .final_carries[0]
}

#[test]
fn every_primitive_round_trips() {
    let (p, inputs) = every_primitive();
    let mut ops: Vec<&str> = p.nodes().iter().map(|n| n.prim.name()).collect();
    ops.sort_unstable();
    ops.dedup();
    let mut all: Vec<&str> = builtins().names().collect();
    all.sort_unstable();
    assert_eq!(ops, all, "the program should use every built-in primitive");
    assert_round_trips(&p, &inputs);
}

#[test]
fn attributes_survive_the_json_text() {
    let (p, _) = every_primitive();
    let text = json::to_string(&p);
    for fragment in [
        r#""op":"matmul","operands":["x","x"],"attrs":{"transpose_a":true}"#,
        r#""op":"matmul","operands":["x","x"],"attrs":{"transpose_b":true}"#,
        r#""attrs":{"transpose_a":true,"transpose_b":true}"#,
        r#""op":"sum","operands":["t.16"]}"#,
        r#""op":"sum","operands":["t.15"],"attrs":{"axes":[1]}"#,
        r#""attrs":{"dims":[],"shape":[2,3]}"#,
        r#""attrs":{"axis":1,"indices":[0,1,0],"size":2}"#,
        r#""attrs":{"dtype":"f32"}"#,
        r#""attrs":{"value":{"data":[0.5,-1.0,2.0,0.25,3.0,-0.125],"dtype":"f64","shape":[2,3]}}"#,
        r#"{"name":"k","shape":[3],"dtype":"i64"}"#,
        r#""parameters": ["W", "b"]"#,
    ] {
        assert!(text.contains(fragment), "missing {fragment} in\n{text}");
    }
}

/// Names outside the plain alphabet are quoted in the listing and read back.
#[test]
fn names_needing_quotes_and_tags_round_trip() {
    let mut b = Builder::new();
    let x = input(&mut b, "input x", DType::F32, &[2], InputKind::Data);
    let w = input(&mut b, "w:0", DType::F32, &[2], InputKind::Param);
    let e = input(&mut b, "", DType::F32, &[2], InputKind::Data);
    b.set_tag(Some("block one".into()));
    let h = b
        .apply_named("h(1)", Arc::new(catml::prim::Mul), &[x, w])
        .unwrap();
    b.set_tag(Some("lin2".into()));
    let q = b
        .apply_named("say \"hi\"", Arc::new(catml::prim::Tanh), &[h])
        .unwrap();
    b.set_tag(None);
    let u = b
        .apply_named("ünï", Arc::new(catml::prim::Add), &[q, e])
        .unwrap();
    let p = b.finish(&[u, q]).unwrap();
    let shown = listing::print(&p);
    assert_eq!(
        shown,
        r#"program(
  inputs:
    "input x": f32[2]
    "w:0": f32[2] param
    "": f32[2]
  instructions:
    0: "h(1)": f32[2] = mul("input x", "w:0") tag="block one"
    1: "say \"hi\"": f32[2] = tanh("h(1)") tag=lin2
    2: "ünï": f32[2] = add("say \"hi\"", "")
  outputs: "ünï", "say \"hi\""
)
"#
    );
    let inputs = vec![
        Tensor::f32([2], vec![0.5, -1.0]).unwrap(),
        Tensor::f32([2], vec![2.0, 0.25]).unwrap(),
        Tensor::f32([2], vec![1.0, 1.0]).unwrap(),
    ];
    assert_round_trips(&p, &inputs);
    assert_eq!(p.nodes()[0].tag.as_deref(), Some("block one"));
    assert_eq!(p.nodes()[2].tag, None);
}

/// Names that spell the listing's section keywords are quoted, so they are not read as
/// section headers.
#[test]
fn names_like_section_keywords_round_trip() {
    let mut b = Builder::new();
    let a = input(&mut b, "inputs", DType::F64, &[2], InputKind::Data);
    let c = input(&mut b, "instructions", DType::F64, &[2], InputKind::Data);
    let d = input(&mut b, "outputs", DType::F64, &[2], InputKind::Param);
    let s = b.add(a, c).unwrap();
    let y = b.mul(s, d).unwrap();
    let p = b.finish(&[y]).unwrap();
    let inputs = vec![
        Tensor::f64([2], vec![1.0, 2.0]).unwrap(),
        Tensor::f64([2], vec![3.0, 4.0]).unwrap(),
        Tensor::f64([2], vec![0.5, -1.0]).unwrap(),
    ];
    assert_round_trips(&p, &inputs);
}

#[test]
fn f32_constants_round_trip_exactly() {
    let mut b = Builder::new();
    let x = input(&mut b, "x", DType::F32, &[3], InputKind::Data);
    let c = b
        .constant(Tensor::f32([3], vec![0.1, 1.0 / 3.0, f32::MAX]).unwrap())
        .unwrap();
    let y = b.mul(x, c).unwrap();
    let p = b.finish(&[y]).unwrap();
    assert_round_trips(&p, &[Tensor::f32([3], vec![1.0, 3.0, 0.5]).unwrap()]);
}

/// A listing whose declared type disagrees with its primitive is rejected at that line.
#[test]
fn listing_with_a_wrong_declared_type_names_its_line() {
    let text = "program(
  inputs:
    x: f64[2]
  instructions:
    0: h: f64[2] = tanh(x)
    1: y: f64[3] = exp(h)
  outputs: y
)
";
    let err = listing::parse(text, builtins()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 6, column 11: instruction 1 `y` is declared f64[3] but its primitive gives f64[2]"
    );
}

/// Means, argmax, batch normalisation (both modes, every output) and the random primitives.
fn statistics_and_random_nodes(b: &mut Builder, x: Var, c: Var) -> Vec<Var> {
    use catml::prim::random::threefry::key;
    use catml::prim::Distribution;
    let k = b.constant(key(42)).unwrap();
    let (y, mean, var) = b.batch_norm_train(x, c, c, 1e-5).unwrap();
    let var_given = b.mul(c, c).unwrap();
    let keys = b.random_split(k, 2).unwrap();
    let folded = b.random_fold_in(k, 5).unwrap();
    vec![
        b.mean(x, Some(vec![1])).unwrap(),
        b.mean(x, None).unwrap(),
        b.argmax(x, 0).unwrap(),
        y,
        mean,
        var,
        b.batch_norm_infer(x, [c, c, c, var_given], 0.25).unwrap(),
        keys,
        b.random(
            folded,
            Distribution::Uniform,
            &TensorType::new(DType::F32, [2, 2]),
        )
        .unwrap(),
        b.random(k, Distribution::Normal, &TensorType::new(DType::F64, [3]))
            .unwrap(),
        b.dropout(k, x, 0.25).unwrap(),
    ]
}

/// Every comparison and connective, ending in one selection.
fn selection_node(b: &mut Builder, x: Var) -> Var {
    use catml::prim::compare::{Comparison, LogicalOp};
    let n = b.neg(x).unwrap();
    let masks: Vec<Var> = [
        Comparison::Equal,
        Comparison::Less,
        Comparison::LessEqual,
        Comparison::Greater,
        Comparison::GreaterEqual,
    ]
    .into_iter()
    .map(|c| b.compare(c, x, n).unwrap())
    .collect();
    let mut m = b.logical_not(masks[0]).unwrap();
    for (op, &q) in [
        LogicalOp::And,
        LogicalOp::Or,
        LogicalOp::Xor,
        LogicalOp::And,
    ]
    .iter()
    .zip(&masks[1..])
    {
        m = match op {
            LogicalOp::And => b.logical_and(m, q),
            LogicalOp::Or => b.logical_or(m, q),
            _ => b.logical_xor(m, q),
        }
        .unwrap();
    }
    b.select(m, x, n).unwrap()
}
