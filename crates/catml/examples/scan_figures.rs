//! Program size and peak live bytes of the GRU adding problem's loss (hidden 32, batch 64,
//! f32) with the recurrence as one `scan` node and unrolled, at T = 100 and T = 1000: nodes,
//! and `peak_live_bytes` of the cost interpreter for the loss and for its VJP program (what
//! `catml cost` and `catml cost --grad` report), printed as the rows of a Markdown table. With a
//! directory argument, each loss program is also written there as a LensIR module.
//!
//! `cargo run --release -p catml --example scan_figures [DIR]`

use catml::ad;
use catml::interp::cost;
use catml::ir::{json, Program};
use catml::nn::{seeded, Gru, Linear};
use catml::tensor::{DType, TensorType};
use catml::trace::trace_named;

const HIDDEN: usize = 32;
const BATCH: usize = 64;

fn loss(t: usize, unrolled: bool) -> Program {
    let xs = ("xs", TensorType::new(DType::F32, [t, BATCH, 2]));
    let h0 = ("h0", TensorType::new(DType::F32, [BATCH, HIDDEN]));
    let target = ("target", TensorType::new(DType::F32, [BATCH, 1]));
    trace_named(&[xs, h0, target], |v| {
        let mut rng = seeded(11);
        let g = Gru::new(HIDDEN);
        let g = if unrolled { g.unrolled() } else { g };
        let h = g.apply(&v[0], &v[1], &mut rng, "gru").last;
        Linear::new(1).apply(&h, &mut rng, "out").mse(&v[2])
    })
    .expect("the loss traces")
    .program
}

fn main() {
    let dir = std::env::args().nth(1);
    println!("| T | form | nodes | peak_live_bytes | grad nodes | grad peak_live_bytes |");
    println!("| ---: | --- | ---: | ---: | ---: | ---: |");
    for t in [100, 1000] {
        for unrolled in [false, true] {
            let form = if unrolled { "unrolled" } else { "scan" };
            let p = loss(t, unrolled);
            let g = ad::vjp(&p).expect("the loss differentiates").program;
            println!(
                "| {t} | {form} | {} | {} | {} | {} |",
                p.n_nodes(),
                cost(&p).peak_live_bytes,
                g.n_nodes(),
                cost(&g).peak_live_bytes
            );
            if let Some(dir) = &dir {
                let path = std::path::Path::new(dir).join(format!("gru_{form}_{t}.json"));
                std::fs::write(&path, json::to_string(&p)).expect("writable directory");
            }
        }
    }
}
