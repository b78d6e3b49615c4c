//! Times conv2d (batch 32, 3x32x32 input, 16 filters 3x3, padding 1, f32) forward and value and
//! gradient of L = Σ y, and prints one JSON line per measurement for `peers/bench_conv.py`:
//!
//! {"workload": "conv2d", "size": "32x3x32x32/16x3x3", "dtype": "f32", "mode": "forward", "seconds": ..}
//!
//! Each measurement is the median of 15 samples; a sample loops the call so that all samples
//! take about 1.5 s, as the peers' timings do.

use std::time::Instant;

use catml::ad::vjp;
use catml::interp::eval;
use catml::ir::{Builder, InputKind, Program};
use catml::prim::{Conv2dAttrs, Ops};
use catml::tensor::{DType, Tensor, TensorType};

const SAMPLES: usize = 15;
const BUDGET_SECONDS: f64 = 1.5;

fn programs() -> (Program, Program) {
    let mut b = Builder::new();
    let ty = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let x = b.input("x", ty(&[32, 3, 32, 32]), InputKind::Data).unwrap();
    let w = b.input("w", ty(&[16, 3, 3, 3]), InputKind::Param).unwrap();
    let bias = b.input("b", ty(&[16]), InputKind::Param).unwrap();
    let y = b
        .conv2d(x, w, Some(bias), Conv2dAttrs::default().pad(1))
        .unwrap();
    let forward = b.clone().finish(&[y]).unwrap();
    let l = b.sum(y, None).unwrap();
    let loss = b.finish(&[l]).unwrap();
    (forward, vjp(&loss).unwrap().program)
}

fn values(p: &Program) -> Vec<Tensor> {
    p.inputs()
        .iter()
        .enumerate()
        .map(|(k, i)| {
            let n = i.ty.numel();
            let data = (0..n)
                .map(|j| ((j * 31 + k * 7) % 17) as f64 / 17.0 - 0.5)
                .collect();
            Tensor::from_f64s(DType::F32, i.ty.shape.clone(), data).unwrap()
        })
        .collect()
}

/// Median seconds per call.
fn measure(mut call: impl FnMut()) -> f64 {
    for _ in 0..3 {
        call();
    }
    let t0 = Instant::now();
    call();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let inner = ((BUDGET_SECONDS / SAMPLES as f64 / once).round() as usize).max(1);
    let mut times: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..inner {
                call();
            }
            t0.elapsed().as_secs_f64() / inner as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[SAMPLES / 2]
}

fn main() {
    let (forward, grad) = programs();
    let (xf, xg) = (values(&forward), values(&grad));
    for (mode, p, x) in [("forward", &forward, &xf), ("value_and_grad", &grad, &xg)] {
        let seconds = measure(|| {
            eval(p, x).unwrap();
        });
        println!(
            "{}",
            serde_json::json!({
                "workload": "conv2d",
                "size": "32x3x32x32/16x3x3",
                "dtype": "f32",
                "mode": mode,
                "seconds": seconds,
            })
        );
    }
}
