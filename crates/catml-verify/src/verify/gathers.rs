//! Gathers, exhaustively (docs/derivatives.md, structural maps): every map i: [m] -> [n] with input
//! length n and output length m in 1..=K, as the program x: f64[n] -> gather(x, indices = i):
//! f64[m].
//!
//! There are Σ_{n=1}^{K} Σ_{m=1}^{K} n^m such maps: 494 for K = 4 (the reference count) and
//! 5,699 for K = 5. Over exact rationals, for each map:
//! - forward: (G x)_j = x_{i_j};
//! - JVP program: G v;
//! - VJP program at every basis seed e_j: G^T e_j = e_{i_j}, so the whole transpose, including
//!   (G^T u)_k = Σ_{j: i_j = k} u_j for repeated indices, is checked exactly;
//! - the adjoint identity <u, G v> = <G^T u, v> at random rationals.

use num_traits::Zero;
use rand::RngExt;

use super::numeric::Derivatives;
use super::{Ctx, FamilyReport, Tally};
use crate::interp;
use crate::ir::{Builder, InputKind, Program};
use crate::prim::Ops;
use crate::tensor::{DType, RArray, Rational, TensorType};

/// Σ_{n=1}^{k} Σ_{m=1}^{k} n^m
pub(crate) fn gather_map_count(k: usize) -> usize {
    (1..=k)
        .map(|n| (1..=k).map(|m| n.pow(m as u32)).sum::<usize>())
        .sum()
}

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let k = ctx.level.pick(2, 5, 5);
    let total = gather_map_count(k);
    let mut t = ctx.tally(
        "every gather map with input and output lengths 1..=K: forward, JVP, VJP (whole transpose at basis seeds) and the adjoint identity, exactly over rationals",
        "reference: all 494 small gather maps with lengths 1 through 4",
        total,
    );
    t.figure("max_length", k);
    t.figure("maps_formula", "sum over n, m in 1..=K of n^m");
    t.figure("maps", total);
    t.figure("maps_lengths_1_to_4", gather_map_count(4));
    let mut rng = ctx.rng();
    for n in 1..=k {
        for m in 1..=k {
            for code in 0..n.pow(m as u32) {
                // The map's indices: the base-n digits of `code`.
                let idx: Vec<usize> = (0..m).map(|j| (code / n.pow(j as u32)) % n).collect();
                let u: Vec<Rational> = (0..m).map(|_| small(&mut rng)).collect();
                let v: Vec<Rational> = (0..n).map(|_| small(&mut rng)).collect();
                check_map(&mut t, n, &idx, &u, &v);
                t.case();
            }
        }
    }
    t.finish()
}

fn small(rng: &mut rand_chacha::ChaCha8Rng) -> Rational {
    Rational::new(
        rng.random_range(-50..=50).into(),
        rng.random_range(1..=7).into(),
    )
}

fn vector(v: &[Rational]) -> RArray {
    RArray::new(vec![v.len()], v.to_vec()).expect("vector")
}

fn gather_program(n: usize, idx: &[usize]) -> Program {
    let mut b = Builder::new();
    let x = b
        .input("x", TensorType::new(DType::F64, [n]), InputKind::Data)
        .expect("fresh");
    let y = b.gather(x, 0, idx.to_vec()).expect("indices in range");
    b.finish(&[y]).expect("one output")
}

fn check_map(t: &mut Tally, n: usize, idx: &[usize], u: &[Rational], v: &[Rational]) {
    let m = idx.len();
    let p = gather_program(n, idx);
    let d = match Derivatives::new(&p) {
        Ok(d) => d,
        Err(e) => {
            t.fail(format!("gather {idx:?} from {n}: {e}"));
            return;
        }
    };
    let at = || format!("gather {idx:?} from length {n}");
    let gv: Vec<Rational> = idx.iter().map(|&i| v[i].clone()).collect();
    // Forward.
    match interp::eval_rational(&p, &[vector(v)]) {
        Ok(y) => t.check(y[0].data() == gv.as_slice(), || {
            format!("forward: {}", at())
        }),
        Err(e) => t.check(false, || format!("forward: {e}: {}", at())),
    };
    // JVP program: inputs x then its tangent; outputs y then its tangent.
    match interp::eval_rational(&d.jvp.program, &[vector(v), vector(v)]) {
        Ok(y) => t.check(y[1].data() == gv.as_slice(), || format!("jvp: {}", at())),
        Err(e) => t.check(false, || format!("jvp: {e}: {}", at())),
    };
    // VJP program at each basis seed: the column G^T e_j = e_{i_j}.
    let grad = |seed: Vec<Rational>| -> Result<Vec<Rational>, String> {
        let out = interp::eval_rational(&d.vjp.program, &[vector(v), vector(&seed)])
            .map_err(|e| e.to_string())?;
        Ok(d.vjp
            .layout
            .gradient(&out, 0)
            .expect("float input")
            .data()
            .to_vec())
    };
    for j in 0..m {
        let mut e = vec![Rational::zero(); m];
        e[j] = Rational::from_integer(1.into());
        let mut want = vec![Rational::zero(); n];
        want[idx[j]] = Rational::from_integer(1.into());
        match grad(e) {
            Ok(g) => t.check(g == want, || format!("transpose column {j}: {}", at())),
            Err(e) => t.check(false, || format!("vjp: {e}: {}", at())),
        };
    }
    // Adjoint identity at random rationals: <u, G v> = <G^T u, v>, exactly.
    match grad(u.to_vec()) {
        Ok(gtu) => {
            let lhs: Rational = u.iter().zip(&gv).map(|(a, b)| a * b).sum();
            let rhs: Rational = gtu.iter().zip(v).map(|(a, b)| a * b).sum();
            let mut want = vec![Rational::zero(); n];
            for (j, &i) in idx.iter().enumerate() {
                want[i] += &u[j];
            }
            t.check(lhs == rhs && gtu == want, || {
                format!("adjoint identity: {}", at())
            });
        }
        Err(e) => {
            t.check(false, || format!("vjp: {e}: {}", at()));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn map_counts() {
        assert_eq!(super::gather_map_count(4), 494);
        assert_eq!(super::gather_map_count(5), 5699);
    }
}
