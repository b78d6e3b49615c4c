//! Each composite against its lowering, over random shapes and attributes: forward values,
//! JVP and VJP (kernel rules vs the lowering's), the adjoint identity, central differences and
//! a second-order check (see `lowering_checks::check`).

use crate::lowering_checks;

use catml::ir::{Builder, InputKind, Program, Var};
use catml::prim::{AttentionMask, Ops};
use catml::tensor::{DType, Tensor, TensorType};
use lowering_checks::{check, f64s, indices, random, rng, Rng};
use rand::RngExt;

const TOL: f64 = 1e-9;

fn input(b: &mut Builder, name: &str, ty: TensorType) -> Var {
    b.input(name, ty, InputKind::Data).unwrap()
}

fn dims(r: &mut Rng, rank: usize, max: usize) -> Vec<usize> {
    (0..rank).map(|_| r.random_range(1..=max)).collect()
}

/// A random nonempty subset of the axes of a rank-`rank` tensor, in random order.
fn some_axes(r: &mut Rng, rank: usize) -> Vec<usize> {
    loop {
        let mut a: Vec<usize> = (0..rank).filter(|_| r.random_bool(0.5)).collect();
        if !a.is_empty() {
            if r.random_bool(0.5) {
                a.reverse();
            }
            return a;
        }
    }
}

#[test]
fn softmax_and_log_softmax_match_their_lowerings_on_every_axis() {
    for seed in 0..12 {
        let mut r = rng(seed);
        let rank = r.random_range(1..=3);
        let d = dims(&mut r, rank, 4);
        let axis = r.random_range(0..rank);
        let log = seed % 2 == 1;
        let mut b = Builder::new();
        let x = input(&mut b, "x", f64s(&d));
        let y = if log {
            b.log_softmax(x, axis).unwrap()
        } else {
            b.softmax(x, axis).unwrap()
        };
        let p = b.finish(&[y]).unwrap();
        let xv = random(&mut r, &f64s(&d), 4.0);
        check(&p, &[xv], seed, TOL);
    }
}

#[test]
fn softmax_rows_sum_to_one_in_f32() {
    let mut r = rng(99);
    let mut b = Builder::new();
    let ty = TensorType::new(DType::F32, [3, 5]);
    let x = input(&mut b, "x", ty.clone());
    let y = b.softmax(x, 1).unwrap();
    let p = b.finish(&[y]).unwrap();
    let xv = random(&mut r, &ty, 10.0);
    let out = catml::interp::eval(&p, std::slice::from_ref(&xv)).unwrap();
    let low = catml::interp::eval(&catml::transform::lower(&p).unwrap(), &[xv]).unwrap();
    lowering_checks::assert_close("f32 softmax vs lowering", &out[0], &low[0], 1e-6);
    for row in out[0].to_f64_vec().chunks(5) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    }
}

#[test]
fn softmax_pullback_matches_its_lowering() {
    for seed in 0..8 {
        let mut r = rng(1100 + seed);
        let rank = r.random_range(1..=3);
        let d = dims(&mut r, rank, 4);
        let axis = r.random_range(0..rank);
        let scale = [1.0, 0.25, -1.5][seed as usize % 3];
        let mut b = Builder::new();
        let y = input(&mut b, "y", f64s(&d));
        let v = input(&mut b, "v", f64s(&d));
        let out = b.softmax_pullback(y, v, axis, scale).unwrap();
        let p = b.finish(&[out]).unwrap();
        let xs = [
            random(&mut r, &f64s(&d), 1.0),
            random(&mut r, &f64s(&d), 1.0),
        ];
        check(&p, &xs, seed, TOL);
    }
}

#[test]
fn tanh_pullback_matches_its_lowering() {
    for seed in 0..6 {
        let mut r = rng(1150 + seed);
        let rank = r.random_range(0..=3);
        let d = dims(&mut r, rank, 4);
        let mut b = Builder::new();
        let y = input(&mut b, "y", f64s(&d));
        let u = input(&mut b, "u", f64s(&d));
        let out = b.tanh_pullback(y, u).unwrap();
        let p = b.finish(&[out]).unwrap();
        let xs = [
            random(&mut r, &f64s(&d), 1.0),
            random(&mut r, &f64s(&d), 2.0),
        ];
        check(&p, &xs, seed, TOL);
    }
}

#[test]
fn reduce_max_rules_hold_away_from_ties() {
    for seed in 0..6 {
        let mut r = rng(100 + seed);
        let rank = r.random_range(1..=3);
        let d = dims(&mut r, rank, 4);
        let axes = some_axes(&mut r, rank);
        let mut b = Builder::new();
        let x = input(&mut b, "x", f64s(&d));
        let y = b.reduce_max(x, Some(axes)).unwrap();
        let p = b.finish(&[y]).unwrap();
        let xv = random(&mut r, &f64s(&d), 1.0);
        check(&p, &[xv], seed, TOL);
    }
}

#[test]
fn cross_entropy_matches_its_lowering() {
    for seed in 0..8 {
        let mut r = rng(200 + seed);
        let (batch, classes) = (r.random_range(1..=5), r.random_range(1..=6));
        let mut b = Builder::new();
        let z = input(&mut b, "z", f64s(&[batch, classes]));
        let y = input(&mut b, "y", TensorType::new(DType::I64, [batch]));
        let l = b.cross_entropy(z, y).unwrap();
        let p = b.finish(&[l]).unwrap();
        let zv = random(&mut r, &f64s(&[batch, classes]), 3.0);
        let yv = indices(&mut r, &[batch], classes);
        check(&p, &[zv, yv], seed, TOL);
    }
}

#[test]
fn mse_matches_its_lowering() {
    for seed in 0..6 {
        let mut r = rng(300 + seed);
        let rank = r.random_range(0..=3);
        let d = dims(&mut r, rank, 4);
        let mut b = Builder::new();
        let x = input(&mut b, "x", f64s(&d));
        let t = input(&mut b, "t", f64s(&d));
        let l = b.mse(x, t).unwrap();
        let p = b.finish(&[l]).unwrap();
        let xs = [
            random(&mut r, &f64s(&d), 2.0),
            random(&mut r, &f64s(&d), 2.0),
        ];
        check(&p, &xs, seed, TOL);
    }
}

#[test]
fn layer_norm_matches_its_lowering_over_any_axes() {
    for seed in 0..12 {
        let mut r = rng(400 + seed);
        let rank = r.random_range(1..=3);
        let d = dims(&mut r, rank, 4);
        let axes = some_axes(&mut r, rank);
        let eps = [1e-5, 0.1, 1.0][seed as usize % 3];
        let affine = seed % 2 == 0;
        let mut sorted = axes.clone();
        sorted.sort_unstable();
        let pd: Vec<usize> = sorted.iter().map(|&a| d[a]).collect();
        let mut b = Builder::new();
        let x = input(&mut b, "x", f64s(&d));
        let mut xs = vec![random(&mut r, &f64s(&d), 2.0)];
        let params = if affine {
            let g = b.input("gamma", f64s(&pd), InputKind::Param).unwrap();
            let be = b.input("beta", f64s(&pd), InputKind::Param).unwrap();
            xs.push(random(&mut r, &f64s(&pd), 1.5));
            xs.push(random(&mut r, &f64s(&pd), 1.0));
            Some((g, be))
        } else {
            None
        };
        let y = b.layer_norm(x, axes, eps, params).unwrap();
        let p = b.finish(&[y]).unwrap();
        check(&p, &xs, seed, 1e-8);
    }
}

/// A mask for `batch` entries of `tq` queries and `tk` >= `tq` keys: none, causal, key
/// lengths, or both.
fn random_mask(r: &mut Rng, batch: usize, tk: usize, kind: u64) -> AttentionMask {
    let mut m = AttentionMask::none();
    if kind % 2 == 1 {
        m = AttentionMask::causal();
    }
    if kind / 2 % 2 == 1 {
        m = m.with_key_lengths((0..batch).map(|_| r.random_range(1..=tk)).collect());
    }
    m
}

#[test]
fn batch_matmul_matches_its_lowering_with_transposes() {
    for seed in 0..8 {
        let mut r = rng(500 + seed);
        let lead_rank = r.random_range(1..=2);
        let lead = dims(&mut r, lead_rank, 3);
        let (m, k, n) = (
            r.random_range(1..=4),
            r.random_range(1..=4),
            r.random_range(1..=4),
        );
        let (ta, tb) = (seed % 2 == 1, seed / 2 % 2 == 1);
        let with = |x: usize, y: usize| {
            let mut d = lead.clone();
            d.extend([x, y]);
            d
        };
        let ad = if ta { with(k, m) } else { with(m, k) };
        let bd = if tb { with(n, k) } else { with(k, n) };
        let mut b = Builder::new();
        let a = input(&mut b, "a", f64s(&ad));
        let c = input(&mut b, "b", f64s(&bd));
        let y = b.batch_matmul(a, c, ta, tb).unwrap();
        let p = b.finish(&[y]).unwrap();
        let xs = [
            random(&mut r, &f64s(&ad), 1.0),
            random(&mut r, &f64s(&bd), 1.0),
        ];
        check(&p, &xs, seed, TOL);
    }
}

#[test]
fn masked_softmax_matches_its_lowering_with_every_mask() {
    for seed in 0..8 {
        let mut r = rng(600 + seed);
        let (batch, heads) = (r.random_range(1..=2), r.random_range(1..=2));
        let tq = r.random_range(1..=4);
        let tk = tq + r.random_range(0..=2);
        let mask = random_mask(&mut r, batch, tk, seed);
        let d = [batch, heads, tq, tk];
        let mut b = Builder::new();
        let s = input(&mut b, "s", f64s(&d));
        let scale = [1.0, 0.5, 2.0][seed as usize % 3];
        let y = b.masked_softmax(s, mask, scale).unwrap();
        let p = b.finish(&[y]).unwrap();
        check(&p, &[random(&mut r, &f64s(&d), 3.0)], seed, TOL);
    }
}

#[test]
fn sdpa_matches_its_lowering_with_heads_and_masks() {
    for seed in 0..8 {
        let mut r = rng(700 + seed);
        let (batch, heads) = (r.random_range(1..=2), r.random_range(1..=3));
        let tq = r.random_range(1..=4);
        let tk = tq + r.random_range(0..=2);
        let (d, dv) = (r.random_range(1..=4), r.random_range(1..=3));
        let mask = random_mask(&mut r, batch, tk, seed);
        let mut b = Builder::new();
        let tys = [
            f64s(&[batch, heads, tq, d]),
            f64s(&[batch, heads, tk, d]),
            f64s(&[batch, heads, tk, dv]),
        ];
        let q = input(&mut b, "q", tys[0].clone());
        let k = input(&mut b, "k", tys[1].clone());
        let v = input(&mut b, "v", tys[2].clone());
        let y = b.sdpa(q, k, v, mask).unwrap();
        let p = b.finish(&[y]).unwrap();
        let xs: Vec<Tensor> = tys.iter().map(|t| random(&mut r, t, 1.5)).collect();
        check(&p, &xs, seed, TOL);
    }
}

#[test]
fn attention_probs_match_their_lowering_with_heads_and_masks() {
    for seed in 0..8 {
        let mut r = rng(1200 + seed);
        let (batch, heads) = (r.random_range(1..=2), r.random_range(1..=3));
        let tq = r.random_range(1..=4);
        let tk = tq + r.random_range(0..=2);
        let d = r.random_range(1..=4);
        let mask = random_mask(&mut r, batch, tk, seed);
        let mut b = Builder::new();
        let tys = [f64s(&[batch, heads, tq, d]), f64s(&[batch, heads, tk, d])];
        let q = input(&mut b, "q", tys[0].clone());
        let k = input(&mut b, "k", tys[1].clone());
        let y = b.attention_probs(q, k, mask).unwrap();
        let p = b.finish(&[y]).unwrap();
        let xs: Vec<Tensor> = tys.iter().map(|t| random(&mut r, t, 1.5)).collect();
        check(&p, &xs, seed, TOL);
    }
}

#[test]
fn attention_probs_in_f32_are_the_masked_softmax_of_the_scores_bit_for_bit() {
    // Large enough that the slices run on the thread pool; the kernel normalises each slice's
    // scores where the GEMM wrote them, batch_matmul then masked_softmax reads them back.
    let (batch, heads, t, d) = (2, 3, 64, 32);
    let mut r = rng(1300);
    for mask in [
        AttentionMask::none(),
        AttentionMask::causal().with_key_lengths(vec![64, 17]),
    ] {
        let ty = TensorType::new(DType::F32, [batch, heads, t, d]);
        let mut b = Builder::new();
        let q = input(&mut b, "q", ty.clone());
        let k = input(&mut b, "k", ty.clone());
        let fused = b.attention_probs(q, k, mask.clone()).unwrap();
        let scores = b.batch_matmul(q, k, false, true).unwrap();
        let scale = 1.0 / (d as f64).sqrt();
        let apart = b.masked_softmax(scores, mask, scale).unwrap();
        let p = b.finish(&[fused, apart]).unwrap();
        let xs: Vec<Tensor> = (0..2).map(|_| random(&mut r, &ty, 2.0)).collect();
        let out = catml::interp::eval(&p, &xs).unwrap();
        let bits = |t: &Tensor| -> Vec<u32> {
            t.as_f32()
                .unwrap()
                .data()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(bits(&out[0]), bits(&out[1]));
    }
}

/// The fixed structure of a random attention block.
struct Block {
    batch: usize,
    tq: usize,
    tk: usize,
    width: usize,
    heads: usize,
    mask: AttentionMask,
    cross: bool,
    /// One sdpa node rather than attention_probs and batch_matmul.
    recompute_weights: bool,
}

/// An attention block over random inputs and weights: (program, inputs).
fn attention_block(r: &mut Rng, s: Block) -> (Program, Vec<Tensor>) {
    let Block {
        batch,
        tq,
        tk,
        width,
        heads,
        mask,
        cross,
        recompute_weights,
    } = s;
    use catml::prim::attention::{multi_head_attention, AttentionSpec, AttentionWeights};
    let mut b = Builder::new();
    let mut xs = Vec::new();
    let mut data = |b: &mut Builder, name: &str, d: &[usize], kind| {
        xs.push(random(r, &f64s(d), 1.0));
        b.input(name, f64s(d), kind).unwrap()
    };
    let xq = data(&mut b, "xq", &[batch, tq, width], InputKind::Data);
    let xkv = if cross {
        data(&mut b, "xkv", &[batch, tk, width], InputKind::Data)
    } else {
        xq
    };
    let mut w = Vec::new();
    for name in ["q", "k", "v", "o"] {
        w.push(data(
            &mut b,
            &format!("W{name}"),
            &[width, width],
            InputKind::Param,
        ));
        w.push(data(
            &mut b,
            &format!("b{name}"),
            &[width],
            InputKind::Param,
        ));
    }
    let weights = AttentionWeights::from_array(w.try_into().expect("eight weights"));
    let spec = AttentionSpec {
        heads,
        mask,
        recompute_weights,
    };
    let y = multi_head_attention(&mut b, xq, xkv, &weights, &spec).unwrap();
    (b.finish(&[y]).unwrap(), xs)
}

#[test]
fn attention_blocks_match_their_lowerings() {
    for seed in 0..6 {
        let mut r = rng(800 + seed);
        let batch = r.random_range(1..=2);
        let heads = r.random_range(1..=3);
        let width = heads * r.random_range(1..=2);
        let tq = r.random_range(1..=3);
        let cross = seed % 3 == 2;
        let tk = if cross {
            tq + r.random_range(0..=2)
        } else {
            tq
        };
        let mask = random_mask(&mut r, batch, tk, seed);
        let block = Block {
            batch,
            tq,
            tk,
            width,
            heads,
            mask,
            cross,
            recompute_weights: seed % 2 == 1,
        };
        let (p, xs) = attention_block(&mut r, block);
        let fused = if seed % 2 == 1 {
            "sdpa"
        } else {
            "attention_probs"
        };
        assert!(p.nodes().iter().any(|n| n.prim.name() == fused));
        let checked = check(&p, &xs, seed, TOL);
        assert!(checked
            .lowered
            .nodes()
            .iter()
            .all(|n| !["sdpa", "attention_probs"].contains(&n.prim.name())));
    }
}

#[test]
fn take_and_scatter_rows_match_their_lowerings() {
    for seed in 0..8 {
        let mut r = rng(900 + seed);
        let (rows, width) = (r.random_range(1..=5), r.random_range(1..=3));
        let idx_rank = r.random_range(1..=2);
        let idx_dims = dims(&mut r, idx_rank, 3);
        let mut b = Builder::new();
        let idx = input(&mut b, "idx", TensorType::new(DType::I64, idx_dims.clone()));
        let iv = indices(&mut r, &idx_dims, rows);
        let p = if seed % 2 == 0 {
            let table = b
                .input("table", f64s(&[rows, width]), InputKind::Param)
                .unwrap();
            let y = b.take(table, idx).unwrap();
            b.finish(&[y]).unwrap()
        } else {
            let mut ud = idx_dims.clone();
            ud.push(width);
            let u = input(&mut b, "u", f64s(&ud));
            let y = b.scatter_rows(u, idx, rows).unwrap();
            b.finish(&[y]).unwrap()
        };
        let float_ty = p.inputs()[1].ty.clone();
        let xs = [iv, random(&mut r, &float_ty, 1.0)];
        check(&p, &xs, seed, TOL);
    }
}

#[test]
fn linear_and_transposed_matmul_lower_to_the_core_fragment() {
    let mut r = rng(1000);
    let mut b = Builder::new();
    let x = input(&mut b, "x", f64s(&[3, 4]));
    let w = input(&mut b, "w", f64s(&[2, 4]));
    let bias = input(&mut b, "bias", f64s(&[2]));
    let y = b.linear(x, w, bias).unwrap();
    let z = b
        .op(
            std::sync::Arc::new(catml::prim::MatMul::new(true, false)),
            &[y, x],
        )
        .unwrap();
    let p = b.finish(&[z]).unwrap();
    let xs = [
        random(&mut r, &f64s(&[3, 4]), 1.0),
        random(&mut r, &f64s(&[2, 4]), 1.0),
        random(&mut r, &f64s(&[2]), 1.0),
    ];
    let checked = check(&p, &xs, 0, TOL);
    assert!(catml::transform::outside_core(&checked.lowered).is_empty());
}

/// Exact rationals of these f64 values.
fn rationals(dims: &[usize], values: &[f64]) -> catml::tensor::RArray {
    let data = values
        .iter()
        .map(|&v| catml::tensor::rational_from_f64(v).unwrap())
        .collect();
    catml::tensor::RArray::new(dims.to_vec(), data).unwrap()
}

/// The program, its lowering, and both evaluated over rationals.
fn rational_pair(
    p: &Program,
    x: &[catml::tensor::RArray],
) -> (Vec<catml::tensor::RArray>, Vec<catml::tensor::RArray>) {
    let low = catml::transform::lower(p).unwrap();
    let a = catml::interp::eval_rational(p, x).unwrap();
    let b = catml::interp::eval_rational(&low, x).unwrap();
    (a, b)
}

#[test]
fn mean_lowerings_divide_exactly_over_rationals() {
    // Counts 3 and 3·3 = 9: 1/n is not a binary fraction, so a rounded constant 1/n differs.
    let mut b = Builder::new();
    let x = input(&mut b, "x", f64s(&[3]));
    let y = input(&mut b, "y", f64s(&[3]));
    let m = b.mse(x, y).unwrap();
    let p = b.finish(&[m]).unwrap();
    let args = [
        rationals(&[3], &[1.0, 0.5, -2.0]),
        rationals(&[3], &[0.0, 0.25, 1.0]),
    ];
    let (a, l) = rational_pair(&p, &args);
    assert_eq!(a, l, "mse");

    let mut b = Builder::new();
    let x = input(&mut b, "x", f64s(&[1, 1, 3, 3]));
    let attrs = catml::prim::Pool2dAttrs::new([3, 3]);
    let m = b.avg_pool2d(x, attrs).unwrap();
    let p = b.finish(&[m]).unwrap();
    let values: Vec<f64> = (0..9).map(|i| i as f64 / 4.0).collect();
    let (a, l) = rational_pair(&p, &[rationals(&[1, 1, 3, 3], &values)]);
    assert_eq!(a, l, "avg_pool2d");
}
