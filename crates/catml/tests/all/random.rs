//! Counter-based random numbers: known answers of the cipher through the primitives, the same
//! values on every run and thread, distribution statistics, dropout's values, mask and
//! derivative, and bad keys and rates as errors naming the node.

use catml::ad::vjp;
use catml::interp;
use catml::ir::{json, Builder, InputKind, Program, Var};
use catml::prim::random::threefry::{key, key_tensor};
use catml::prim::{builtins, Distribution, Ops};
use catml::tensor::{DType, Tensor, TensorType};

fn keyed(f: impl Fn(&mut Builder, Var) -> Var) -> Program {
    let mut b = Builder::new();
    let k = b
        .input("key", TensorType::new(DType::I64, [2]), InputKind::Data)
        .unwrap();
    let y = f(&mut b, k);
    b.finish(&[y]).unwrap()
}

fn draw(p: &Program, k: Tensor) -> Tensor {
    interp::eval(p, &[k]).unwrap().remove(0)
}

fn words(t: &Tensor) -> Vec<u32> {
    t.to_f64_vec().iter().map(|v| *v as u32).collect()
}

#[test]
fn keys_follow_the_known_answers_of_threefry() {
    // split(key, 1)[0] and fold_in(key, d) encrypt the counters 0 and d: Random123's vectors.
    let split = keyed(|b, k| b.random_split(k, 1).unwrap());
    assert_eq!(
        words(&draw(&split, key_tensor([0, 0]))),
        [0x6B20_0159, 0x99BA_4EFE]
    );
    let fold = keyed(|b, k| b.random_fold_in(k, u64::MAX).unwrap());
    let m = key_tensor([u32::MAX, u32::MAX]);
    assert_eq!(words(&draw(&fold, m)), [0x1CB9_96FC, 0xBB00_2BE7]);
    let fold = keyed(|b, k| b.random_fold_in(k, 0x243F_6A88_85A3_08D3).unwrap());
    let pi = key_tensor([0x1319_8A2E, 0x0370_7344]);
    assert_eq!(words(&draw(&fold, pi)), [0xC492_3A9C, 0x483D_F7A0]);
}

#[test]
fn uniform_draws_are_the_documented_bits() {
    // Element 0 under key (0, 0) is block (0x6B200159, 0x99BA4EFE).
    let (a, b) = (0x6B20_0159u64, 0x99BA_4EFEu64);
    let f32s = keyed(|bd, k| {
        bd.random(k, Distribution::Uniform, &TensorType::new(DType::F32, [1]))
            .unwrap()
    });
    let want32 = ((a ^ b) >> 9) as f64 * 2f64.powi(-23);
    assert_eq!(draw(&f32s, key(0)).to_f64_vec(), [want32]);
    let f64s = keyed(|bd, k| {
        bd.random(k, Distribution::Uniform, &TensorType::new(DType::F64, [1]))
            .unwrap()
    });
    let want64 = (((a << 32) | b) >> 12) as f64 * 2f64.powi(-52);
    assert_eq!(draw(&f64s, key(0)).to_f64_vec(), [want64]);
    assert!((want64 - 0.418_457_111_716_386_44).abs() < 1e-16);
}

#[test]
fn one_key_gives_the_same_values_on_every_run_and_thread() {
    let ty = TensorType::new(DType::F64, [64, 33]);
    let p = keyed(|b, k| {
        let u = b.random(k, Distribution::Uniform, &ty).unwrap();
        let z = b.random(k, Distribution::Normal, &ty).unwrap();
        let s = b.add(u, z).unwrap();
        b.dropout(k, s, 0.3).unwrap()
    });
    let first = draw(&p, key(123));
    assert_eq!(draw(&p, key(123)), first);
    for threads in [1, 2, 4] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        assert_eq!(
            pool.install(|| draw(&p, key(123))),
            first,
            "{threads} threads"
        );
    }
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let p = p.clone();
            std::thread::spawn(move || draw(&p, key(123)))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), first);
    }
    assert_ne!(draw(&p, key(124)), first);
}

fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n)
}

#[test]
fn draws_have_their_distributions_moments() {
    let n = 20_000;
    for dtype in [DType::F32, DType::F64] {
        let ty = TensorType::new(dtype, [n]);
        let u = draw(
            &keyed(|b, k| b.random(k, Distribution::Uniform, &ty).unwrap()),
            key(5),
        );
        let u = u.to_f64_vec();
        assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
        let (m, v) = moments(&u);
        // Standard errors: sqrt(1/12 / n) = 0.002 for the mean.
        assert!(
            (m - 0.5).abs() < 0.01 && (v - 1.0 / 12.0).abs() < 0.004,
            "{m} {v}"
        );
        let z = draw(
            &keyed(|b, k| b.random(k, Distribution::Normal, &ty).unwrap()),
            key(6),
        );
        let z = z.to_f64_vec();
        let (m, v) = moments(&z);
        assert!(m.abs() < 0.03 && (v - 1.0).abs() < 0.05, "{m} {v}");
        assert!(z.iter().all(|v| v.abs() <= 6.67));
    }
}

fn dropout_program(n: usize, rate: f64) -> Program {
    let mut b = Builder::new();
    let k = b
        .input("key", TensorType::new(DType::I64, [2]), InputKind::Data)
        .unwrap();
    let x = b
        .input("x", TensorType::new(DType::F64, [n]), InputKind::Data)
        .unwrap();
    let y = b.dropout(k, x, rate).unwrap();
    b.finish(&[y]).unwrap()
}

#[test]
fn dropout_keeps_about_one_minus_rate_and_scales_them() {
    let n = 20_000;
    let x = Tensor::f64([n], vec![1.5; n]).unwrap();
    let p = dropout_program(n, 0.25);
    let y = interp::eval(&p, &[key(9), x.clone()]).unwrap().remove(0);
    let y = y.to_f64_vec();
    let kept = y.iter().filter(|v| **v != 0.0).count() as f64 / n as f64;
    // Standard error sqrt(0.75 · 0.25 / n) = 0.003.
    assert!((kept - 0.75).abs() < 0.015, "kept {kept}");
    assert!(
        y.iter().all(|v| *v == 0.0 || *v == 2.0),
        "kept values are 1.5 / 0.75"
    );
    // Another key, another mask; the same key, the same mask.
    let again = interp::eval(&p, &[key(9), x.clone()]).unwrap().remove(0);
    assert_eq!(again.to_f64_vec(), y);
    let other = interp::eval(&p, &[key(10), x.clone()]).unwrap().remove(0);
    assert_ne!(other.to_f64_vec(), y);
    // Rate 0 is the identity.
    let id = interp::eval(&dropout_program(n, 0.0), &[key(9), x.clone()]).unwrap();
    assert_eq!(id[0], x);
}

#[test]
fn dropout_derivative_is_the_mask_over_one_minus_rate() {
    let n = 64;
    let rate = 0.5;
    let p = dropout_program(n, rate);
    let x: Vec<f64> = (0..n).map(|i| (i as f64 - 30.0) / 7.0).collect();
    let xt = Tensor::f64([n], x.clone()).unwrap();
    let ones = Tensor::f64([n], vec![1.0; n]).unwrap();
    // The gradient of <1, y> is mask / (1 - rate): the output at x = 1.
    let mask = interp::eval(&p, &[key(3), ones.clone()]).unwrap().remove(0);
    let v = vjp(&p).unwrap();
    let out = interp::eval(&v.program, &[key(3), xt.clone(), ones]).unwrap();
    let g = v.layout.gradient(&out, 1).unwrap().to_f64_vec();
    assert_eq!(g, mask.to_f64_vec());
    assert!(
        v.layout.gradient(&out, 0).is_none(),
        "the key gets no gradient"
    );
    // Central differences agree element by element (dropout is linear in x).
    let h = 1e-3;
    for i in [0, 5, 31, 63] {
        let mut xp = x.clone();
        xp[i] += h;
        let mut xm = x.clone();
        xm[i] -= h;
        let f = |x: Vec<f64>| {
            let y = interp::eval(&p, &[key(3), Tensor::f64([n], x).unwrap()]).unwrap();
            y[0].to_f64_vec()[i]
        };
        let fd = (f(xp) - f(xm)) / (2.0 * h);
        assert!((fd - g[i]).abs() < 1e-9, "element {i}: {fd} vs {}", g[i]);
    }
}

fn keyed_module(node: &str, key_shape: &str) -> String {
    format!(
        r#"{{"inputs": [{{"name": "k", "shape": {key_shape}, "dtype": "i64"}}, {{"name": "x", "shape": [3]}}],
          "nodes": [{{"name": "bad", {node}}}], "outputs": ["bad"]}}"#
    )
}

#[test]
fn bad_rates_and_keys_are_errors_naming_the_node() {
    let cases = [
        (
            r#""op": "dropout", "operands": ["k", "x"], "attrs": {"rate": 1.0}"#,
            "[2]",
            "rate",
        ),
        (
            r#""op": "dropout", "operands": ["k", "x"], "attrs": {"rate": -0.1}"#,
            "[2]",
            "rate",
        ),
        (r#""op": "dropout", "operands": ["k", "x"]"#, "[2]", "rate"),
        (
            r#""op": "dropout", "operands": ["k", "x"], "attrs": {"rate": 0.5}"#,
            "[3]",
            "a key, i64[2]",
        ),
        (
            r#""op": "dropout", "operands": ["x", "x"], "attrs": {"rate": 0.5}"#,
            "[2]",
            "a key, i64[2]",
        ),
        (
            r#""op": "random_uniform", "operands": ["k"], "attrs": {"shape": [2], "dtype": "i64"}"#,
            "[2]",
            "dtype",
        ),
        (
            r#""op": "random_normal", "operands": ["k"], "attrs": {"shape": [0]}"#,
            "[2]",
            "shape",
        ),
        (
            r#""op": "random_normal", "operands": ["k"]"#,
            "[2]",
            "shape",
        ),
        (
            r#""op": "random_split", "operands": ["k"], "attrs": {"count": 0}"#,
            "[2]",
            "count",
        ),
    ];
    for (node, key_shape, what) in cases {
        let e = json::from_str(&keyed_module(node, key_shape), builtins())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`bad`") && e.contains(what), "{what}: {e}");
    }
    // A key word outside 0..2^32 is found when evaluating.
    let p = json::from_str(
        &keyed_module(
            r#""op": "dropout", "operands": ["k", "x"], "attrs": {"rate": 0.5}"#,
            "[2]",
        ),
        builtins(),
    )
    .unwrap();
    let k = Tensor::i64([2], vec![1, -5]).unwrap();
    let x = Tensor::f64([3], vec![1.0; 3]).unwrap();
    let e = interp::eval(&p, &[k, x]).unwrap_err().to_string();
    assert!(
        e.contains("`bad`") && e.contains("key word -5 at position 1"),
        "{e}"
    );
}
