//! The composites at their edges: extreme inputs, rejected masks, indices and attributes,
//! integer inputs, the tie convention of reduce_max, names, serialisation and costs.

use std::sync::Arc;

use catml::ad::{jvp, vjp};
use catml::interp::{cost, eval, eval_with_report};
use catml::ir::{self, Builder, InputKind, Program, Var};
use catml::prim::{self, AttentionMask, Ops, Take};
use catml::tensor::{DType, Tensor, TensorType};
use catml::transform::lower;

fn input(b: &mut Builder, name: &str, dtype: DType, dims: &[usize]) -> Var {
    b.input(name, TensorType::new(dtype, dims.to_vec()), InputKind::Data)
        .unwrap()
}

fn one(p: &Program, x: &[Tensor]) -> Vec<f64> {
    eval(p, x).unwrap()[0].to_f64_vec()
}

#[test]
fn softmax_of_extremes_is_finite_and_exact() {
    for dtype in [DType::F32, DType::F64] {
        let x = Tensor::from_f64s(dtype, [3], vec![1000.0, 0.0, -1000.0]).unwrap();
        for (log, expected) in [(false, [1.0, 0.0, 0.0]), (true, [0.0, -1000.0, -2000.0])] {
            let mut b = Builder::new();
            let v = input(&mut b, "x", dtype, &[3]);
            let y = if log {
                b.log_softmax(v, 0).unwrap()
            } else {
                b.softmax(v, 0).unwrap()
            };
            let p = b.finish(&[y]).unwrap();
            assert_eq!(
                one(&p, std::slice::from_ref(&x)),
                expected,
                "{dtype} log={log}"
            );
            let low = lower(&p).unwrap();
            assert_eq!(one(&low, std::slice::from_ref(&x)), expected, "lowered");
            // The reverse pass is finite too: d/dx sum(softmax) = 0, d/dx sum(log_softmax) = 1 - 3p.
            let r = vjp(&p).unwrap();
            let seed = Tensor::from_f64s(dtype, [3], vec![1.0; 3]).unwrap();
            let out = eval(&r.program, &[x.clone(), seed]).unwrap();
            let g = out[r.layout.gradient_output(0).unwrap()].to_f64_vec();
            let want = if log { [-2.0, 1.0, 1.0] } else { [0.0; 3] };
            assert_eq!(g, want);
        }
    }
}

#[test]
fn masked_scores_above_the_allowed_ones_do_not_overflow() {
    // Key 1 is padding with a huge score; the kernel and the lowering both ignore it.
    let mut b = Builder::new();
    let s = input(&mut b, "s", DType::F32, &[1, 1, 2, 2]);
    let mask = AttentionMask::none().with_key_lengths(vec![1]);
    let y = b.masked_softmax(s, mask, 1.0).unwrap();
    let p = b.finish(&[y]).unwrap();
    let x = Tensor::f32([1, 1, 2, 2], vec![-500.0, 1000.0, 3.0, 1e30]).unwrap();
    assert_eq!(one(&p, std::slice::from_ref(&x)), [1.0, 0.0, 1.0, 0.0]);
    assert_eq!(one(&lower(&p).unwrap(), &[x]), [1.0, 0.0, 1.0, 0.0]);
}

#[test]
fn causal_softmax_matches_a_hand_computed_row() {
    let mut b = Builder::new();
    let s = input(&mut b, "s", DType::F64, &[1, 1, 2, 3]);
    let y = b.masked_softmax(s, AttentionMask::causal(), 1.0).unwrap();
    let p = b.finish(&[y]).unwrap();
    // Two queries over three keys, aligned at the end: row 0 sees keys 0..=1, row 1 all.
    let x = Tensor::f64([1, 1, 2, 3], vec![0.0, 2f64.ln(), 9.0, 0.0, 0.0, 3f64.ln()]).unwrap();
    let got = one(&p, &[x]);
    let want = [1.0 / 3.0, 2.0 / 3.0, 0.0, 0.2, 0.2, 0.6];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-15, "{got:?}");
    }
}

fn sdpa_error(tq: usize, tk: usize, mask: AttentionMask) -> String {
    let mut b = Builder::new();
    let q = input(&mut b, "q", DType::F64, &[2, 1, tq, 4]);
    let k = input(&mut b, "k", DType::F64, &[2, 1, tk, 4]);
    let v = input(&mut b, "v", DType::F64, &[2, 1, tk, 4]);
    b.sdpa(q, k, v, mask).unwrap_err().to_string()
}

#[test]
fn an_empty_allowed_key_set_is_rejected_naming_the_query_row() {
    assert_eq!(
        sdpa_error(3, 3, AttentionMask::none().with_key_lengths(vec![2, 0])),
        "attention mask: query row 0 of batch entry 1 has an empty allowed key set \
         (key length 0), expected at least one allowed key; 3 of 3 rows are empty"
    );
    assert_eq!(
        sdpa_error(3, 2, AttentionMask::causal()),
        "attention mask: query row 0 of batch entry 0 has an empty allowed key set \
         (causal mask with 3 queries and 2 keys), expected at least one allowed key; \
         1 of 3 rows are empty"
    );
    assert_eq!(
        sdpa_error(3, 3, AttentionMask::none().with_key_lengths(vec![2])),
        "attribute `key_lengths`: expected 2 entries (one per batch entry), found 1"
    );
    assert_eq!(
        sdpa_error(3, 3, AttentionMask::none().with_key_lengths(vec![2, 4])),
        "attribute `key_lengths`: batch entry 1 has length 4, expected at most the 3 keys"
    );
}

#[test]
fn take_out_of_range_is_a_domain_error_naming_the_node() {
    let mut b = Builder::new();
    let table = input(&mut b, "table", DType::F32, &[5, 2]);
    let idx = input(&mut b, "idx", DType::I64, &[3]);
    let emb = b.apply_named("emb", Arc::new(Take), &[table, idx]).unwrap();
    let p = b.finish(&[emb]).unwrap();
    let t = Tensor::f32([5, 2], vec![0.0; 10]).unwrap();
    for (bad, shown) in [(7, "7"), (-1, "-1")] {
        let i = Tensor::i64([3], vec![0, bad, 4]).unwrap();
        let err = eval(&p, &[t.clone(), i]).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "node 0 `emb` (take): outside the admissible domain: index {shown} at position 1 \
                 is out of range: expected 0 <= index < 5"
            )
        );
    }
    let ok = Tensor::i64([3], vec![4, 0, 4]).unwrap();
    let table = Tensor::f32([5, 2], (0..10).map(|v| v as f32).collect()).unwrap();
    assert_eq!(one(&p, &[table, ok]), [8.0, 9.0, 0.0, 1.0, 8.0, 9.0]);
}

#[test]
fn cross_entropy_rejects_a_label_out_of_range_and_matches_its_closed_form() {
    let mut b = Builder::new();
    let z = input(&mut b, "z", DType::F64, &[2, 3]);
    let y = input(&mut b, "y", DType::I64, &[2]);
    let l = b
        .apply_named("loss", Arc::new(prim::CrossEntropy), &[z, y])
        .unwrap();
    let p = b.finish(&[l]).unwrap();
    let zv = Tensor::f64([2, 3], vec![0.0, 0.0, 0.0, 1.0, 2.0, 3.0]).unwrap();
    let err = eval(&p, &[zv.clone(), Tensor::i64([2], vec![0, 3]).unwrap()]).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("node 0 `loss` (cross_entropy): outside"));
    let loss = one(&p, &[zv, Tensor::i64([2], vec![1, 2]).unwrap()])[0];
    let lse = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
    let want = (3f64.ln() + (lse - 3.0)) / 2.0;
    assert!((loss - want).abs() < 1e-15);
}

#[test]
fn layer_norm_rejects_a_nonpositive_eps() {
    for eps in [0.0, -1e-5, f64::NAN] {
        let mut b = Builder::new();
        let x = input(&mut b, "x", DType::F64, &[2, 3]);
        let err = b.layer_norm(x, vec![1], eps, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("attribute `eps`: expected a finite number > 0, found {eps}")
        );
        let attrs = ir::attrs_of([("axes", vec![1].into()), ("eps", eps.into())]);
        let made = prim::registry().construct("layer_norm", &attrs).unwrap();
        // JSON has no NaN: serde turns it into null, which is not a number.
        assert!(made.is_err());
    }
}

#[test]
fn layer_norm_rejects_bad_axes_and_parameters() {
    let mut b = Builder::new();
    let x = input(&mut b, "x", DType::F64, &[2, 3]);
    let g = input(&mut b, "g", DType::F64, &[2]);
    let e = |r: Result<Var, ir::TypeError>| r.unwrap_err().to_string();
    assert_eq!(
        e(b.layer_norm(x, vec![2], 1e-5, None)),
        "attribute `axes`: axis 2 is out of range for f64[2, 3]"
    );
    assert_eq!(
        e(b.layer_norm(x, vec![], 1e-5, None)),
        "attribute `axes`: expected at least one axis of f64[2, 3], found none"
    );
    assert_eq!(
        e(b.layer_norm(x, vec![1], 1e-5, Some((g, g)))),
        "operand 1 has type f64[2], expected f64[3] (the sizes of axes [1] of f64[2, 3])"
    );
}

#[test]
fn integer_inputs_move_through_structure_and_get_no_derivatives() {
    let mut b = Builder::new();
    let table = input(&mut b, "table", DType::F64, &[4, 2]);
    let idx = input(&mut b, "idx", DType::I64, &[2, 3]);
    let t = b.permute(idx, vec![1, 0]).unwrap();
    let t = b.reshape(t, [6]).unwrap();
    let t = b.gather(t, 0, vec![5, 0]).unwrap();
    let rows = b.take(table, t).unwrap();
    let s = b.sum(rows, None).unwrap();
    assert!(b.exp(idx).is_err(), "float functions refuse integers");
    let p = b.finish(&[s]).unwrap();
    let tv = Tensor::f64([4, 2], (0..8).map(|v| v as f64).collect()).unwrap();
    // idx^T flattened is [i00, i10, i01, i11, i02, i12]; elements 5 and 0 are i12 and i00.
    let iv = Tensor::i64([2, 3], vec![1, 0, 0, 0, 0, 3]).unwrap();
    assert_eq!(one(&p, &[tv.clone(), iv.clone()]), [2.0 + 3.0 + 6.0 + 7.0]);
    let j = jvp(&p).unwrap();
    assert_eq!(
        (j.layout.tangent_input(0), j.layout.tangent_input(1)),
        (Some(2), None)
    );
    let r = vjp(&p).unwrap();
    assert_eq!(r.layout.gradient_output(1), None);
    let out = eval(&r.program, &[tv, iv, Tensor::scalar(DType::F64, 1.0)]).unwrap();
    let g = out[r.layout.gradient_output(0).unwrap()].to_f64_vec();
    assert_eq!(g, [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
}

#[test]
fn take_rejects_float_indices_and_a_non_matrix_table() {
    let mut b = Builder::new();
    let table = input(&mut b, "table", DType::F64, &[4, 2]);
    let fidx = input(&mut b, "f", DType::F64, &[3]);
    let vec = input(&mut b, "v", DType::F64, &[4]);
    let idx = input(&mut b, "i", DType::I64, &[3]);
    assert_eq!(
        b.take(table, fidx).unwrap_err().to_string(),
        "operand 1 has dtype f64, expected i64 indices"
    );
    assert_eq!(
        b.take(vec, idx).unwrap_err().to_string(),
        "operand 0 has type f64[4], expected a table of rank 2 (rows, width)"
    );
}

#[test]
fn reduce_max_shares_the_derivative_among_ties() {
    let mut b = Builder::new();
    let x = input(&mut b, "x", DType::F64, &[2, 3]);
    let m = b.reduce_max(x, Some(vec![1])).unwrap();
    let p = b.finish(&[m]).unwrap();
    let xv = Tensor::f64([2, 3], vec![1.0, 3.0, 3.0, 5.0, -1.0, 2.0]).unwrap();
    assert_eq!(one(&p, std::slice::from_ref(&xv)), [3.0, 5.0]);
    let r = vjp(&p).unwrap();
    let seed = Tensor::f64([2], vec![1.0, 10.0]).unwrap();
    let out = eval(&r.program, &[xv.clone(), seed]).unwrap();
    assert_eq!(
        out[r.layout.gradient_output(0).unwrap()].to_f64_vec(),
        [0.0, 0.5, 0.5, 10.0, 0.0, 0.0]
    );
    let j = jvp(&p).unwrap();
    let v = Tensor::f64([2, 3], vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0]).unwrap();
    let out = eval(&j.program, &[xv.clone(), v]).unwrap();
    assert_eq!(out[1].to_f64_vec(), [3.0, 8.0]);
    let (_, report) = eval_with_report(&p, &[xv]).unwrap();
    assert_eq!(report.conventions.len(), 1);
    assert_eq!(report.conventions[0].elements, 2);
    assert_eq!(
        report.conventions[0].convention,
        "convention: at ties the derivative is shared equally among the maximal entries"
    );
}

#[test]
fn lowered_nodes_keep_the_name_and_tag_of_what_they_expand() {
    let mut b = Builder::new();
    let x = input(&mut b, "x", DType::F64, &[2, 3]);
    b.set_tag(Some("head".to_string()));
    let y = b
        .apply_named("probs", Arc::new(prim::Softmax { axis: 1 }), &[x])
        .unwrap();
    let p = b.finish(&[y]).unwrap();
    let low = lower(&p).unwrap();
    let names: Vec<&str> = low.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names.last(), Some(&"probs"));
    assert!(names.contains(&"probs/exp"), "{names:?}");
    assert!(names.contains(&"probs/reduce_max"), "{names:?}");
    assert!(low.nodes().iter().all(|n| n.tag.as_deref() == Some("head")));
    assert_eq!(low.name(low.outputs()[0]), "probs");
}

/// A program using every new primitive with non-default attributes.
fn everything() -> Program {
    let mut b = Builder::new();
    let x = input(&mut b, "x", DType::F64, &[2, 1, 3, 3]);
    let idx = input(&mut b, "idx", DType::I64, &[2]);
    let mask = AttentionMask::causal().with_key_lengths(vec![3, 2]);
    let s = b.sdpa(x, x, x, mask.clone()).unwrap();
    let s = b.attention_probs(s, x, mask.clone()).unwrap();
    let s = b.masked_softmax(s, mask, 0.5).unwrap();
    let s = b.batch_matmul(s, x, true, false).unwrap();
    let s = b.layer_norm(s, vec![3, 1], 0.5, None).unwrap();
    let s = b.softmax(s, 2).unwrap();
    let s = b.log_softmax(s, 3).unwrap();
    let s = b.softmax_pullback(s, s, 1, -0.5).unwrap();
    let m = b.reduce_max(s, Some(vec![0, 2])).unwrap();
    let w = b.max_weights(s, None).unwrap();
    let z = b.reshape(w, [6, 3]).unwrap();
    let t = b.take(z, idx).unwrap();
    let st = b.scatter_rows(t, idx, 6).unwrap();
    let oh = b.one_hot(idx, 3, DType::F64).unwrap();
    let ce = b.cross_entropy(oh, idx).unwrap();
    let mse = b.mse(st, z).unwrap();
    b.finish(&[m, ce, mse]).unwrap()
}

#[test]
fn composites_round_trip_through_json_and_the_listing() {
    let p = everything();
    let reg = prim::registry();
    let back = ir::json::from_str(&ir::json::to_string(&p), &reg).unwrap();
    assert_eq!(back, p);
    let listed = ir::listing::parse(&ir::listing::print(&p), &reg).unwrap();
    assert_eq!(listed, p);
}

#[test]
fn sdpa_counts_its_flops() {
    let mut b = Builder::new();
    let q = input(&mut b, "q", DType::F32, &[2, 3, 5, 4]);
    let k = input(&mut b, "k", DType::F32, &[2, 3, 7, 4]);
    let v = input(&mut b, "v", DType::F32, &[2, 3, 7, 6]);
    let y = b.sdpa(q, k, v, AttentionMask::none()).unwrap();
    let p = b.finish(&[y]).unwrap();
    // Q K^T: 2 * 30 * 7 * 4; softmax: 5 * 210; P V: 2 * (30 * 6) * 7.
    assert_eq!(cost(&p).flops, 2 * 210 * 4 + 5 * 210 + 2 * 180 * 7);
    let node = &p.nodes()[0];
    assert_eq!(node.prim.name(), "sdpa");
    assert_eq!(node.prim.rule(), ir::RuleKind::Exact);
}
