//! A program of 100,000 nodes is built, written to JSON and validated back, listed and parsed,
//! evaluated, shape-inferred and pruned: every pass is a loop over the node list, so nothing
//! recurses per node and nothing is quadratic in the node count.

use std::time::{Duration, Instant};

use catml::interp;
use catml::ir::{json, listing, Builder, InputKind, Program};
use catml::prim::{builtins, Ops};
use catml::tensor::{DType, Tensor, TensorType};

const N: usize = 100_000;
/// The output reads node LIVE - 1; the nodes after it are dead.
const LIVE: usize = 90_000;

fn ty() -> TensorType {
    TensorType::new(DType::F64, [4])
}

/// v <- v * m, v + a, tanh v, repeating.
fn chain() -> Program {
    let mut b = Builder::new();
    let x = b.input("x", ty(), InputKind::Data).unwrap();
    let m = b.input("m", ty(), InputKind::Param).unwrap();
    let a = b.input("a", ty(), InputKind::Param).unwrap();
    let mut v = x;
    let mut out = x;
    for i in 0..N {
        v = match i % 3 {
            0 => b.mul(v, m),
            1 => b.add(v, a),
            _ => b.tanh(v),
        }
        .unwrap();
        if i == LIVE - 1 {
            out = v;
        }
    }
    b.finish(&[out]).unwrap()
}

/// The same arithmetic on plain f64s.
fn reference(x: [f64; 4], m: [f64; 4], a: [f64; 4]) -> Vec<f64> {
    (0..4)
        .map(|j| {
            let mut v = x[j];
            for i in 0..LIVE {
                v = match i % 3 {
                    0 => v * m[j],
                    1 => v + a[j],
                    _ => v.tanh(),
                };
            }
            v
        })
        .collect()
}

/// Runs one pass under a generous time budget: a guard against quadratic passes (which take
/// minutes at this size), not a benchmark.
fn timed<T>(what: &str, budget: Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took < budget, "{what} took {took:?}, budget {budget:?}");
    out
}

#[test]
fn a_chain_of_100k_nodes_goes_through_every_pass() {
    let budget = Duration::from_secs(20);
    let p = timed("building", budget, chain);
    assert_eq!(p.n_nodes(), N);

    let text = timed("writing JSON", budget, || json::to_string(&p));
    let back = timed("validating JSON", budget, || {
        json::from_str(&text, builtins()).unwrap()
    });
    assert_eq!(back, p);
    drop(text);

    let shown = timed("printing the listing", budget, || listing::print(&p));
    let parsed = timed("parsing the listing", budget, || {
        listing::parse(&shown, builtins()).unwrap()
    });
    assert_eq!(parsed, p);
    drop((shown, parsed));

    let (x, m, a) = (
        [0.5, -1.0, 2.0, 0.0],
        [0.5, 1.5, -0.75, 2.0],
        [0.25, -0.5, 1.0, 3.0],
    );
    let args = [
        Tensor::f64([4], x.to_vec()).unwrap(),
        Tensor::f64([4], m.to_vec()).unwrap(),
        Tensor::f64([4], a.to_vec()).unwrap(),
    ];
    let values = timed("eval", budget, || interp::eval(&back, &args).unwrap());
    // The tanh kernel is accurate to a few ulps, not bit-identical with libm's; the chain is
    // contracting (tanh of values times |m| <= 2), so per-step differences do not grow.
    let want = reference(x, m, a);
    for (got, want) in values[0].to_f64_vec().iter().zip(&want) {
        assert!((got - want).abs() <= 1e-13, "{got} vs {want}");
    }

    let types = timed("shape", budget, || {
        interp::shape(&p, &p.input_types()).unwrap()
    });
    assert_eq!(types, vec![ty()]);

    let pruned = timed("pruning", budget, || p.pruned());
    assert_eq!(pruned.n_nodes(), LIVE);
    assert_eq!(pruned.n_inputs(), 3);
    assert_eq!(interp::eval(&pruned, &args).unwrap(), values);

    let count = timed("params", budget, || interp::params(&p));
    assert_eq!(count.total, 8);
    let cost = timed("cost", budget, || interp::cost(&p));
    assert_eq!(cost.flops, N as u64 * 4);
}
