//! The `BatchNorm` and `Dropout` layers: parameter counts, training against evaluation mode,
//! running statistics against the hand formula, and dropout's mask per key.

use catml::interp::params;
use catml::nn::{seeded, BatchNorm, Dropout, Layer, RunningStats};
use catml::prim::random::threefry::key;
use catml::tensor::{DType, Tensor, TensorType};
use catml::trace::{trace, Value};

fn f64t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

/// x (4, 2, 1): channel 0 holds 1, 2, 3, 6 (mean 3, variance 3.5); channel 1 holds 0, 0, 4, 4
/// (mean 2, variance 4).
fn batch() -> Tensor {
    Tensor::f64([4, 2, 1], vec![1.0, 0.0, 2.0, 0.0, 3.0, 4.0, 6.0, 4.0]).unwrap()
}

#[test]
fn batch_norm_has_two_parameters_per_channel_and_dropout_none() {
    let layer = BatchNorm::new();
    let t = trace(&[f64t(&[5, 3, 2, 2])], |x| {
        layer.forward(&x[0], &mut seeded(0), "bn")
    })
    .unwrap();
    let count = params(&t.program);
    assert_eq!((count.total, count.by_tag["bn"]), (6, 6));
    let names: Vec<&str> = t.params.names().collect();
    assert_eq!(names, ["bn.bias", "bn.scale"]);
    let k = TensorType::new(DType::I64, [2]);
    let t = trace(&[f64t(&[5, 3]), k], |x| {
        Dropout::new(0.5).apply(&x[0], &x[1], "drop")
    })
    .unwrap();
    assert_eq!(params(&t.program).total, 0);
}

#[test]
fn training_normalises_by_the_batch_and_eval_by_the_running_statistics() {
    let x = Value::from(batch());
    let e = 1e-5;
    let train = BatchNorm::new()
        .apply(&x, &mut seeded(0), "bn")
        .into_tensor()
        .unwrap();
    let want: Vec<f64> = [
        (1.0, 3.0, 3.5),
        (0.0, 2.0, 4.0),
        (2.0, 3.0, 3.5),
        (0.0, 2.0, 4.0),
    ]
    .iter()
    .chain(&[
        (3.0, 3.0, 3.5),
        (4.0, 2.0, 4.0),
        (6.0, 3.0, 3.5),
        (4.0, 2.0, 4.0),
    ])
    .map(|(v, m, s2): &(f64, f64, f64)| (v - m) / (s2 + e).sqrt())
    .collect();
    for (g, w) in train.to_f64_vec().iter().zip(&want) {
        assert!((g - w).abs() < 1e-14, "{g} vs {w}");
    }
    // Evaluation mode with the initial statistics (0, 1) divides by sqrt(1 + e) only.
    let eval = BatchNorm::new()
        .eval()
        .apply(&x, &mut seeded(0), "bn")
        .into_tensor()
        .unwrap();
    let scaled = batch()
        .to_f64_vec()
        .into_iter()
        .map(|v| v / (1.0 + e).sqrt());
    for (g, w) in eval.to_f64_vec().iter().zip(scaled) {
        assert!((g - w).abs() < 1e-15, "{g} vs {w}");
    }
    // And with given statistics, every batch alike.
    let stats = RunningStats {
        mean: Tensor::f64([2], vec![3.0, 2.0]).unwrap(),
        var: Tensor::f64([2], vec![3.5, 4.0]).unwrap(),
    };
    let layer = BatchNorm::new().with_running(stats).eval();
    let y = layer.apply(&x, &mut seeded(0), "bn").into_tensor().unwrap();
    for (g, w) in y.to_f64_vec().iter().zip(&want) {
        assert!((g - w).abs() < 1e-14, "{g} vs {w}");
    }
}

#[test]
fn running_statistics_follow_the_momentum_formula() {
    let layer = BatchNorm {
        momentum: 0.25,
        ..BatchNorm::new()
    };
    let start = RunningStats {
        mean: Tensor::f64([2], vec![1.0, -1.0]).unwrap(),
        var: Tensor::f64([2], vec![2.0, 0.5]).unwrap(),
    };
    let (m, v) = (
        Value::from(start.mean.clone()),
        Value::from(start.var.clone()),
    );
    let [_, m1, v1] = layer.train(&Value::from(batch()), [&m, &v], &mut seeded(0), "bn");
    // running' = 0.75 running + 0.25 batch, with the batch's (3, 2) and (3.5, 4).
    assert_eq!(
        m1.into_tensor().unwrap().to_f64_vec(),
        [0.75 + 0.75, -0.75 + 0.5]
    );
    assert_eq!(
        v1.into_tensor().unwrap().to_f64_vec(),
        [1.5 + 0.875, 0.375 + 1.0]
    );
    // The same update traced: a program from (x, mean, var) to (y, mean', var').
    let t = trace(&[f64t(&[4, 2, 1]), f64t(&[2]), f64t(&[2])], |a| {
        layer.train(&a[0], [&a[1], &a[2]], &mut seeded(0), "bn")
    })
    .unwrap();
    let out = t.eval(&[batch(), start.mean, start.var]).unwrap();
    assert_eq!(out[1].to_f64_vec(), [1.5, -0.25]);
    assert_eq!(out[2].to_f64_vec(), [2.375, 1.375]);
}

#[test]
fn dropout_masks_per_key_and_is_the_identity_in_eval_mode() {
    let n = 10_000;
    let x = Value::from(Tensor::f64([n], vec![1.0; n]).unwrap());
    let layer = Dropout::new(0.5);
    let draw = |seed| {
        let k = Value::from(key(seed));
        layer
            .apply(&x, &k, "drop")
            .into_tensor()
            .unwrap()
            .to_f64_vec()
    };
    let a = draw(1);
    let kept = a.iter().filter(|v| **v == 2.0).count();
    assert_eq!(kept + a.iter().filter(|v| **v == 0.0).count(), n);
    // Standard error sqrt(n/4) = 50.
    assert!((kept as f64 - 5000.0).abs() < 250.0, "kept {kept}");
    assert_eq!(draw(1), a, "one key, one mask");
    assert_ne!(draw(2), a, "another key, another mask");
    let id = layer.eval().apply(&x, &Value::from(key(1)), "drop");
    assert_eq!(id.into_tensor().unwrap().to_f64_vec(), vec![1.0; n]);
    // A rate outside [0, 1) is an error naming the rate.
    let bad = Dropout::new(1.0).apply(&x, &Value::from(key(1)), "drop");
    let e = bad.into_tensor().unwrap_err().to_string();
    assert!(e.contains("rate"), "{e}");
}
