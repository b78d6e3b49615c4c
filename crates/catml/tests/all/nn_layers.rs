//! The `nn` layers: parameter counts by tag against the closed formulas, eager runs equal to
//! traced ones, attention and GRU layers against direct formulas written with values, and
//! errors that name the caller.

use catml::interp::{eval, params};
use catml::nn::{
    flatten, seeded, Conv1d, Conv2d, Embedding, Gru, Layer, LayerNorm, Linear, MultiHeadAttention,
    Pool2d, Rnn, Sequential,
};
use catml::prim::{Conv1dAttrs, Conv2dAttrs};
use catml::tensor::{DType, Params, Tensor, TensorType};
use catml::trace::{trace, value_and_grad, TraceError, Traced, Value};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn f64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

fn random(rng: &mut ChaCha8Rng, ty: &TensorType) -> Tensor {
    let data: Vec<f64> = (0..ty.numel())
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).unwrap()
}

/// Traces `layer` on one input of type `ty`; returns the trace and the parameter count of
/// `tag`.
fn traced_count(ty: &TensorType, layer: &dyn Layer, tag: &str) -> (Traced, usize) {
    let mut rng = seeded(1);
    let t = trace(std::slice::from_ref(ty), |x| {
        layer.forward(&x[0], &mut rng, tag)
    })
    .unwrap();
    let count = params(&t.program);
    assert_eq!(
        count.by_tag.len(),
        usize::from(count.total > 0),
        "{:?}",
        count.by_tag
    );
    let n = count.by_tag.get(tag).copied().unwrap_or(0);
    assert_eq!(n, count.total);
    (t, n)
}

#[test]
fn parameter_counts_match_closed_formulas() {
    for (inp, out) in [(1, 1), (3, 5), (17, 4)] {
        let (_, n) = traced_count(&f64t(&[2, inp]), &Linear::new(out), "fc");
        assert_eq!(n, out * inp + out);
    }
    for (c, o, kh, kw, g) in [(1, 4, 3, 3, 1), (6, 9, 2, 3, 3), (4, 4, 1, 1, 4)] {
        let layer = Conv2d::new(o, [kh, kw]).attrs(Conv2dAttrs::default().groups(g).pad(1));
        let (_, n) = traced_count(&f64t(&[2, c, 6, 7]), &layer, "conv");
        assert_eq!(n, o * (c / g) * kh * kw + o);
        let (_, n) = traced_count(&f64t(&[2, c, 6, 7]), &layer.no_bias(), "conv");
        assert_eq!(n, o * (c / g) * kh * kw);
    }
    for (c, o, k, g) in [(2, 3, 3, 1), (6, 4, 2, 2)] {
        let layer = Conv1d::new(o, k).attrs(Conv1dAttrs {
            groups: g,
            ..Conv1dAttrs::default()
        });
        let (_, n) = traced_count(&f64t(&[3, c, 9]), &layer, "conv1");
        assert_eq!(n, o * (c / g) * k + o);
    }
    let (_, n) = traced_count(&f64t(&[2, 3, 8, 8]), &Pool2d::max([2, 2]), "pool");
    assert_eq!(n, 0);
    for (axes, dims, m) in [
        (1, vec![4, 5], 5),
        (2, vec![2, 3, 4], 12),
        (3, vec![2, 3, 4], 24),
    ] {
        let (_, n) = traced_count(&f64t(&dims), &LayerNorm::new().trailing(axes), "ln");
        assert_eq!(n, 2 * m);
        let (_, n) = traced_count(&f64t(&dims), &LayerNorm::new().no_affine(), "ln");
        assert_eq!(n, 0);
    }
    for (heads, d, t) in [(1, 4, 3), (2, 8, 5), (4, 12, 2)] {
        let (_, n) = traced_count(&f64t(&[2, t, d]), &MultiHeadAttention::new(heads, d), "att");
        assert_eq!(n, 4 * (d * d + d));
    }
    for (v, d) in [(1, 1), (11, 7)] {
        let mut rng = seeded(0);
        let ix = TensorType::new(DType::I64, [3, 2]);
        let t = trace(&[ix], |x| {
            Embedding::new(v, d).apply(&x[0], &mut rng, "emb")
        })
        .unwrap();
        assert_eq!(params(&t.program).by_tag["emb"], v * d);
    }
}

#[test]
fn cross_attention_and_recurrent_counts() {
    let (heads, d, dq, dkv, dout) = (2, 6, 5, 3, 4);
    let mut rng = seeded(0);
    let tys = [f64t(&[2, 4, dq]), f64t(&[2, 7, dkv])];
    let layer = MultiHeadAttention {
        out: Some(dout),
        ..MultiHeadAttention::new(heads, d)
    };
    let t = trace(&tys, |x| layer.attend(&x[0], &x[1], &mut rng, "x")).unwrap();
    assert_eq!(t.program.output_types()[0].dims(), &[2, 4, dout]);
    let count = params(&t.program).by_tag["x"];
    assert_eq!(count, d * dq + d + 2 * (d * dkv + d) + dout * d + dout);

    for (steps, batch, width, hidden) in [(1, 1, 1, 1), (4, 3, 5, 2)] {
        let tys = [f64t(&[steps, batch, width]), f64t(&[batch, hidden])];
        let mut rng = seeded(0);
        let t = trace(&tys, |x| {
            Rnn::new(hidden).apply(&x[0], &x[1], &mut rng, "rnn").all
        })
        .unwrap();
        let (h, w) = (hidden, width);
        assert_eq!(params(&t.program).by_tag["rnn"], h * w + h * h + h);
        assert_eq!(t.program.output_types()[0].dims(), &[steps, batch, hidden]);
        let mut rng = seeded(0);
        let t = trace(&tys, |x| {
            Gru::new(hidden).apply(&x[0], &x[1], &mut rng, "gru").last
        })
        .unwrap();
        assert_eq!(
            params(&t.program).by_tag["gru"],
            3 * h * w + 3 * h * h + 6 * h
        );
        assert_eq!(t.program.output_types()[0].dims(), &[batch, hidden]);
    }
}

/// A small network of every layer with one input, for counts and eager-vs-traced checks.
fn network() -> Sequential {
    Sequential::new()
        .push("conv", Conv2d::new(4, [3, 3]).pad(1))
        .push("relu", |x: &Value| x.relu())
        .push("pool", Pool2d::avg([2, 2]))
        .push("flat", flatten)
        .push("ln", LayerNorm::new())
        .push("fc", Linear::new(6))
        .push("tokens", |x: &Value| x.reshape([2, 3, 2]))
        .push("att", MultiHeadAttention::new(2, 2).causal())
        .push("out", |x: &Value| x.tanh().sum_all())
}

#[test]
fn sequential_counts_sum_the_layers_and_nest_tags() {
    let net = network();
    let x = f64t(&[2, 2, 4, 4]);
    let mut rng = seeded(3);
    let t = trace(std::slice::from_ref(&x), |v| net.apply(&v[0], &mut rng, "")).unwrap();
    let c = params(&t.program);
    assert_eq!(c.by_tag["conv"], 4 * 2 * 9 + 4);
    assert_eq!(c.by_tag["ln"], 2 * 16);
    assert_eq!(c.by_tag["fc"], 6 * 16 + 6);
    assert_eq!(c.by_tag["att"], 4 * (2 * 2 + 2));
    assert_eq!(c.total, 76 + 32 + 102 + 24);
    assert_eq!(c.by_tag.len(), 4);

    let outer = Sequential::new().push("body", network());
    let mut rng = seeded(3);
    let t = trace(&[x], |v| outer.apply(&v[0], &mut rng, "net")).unwrap();
    let c = params(&t.program);
    assert_eq!(c.by_tag["net.body.fc"], 6 * 16 + 6);
    assert!(t.params.get("net.body.att.Wq").is_some());
}

#[test]
fn eager_runs_equal_traced_runs_bit_for_bit() {
    let net = network();
    let ty = f64t(&[2, 2, 4, 4]);
    let x = random(&mut ChaCha8Rng::seed_from_u64(9), &ty);
    let eager = net
        .apply(&Value::from(x.clone()), &mut seeded(5), "")
        .into_tensor()
        .unwrap();
    let mut rng = seeded(5);
    let t = trace(&[ty], |v| net.apply(&v[0], &mut rng, "")).unwrap();
    assert_eq!(t.eval(&[x]).unwrap()[0], eager);

    // Recurrences: both outputs.
    let (xt, ht) = (f64t(&[5, 2, 3]), f64t(&[2, 4]));
    let mut r = ChaCha8Rng::seed_from_u64(10);
    let (xs, h0) = (random(&mut r, &xt), random(&mut r, &ht));
    let s = Gru::new(4).apply(&xs.clone().into(), &h0.clone().into(), &mut seeded(2), "g");
    let mut rng = seeded(2);
    let t = trace(&[xt, ht], |v| {
        let s = Gru::new(4).apply(&v[0], &v[1], &mut rng, "g");
        vec![s.all, s.last]
    })
    .unwrap();
    let out = t.eval(&[xs, h0]).unwrap();
    assert_eq!(out[0], s.all.into_tensor().unwrap());
    assert_eq!(out[1], s.last.into_tensor().unwrap());
}

fn p(params: &Params, name: &str) -> Value {
    Value::from(params.get(name).unwrap().clone())
}

/// (B, T, D) -> (B T, D) -> linear -> (B, T, out).
fn project(x: &Value, w: &Value, b: &Value) -> Value {
    let d = x.ty().unwrap().dims().to_vec();
    let out = w.ty().unwrap().dims()[0];
    x.reshape([d[0] * d[1], d[2]])
        .linear(w, b)
        .reshape([d[0], d[1], out])
}

#[test]
fn attention_layer_equals_the_formula_head_by_head() {
    let (batch, t, d, heads) = (2, 4, 6, 3);
    let hd = d / heads;
    let ty = f64t(&[batch, t, d]);
    let x = random(&mut ChaCha8Rng::seed_from_u64(4), &ty);
    let layer = MultiHeadAttention::new(heads, d).causal();
    let mut rng = seeded(8);
    let traced = trace(&[ty], |v| layer.apply(&v[0], &mut rng, "att")).unwrap();
    let got = traced
        .eval(std::slice::from_ref(&x))
        .unwrap()
        .remove(0)
        .to_f64_vec();

    let w = &traced.params;
    let xv = Value::from(x);
    let q = project(&xv, &p(w, "att.Wq"), &p(w, "att.bq"))
        .into_tensor()
        .unwrap();
    let k = project(&xv, &p(w, "att.Wk"), &p(w, "att.bk"))
        .into_tensor()
        .unwrap();
    let v = project(&xv, &p(w, "att.Wv"), &p(w, "att.bv"))
        .into_tensor()
        .unwrap();
    let (q, k, v) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
    // y[b, i, h hd + c] = sum_{j <= i} softmax_j(q_i . k_j / sqrt(hd)) v[b, j, h hd + c].
    let at = |m: &[f64], b: usize, i: usize, c: usize| m[(b * t + i) * d + c];
    let mut y = vec![0.0; batch * t * d];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..t {
                let s: Vec<f64> = (0..=i)
                    .map(|j| {
                        let dot: f64 = (0..hd)
                            .map(|c| at(&q, b, i, h * hd + c) * at(&k, b, j, h * hd + c))
                            .sum();
                        dot / (hd as f64).sqrt()
                    })
                    .collect();
                let z: f64 = s.iter().map(|e| e.exp()).sum();
                for c in 0..hd {
                    y[(b * t + i) * d + h * hd + c] = (0..=i)
                        .map(|j| s[j].exp() / z * at(&v, b, j, h * hd + c))
                        .sum();
                }
            }
        }
    }
    let y = Value::from(Tensor::f64([batch, t, d], y).unwrap());
    let want = project(&y, &p(w, "att.Wo"), &p(w, "att.bo"))
        .into_tensor()
        .unwrap()
        .to_f64_vec();
    let err = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-13, "{err}");
}

#[test]
fn gru_layer_equals_the_cell_formula() {
    let (steps, batch, width, hidden) = (3, 2, 3, 4);
    let (xt, ht) = (f64t(&[steps, batch, width]), f64t(&[batch, hidden]));
    let mut r = ChaCha8Rng::seed_from_u64(12);
    let (xs, h0) = (random(&mut r, &xt), random(&mut r, &ht));
    let mut rng = seeded(6);
    let traced = trace(&[xt, ht], |v| {
        Gru::new(hidden).apply(&v[0], &v[1], &mut rng, "gru").last
    })
    .unwrap();
    let got = traced.eval(&[xs.clone(), h0.clone()]).unwrap().remove(0);

    let w = &traced.params;
    let rows =
        |m: &str, k: usize| p(w, m).gather(0, &(k * hidden..(k + 1) * hidden).collect::<Vec<_>>());
    let xs = Value::from(xs);
    let mut h = Value::from(h0);
    for step in 0..steps {
        let x = xs.gather(0, &[step]).reshape([batch, width]);
        let gate = |k: usize, h: &Value| {
            (
                x.linear(&rows("gru.W_ih", k), &rows("gru.b_ih", k)),
                h.linear(&rows("gru.W_hh", k), &rows("gru.b_hh", k)),
            )
        };
        let (xr, hr) = gate(0, &h);
        let (xz, hz) = gate(1, &h);
        let (xn, hn) = gate(2, &h);
        let r = (&xr + &hr).sigmoid();
        let z = (&xz + &hz).sigmoid();
        let n = (&xn + &(&r * &hn)).tanh();
        // h' = (1 - z) n + z h.
        let one = Value::full(1.0, &z.ty().unwrap());
        h = &(&(&one - &z) * &n) + &(&z * &h);
    }
    let want = h.into_tensor().unwrap();
    let err = got
        .to_f64_vec()
        .iter()
        .zip(want.to_f64_vec())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-14, "{err}");
}

#[test]
fn every_layer_passes_gradients_to_its_parameters() {
    let net = network();
    let x = random(&mut ChaCha8Rng::seed_from_u64(1), &f64t(&[2, 2, 4, 4]));
    let mut f = value_and_grad(|v: &[Value]| net.apply(&v[0], &mut seeded(4), ""));
    let init = {
        let mut rng = seeded(4);
        trace(&[f64t(&[2, 2, 4, 4])], |v| net.apply(&v[0], &mut rng, ""))
            .unwrap()
            .params
    };
    let r = f.call(&init, &[x]).unwrap();
    for (name, _) in init.iter() {
        let g = r.grads.params.get(name).unwrap();
        assert!(
            g.to_f64_vec().iter().any(|v| *v != 0.0),
            "{name}: zero gradient"
        );
    }
    for tag in ["conv", "ln", "fc", "att"] {
        assert!(r.grads.by_tag.contains_key(tag), "{tag}");
    }
}

#[test]
fn layer_errors_name_the_caller_and_change_nothing() {
    let mut rng = seeded(0);
    // Width 6 cannot be split into 4 heads.
    let e = trace(&[f64t(&[1, 2, 6])], |v| {
        MultiHeadAttention::new(4, 6).apply(&v[0], &mut rng, "att")
    })
    .unwrap_err();
    assert!(
        matches!(&e, TraceError::Type { op, .. } if op == "multi_head_attention"),
        "{e}"
    );
    assert!(e.to_string().contains("nn_layers.rs"), "{e}");
    assert!(e.to_string().contains("not divisible by 4 heads"), "{e}");

    // A convolution of a rank-3 value.
    let x = Value::from(Tensor::full(&f64t(&[1, 2, 5]), 1.0));
    let e = Conv2d::new(2, [3, 3])
        .apply(&x, &mut rng, "c")
        .into_tensor()
        .unwrap_err();
    assert!(matches!(&e, TraceError::Type { .. }), "{e}");
    assert!(e.to_string().contains("nn_layers.rs"), "{e}");

    // An index outside the table, eagerly.
    let ix = Value::from(Tensor::i64([2], vec![0, 5]).unwrap());
    let e = Embedding::new(5, 2)
        .apply(&ix, &mut rng, "emb")
        .into_tensor()
        .unwrap_err();
    assert!(matches!(&e, TraceError::Kernel { .. }), "{e}");

    // A recurrence whose initial state does not fit the batch.
    let xs = Value::from(Tensor::full(&f64t(&[3, 2, 1]), 0.5));
    let h0 = Value::from(Tensor::full(&f64t(&[3, 4]), 0.0));
    let e = Rnn::new(4)
        .apply(&xs, &h0, &mut rng, "rnn")
        .last
        .into_tensor()
        .unwrap_err();
    assert!(e.to_string().contains("initial state"), "{e}");
}

#[test]
fn the_attention_layer_records_one_node_for_all_heads() {
    let ty = f64t(&[2, 3, 4]);
    let x = Tensor::full(&ty, 0.25);
    let mut outputs = Vec::new();
    for (recompute, fused) in [(false, "attention_probs"), (true, "sdpa")] {
        let layer = MultiHeadAttention {
            recompute_weights: recompute,
            ..MultiHeadAttention::new(2, 4)
        };
        let mut rng = seeded(0);
        let t = trace(std::slice::from_ref(&ty), |v| {
            layer.apply(&v[0], &mut rng, "a")
        })
        .unwrap();
        let ops: Vec<&str> = t.program.nodes().iter().map(|n| n.prim.name()).collect();
        assert_eq!(ops.iter().filter(|o| **o == fused).count(), 1, "{ops:?}");
        assert_eq!(ops.iter().filter(|o| **o == "linear").count(), 4);
        let args =
            catml::trace::arguments(&t.program, &t.params, std::slice::from_ref(&x)).unwrap();
        outputs.push(eval(&t.program, &args).unwrap().remove(0).to_f64_vec());
    }
    let err = outputs[0]
        .iter()
        .zip(&outputs[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-14, "{err}");
}

#[test]
fn a_tag_used_twice_is_reported_at_the_second_use() {
    let x = f64t(&[2, 3, 4]);
    let rows = f64t(&[2, 4]);
    let image = f64t(&[1, 2, 5, 5]);
    let twice = |ty: &TensorType, layer: &dyn Layer| {
        let mut rng = seeded(0);
        trace(std::slice::from_ref(ty), |v| {
            let h = layer.forward(&v[0], &mut rng, "same");
            layer.forward(&h, &mut rng, "same")
        })
        .unwrap_err()
    };
    let layers: [(&TensorType, &dyn Layer); 5] = [
        (&rows, &Linear::new(4)),
        (&image, &Conv2d::new(2, [1, 1])),
        (&x, &LayerNorm::new()),
        (&x, &MultiHeadAttention::new(2, 4)),
        (&rows, &Embedding::new(3, 4)),
    ];
    for (ty, layer) in layers {
        let e = twice(ty, layer);
        let text = e.to_string();
        if !matches!(e, TraceError::DuplicateParam { .. }) {
            // The embedding of a float value fails earlier, at its type rule.
            assert!(text.contains("take"), "{text}");
            continue;
        }
        assert!(text.contains("nn_layers.rs"), "{text}");
        assert!(text.contains("same."), "{text}");
    }
    let mut rng = seeded(0);
    let e = trace(&[f64t(&[2, 1, 3]), f64t(&[1, 2])], |v| {
        let s = Gru::new(2).apply(&v[0], &v[1], &mut rng, "g");
        Gru::new(2).apply(&v[0], &s.last, &mut rng, "g").last
    })
    .unwrap_err();
    assert!(e.to_string().contains("nn_layers.rs"), "{e}");
}

#[test]
fn degenerate_layer_settings_are_errors_not_panics() {
    let x2 = Value::from(Tensor::full(&f64t(&[2, 3]), 0.5));
    let x3 = Value::from(Tensor::full(&f64t(&[2, 3, 4]), 0.5));
    let image = Value::from(Tensor::full(&f64t(&[1, 2, 5, 5]), 0.5));
    let ids = Value::from(Tensor::i64([2], vec![0, 1]).unwrap());
    let mut rng = seeded(0);
    let outcomes: Vec<(&str, Value)> = vec![
        (
            "linear of a scalar",
            Linear::new(2).apply(&Value::from(Tensor::scalar(DType::F64, 1.0)), &mut rng, "a"),
        ),
        (
            "conv, zero groups",
            Conv2d::new(2, [3, 3])
                .attrs(Conv2dAttrs::default().groups(0))
                .apply(&image, &mut rng, "b"),
        ),
        (
            "conv, groups not dividing C",
            Conv2d::new(2, [3, 3])
                .attrs(Conv2dAttrs::default().groups(3))
                .apply(&image, &mut rng, "c"),
        ),
        (
            "an embedding table of 2^60 bytes",
            Embedding::new(1 << 40, 1 << 20).apply(&ids, &mut rng, "big"),
        ),
        (
            "a weight whose element count overflows",
            Linear::new(usize::MAX).apply(&x2, &mut rng, "huge"),
        ),
        (
            "conv, empty kernel",
            Conv2d::new(2, [0, 3]).apply(&image, &mut rng, "d"),
        ),
        (
            "conv, kernel larger than the input",
            Conv2d::new(2, [9, 9]).apply(&image, &mut rng, "e"),
        ),
        (
            "pool, zero stride",
            Pool2d::max([2, 2]).stride([0, 1]).apply(&image, "f"),
        ),
        (
            "layer norm over no axes",
            LayerNorm::new().trailing(0).apply(&x2, &mut rng, "g"),
        ),
        (
            "layer norm over more axes than x has",
            LayerNorm::new().trailing(3).apply(&x2, &mut rng, "h"),
        ),
        (
            "layer norm with eps 0",
            LayerNorm {
                eps: 0.0,
                ..LayerNorm::new()
            }
            .apply(&x2, &mut rng, "i"),
        ),
        (
            "embedding of an empty vocabulary",
            Embedding::new(0, 3).apply(&ids, &mut rng, "j"),
        ),
        (
            "attention with no heads",
            MultiHeadAttention::new(0, 4).apply(&x3, &mut rng, "k"),
        ),
        (
            "attention of a matrix",
            MultiHeadAttention::new(1, 4).apply(&x2, &mut rng, "l"),
        ),
        (
            "rnn of a matrix",
            Rnn::new(2).apply(&x2, &x2, &mut rng, "m").last,
        ),
        (
            "gru with a state of another dtype",
            Gru::new(2)
                .apply(
                    &x3,
                    &Value::from(Tensor::full(&TensorType::new(DType::F32, [3, 2]), 0.0)),
                    &mut rng,
                    "n",
                )
                .last,
        ),
    ];
    for (what, v) in outcomes {
        let e = v.into_tensor().expect_err(what);
        assert!(e.to_string().contains("nn_layers.rs"), "{what}: {e}");
    }
}

#[test]
fn a_recurrence_in_a_sequence_starts_from_zeros() {
    let (steps, batch, width, hidden) = (4, 2, 3, 5);
    let xt = f64t(&[steps, batch, width]);
    let xs = random(&mut ChaCha8Rng::seed_from_u64(30), &xt);
    let net = Sequential::new()
        .push("gru", Gru::new(hidden))
        .push("rnn", Rnn::new(hidden));
    let got = net
        .apply(&Value::from(xs.clone()), &mut seeded(7), "")
        .into_tensor()
        .unwrap();
    assert_eq!(got.dims(), &[steps, batch, hidden]);
    let mut rng = seeded(7);
    let zeros = Value::from(Tensor::full(&f64t(&[batch, hidden]), 0.0));
    let h = Gru::new(hidden)
        .apply(&Value::from(xs), &zeros, &mut rng, "gru")
        .all;
    let want = Rnn::new(hidden).apply(&h, &zeros, &mut rng, "rnn").all;
    assert_eq!(got, want.into_tensor().unwrap());
}
