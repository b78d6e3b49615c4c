//! Rational oracle: random scalar DAGs of add, sub, neg, mul, reciprocal and constants,
//! with shared subterms, repeated operands and repeated outputs.
//!
//! At each point, with inputs and output seeds exact dyadic rationals:
//! - the library's exact values (`interp::eval_rational`) equal forward-mode dual numbers over
//!   rationals, evaluated here from the derivative rules alone
//!   (d(a+b) = da+db, d(a-b) = da-db, d(-a) = -da, d(ab) = da·b + a·db, d(1/a) = -da/a²);
//! - the exact gradient from the VJP program, Σ_k u_k ∂y_k/∂x_i, equals the dual numbers' one;
//! - the f64 values and gradients equal an IEEE reference evaluation bitwise, and lie within a
//!   running error bound of the exact ones. With E the bound on |ẑ - z| and u = 2^-53:
//!   constants and inputs E = 0; neg E_z = E_x; add/sub E_z = E_x + E_y + u|ẑ|;
//!   mul E_z = |x̂|E_y + (|ŷ| + E_y)E_x + u|ẑ|;
//!   reciprocal E_z = E_x / (|x̂|(|x̂| - E_x)) + u|ẑ| (infinite if E_x >= |x̂|).

use num_traits::{One, Signed, Zero};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::numeric::Derivatives;
use super::{Ctx, FamilyReport, Tally};
use crate::interp;
use crate::ir::{Builder, InputKind, Program, Var};
use crate::prim::Ops;
use crate::tensor::{
    rational_from_f64, rational_to_f64, DType, RArray, Rational, Tensor, TensorType,
};

const POINTS: usize = 4;

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let dags = ctx.level.pick(16, 5120, 25600);
    let mut t = ctx.tally(
        "random scalar DAGs (add, sub, neg, mul, reciprocal, constants; shared subterms, repeated operands and outputs): exact values and VJP gradients against rational dual numbers, f64 against a running error bound",
        "reference: 512 rational scalar DAGs, 2,048 exact value/full-gradient evaluations",
        dags,
    );
    t.figure("dags", dags);
    t.figure("points_per_dag", POINTS);
    t.figure("exact_evaluations", dags * POINTS);
    t.figure(
        "f64_bound",
        "running error bound: neg E_z=E_x; add/sub E_z=E_x+E_y+u|z|; mul E_z=|x|E_y+(|y|+E_y)E_x+u|z|; reciprocal E_z=E_x/(|x|(|x|-E_x))+u|z|; u=2^-53",
    );
    let mut rng = ctx.rng();
    let mut regenerated = 0u64;
    for _ in 0..dags {
        // A DAG whose reciprocal reads a value that is zero at every point tried (x - x, say)
        // has no admissible point: draw another.
        let mut found = None;
        for _ in 0..100 {
            let p = random_dag(&mut rng);
            let d = match Derivatives::new(&p) {
                Ok(d) => d,
                Err(e) => {
                    t.fail(format!("vjp of a scalar DAG failed: {e}"));
                    break;
                }
            };
            match admissible_points(&p, &mut rng) {
                Ok(Some(points)) => {
                    found = Some((d, points));
                    break;
                }
                Ok(None) => regenerated += 1,
                Err(e) => {
                    t.fail(e);
                    break;
                }
            }
        }
        let Some((d, points)) = found else {
            t.case();
            continue;
        };
        for pt in &points {
            compare(&mut t, &d, pt);
        }
        t.case();
    }
    t.figure("dags_redrawn_without_admissible_points", regenerated);
    t.finish()
}

/// A random scalar DAG: 1-4 inputs, 4-16 nodes, 1-3 outputs (repeats allowed).
pub(crate) fn random_dag(rng: &mut ChaCha8Rng) -> Program {
    let mut b = Builder::new();
    let ty = TensorType::scalar(DType::F64);
    let n_in = rng.random_range(1..=4);
    let mut pool: Vec<Var> = (0..n_in)
        .map(|i| {
            b.input(&format!("x{i}"), ty.clone(), InputKind::Data)
                .expect("fresh")
        })
        .collect();
    let n = rng.random_range(4..=16);
    for _ in 0..n {
        let pick = |rng: &mut ChaCha8Rng, pool: &[Var]| {
            if rng.random_bool(0.5) {
                pool[pool.len() - 1 - rng.random_range(0..pool.len().min(3))]
            } else {
                pool[rng.random_range(0..pool.len())]
            }
        };
        let x = pick(rng, &pool);
        let y = if rng.random_bool(0.2) {
            x
        } else {
            pick(rng, &pool)
        };
        let v = match rng.random_range(0..11) {
            0..=2 => b.add(x, y),
            3..=4 => b.sub(x, y),
            5 => b.neg(x),
            6..=8 => b.mul(x, y),
            9 => b.reciprocal(x),
            _ => {
                let c = rng.random_range(-16i32..=16).max(1) as f64 / 8.0;
                b.constant(Tensor::scalar(DType::F64, c))
            }
        }
        .expect("scalar ops fit");
        pool.push(v);
    }
    let mut outs = vec![*pool.last().expect("nonempty")];
    for _ in 0..rng.random_range(0..=2) {
        let o = if rng.random_bool(0.3) {
            outs[0]
        } else {
            pool[rng.random_range(0..pool.len())]
        };
        outs.push(o);
    }
    b.finish(&outs).expect("outputs exist")
}

/// A dyadic rational k/16 in [-2, 2], exact in f64.
fn dyadic(rng: &mut ChaCha8Rng) -> f64 {
    rng.random_range(-32i32..=32) as f64 / 16.0
}

fn scalar(r: Rational) -> RArray {
    RArray::new(Vec::<usize>::new(), vec![r]).expect("scalar")
}

/// A value with its gradient over the inputs: forward-mode dual numbers over rationals.
#[derive(Clone)]
struct Dual {
    v: Rational,
    d: Vec<Rational>,
}

/// Exact outputs and Jacobian rows of `p` by dual numbers; `None` on a reciprocal of 0.
fn duals(p: &Program, x: &[Rational]) -> Result<Option<Vec<Dual>>, String> {
    let k = x.len();
    let mut env: Vec<Dual> = x
        .iter()
        .enumerate()
        .map(|(i, v)| Dual {
            v: v.clone(),
            d: (0..k)
                .map(|j| {
                    if i == j {
                        Rational::one()
                    } else {
                        Rational::zero()
                    }
                })
                .collect(),
        })
        .collect();
    for n in p.nodes() {
        let a = |i: usize| env[n.operands[i].index()].clone();
        let out = match n.prim.name() {
            "add" | "sub" => {
                let (x, y) = (a(0), a(1));
                let s = if n.prim.name() == "add" { 1 } else { -1 };
                let sgn = |r: &Rational| if s > 0 { r.clone() } else { -r.clone() };
                Dual {
                    v: &x.v + sgn(&y.v),
                    d: x.d.iter().zip(&y.d).map(|(p, q)| p + sgn(q)).collect(),
                }
            }
            "neg" => {
                let x = a(0);
                Dual {
                    v: -x.v,
                    d: x.d.iter().map(|q| -q.clone()).collect(),
                }
            }
            "mul" => {
                let (x, y) = (a(0), a(1));
                Dual {
                    v: &x.v * &y.v,
                    d: x.d
                        .iter()
                        .zip(&y.d)
                        .map(|(p, q)| p * &y.v + &x.v * q)
                        .collect(),
                }
            }
            "reciprocal" => {
                let x = a(0);
                if x.v.is_zero() {
                    return Ok(None);
                }
                let r = x.v.recip();
                let r2 = &r * &r;
                Dual {
                    d: x.d.iter().map(|q| -(q * &r2)).collect(),
                    v: r,
                }
            }
            "constant" => {
                let c = interp::eval(&single(n.prim.clone()), &[]).map_err(|e| e.to_string())?;
                Dual {
                    v: rational_from_f64(c[0].to_f64_vec()[0]).ok_or("non-finite constant")?,
                    d: vec![Rational::zero(); k],
                }
            }
            other => return Err(format!("dual numbers have no rule for `{other}`")),
        };
        env.push(out);
    }
    Ok(Some(
        p.outputs().iter().map(|o| env[o.index()].clone()).collect(),
    ))
}

/// The program `() -> prim()`, to read a constant's value.
fn single(prim: crate::ir::Prim) -> Program {
    let mut b = Builder::new();
    let v = b.apply(prim, &[]).expect("constant");
    b.finish(&[v]).expect("one output")
}

/// f64 values with running error bounds; `None` for a node where the evaluation hit 1/0.
fn bounded(p: &Program, x: &[f64]) -> Result<Vec<(f64, f64)>, String> {
    let u = f64::EPSILON / 2.0;
    let inflate = 1.0 + 8.0 * u;
    let mut env: Vec<(f64, f64)> = x.iter().map(|&v| (v, 0.0)).collect();
    for n in p.nodes() {
        let a = |i: usize| env[n.operands[i].index()];
        let (z, e) = match n.prim.name() {
            "add" => {
                let ((x, ex), (y, ey)) = (a(0), a(1));
                let z = x + y;
                (z, ex + ey + u * z.abs())
            }
            "sub" => {
                let ((x, ex), (y, ey)) = (a(0), a(1));
                let z = x - y;
                (z, ex + ey + u * z.abs())
            }
            "neg" => {
                let (x, ex) = a(0);
                (-x, ex)
            }
            "mul" => {
                let ((x, ex), (y, ey)) = (a(0), a(1));
                let z = x * y;
                (z, x.abs() * ey + (y.abs() + ey) * ex + u * z.abs())
            }
            "reciprocal" => {
                let (x, ex) = a(0);
                let z = 1.0 / x;
                let e = if ex < x.abs() {
                    ex / (x.abs() * (x.abs() - ex)) + u * z.abs()
                } else {
                    f64::INFINITY
                };
                (z, e)
            }
            // A derivative program names a gradient that is another output's value by a
            // same-shape reshape: an exact copy.
            "reshape" => a(0),
            "constant" => {
                let c = interp::eval(&single(n.prim.clone()), &[]).map_err(|e| e.to_string())?;
                (c[0].to_f64_vec()[0], 0.0)
            }
            other => return Err(format!("no running error rule for `{other}`")),
        };
        env.push((z, e * inflate));
    }
    Ok(p.outputs().iter().map(|o| env[o.index()]).collect())
}

/// A point: f64 inputs and seeds (exact dyadic rationals), the same as rationals, and the
/// dual numbers there.
struct Point {
    xf: Vec<f64>,
    uf: Vec<f64>,
    xr: Vec<Rational>,
    ur: Vec<Rational>,
    dual: Vec<Dual>,
}

/// `POINTS` points where no reciprocal reads an exact zero, or `None` if 20 draws find none.
fn admissible_points(p: &Program, rng: &mut ChaCha8Rng) -> Result<Option<Vec<Point>>, String> {
    let mut points = Vec::with_capacity(POINTS);
    for _ in 0..20 {
        let xf: Vec<f64> = (0..p.n_inputs()).map(|_| dyadic(rng)).collect();
        let uf: Vec<f64> = p.outputs().iter().map(|_| dyadic(rng)).collect();
        let exact = |v: &[f64]| -> Vec<Rational> {
            v.iter()
                .map(|&v| rational_from_f64(v).expect("finite"))
                .collect()
        };
        let (xr, ur) = (exact(&xf), exact(&uf));
        if let Some(dual) = duals(p, &xr)? {
            points.push(Point {
                xf,
                uf,
                xr,
                ur,
                dual,
            });
            if points.len() == POINTS {
                return Ok(Some(points));
            }
        }
    }
    Ok(None)
}

fn compare(t: &mut Tally, d: &Derivatives, pt: &Point) {
    let (xf, uf, xr, ur, dual) = (&pt.xf, &pt.uf, &pt.xr, &pt.ur, &pt.dual);
    let p = &d.program;
    let at = || format!("DAG of {} nodes at x = {xf:?}, u = {uf:?}", p.n_nodes());
    // Exact values: the library's rational interpreter against dual numbers.
    let xs: Vec<RArray> = xr.iter().cloned().map(scalar).collect();
    match interp::eval_rational(p, &xs) {
        Ok(ys) => {
            let ok = ys.iter().zip(dual).all(|(y, dv)| y.data()[0] == dv.v);
            t.check(ok, || {
                format!("exact value differs from dual numbers: {}", at())
            });
        }
        Err(e) => t.fail(format!("eval_rational failed: {e}: {}", at())),
    }
    // Exact gradient: Σ_k u_k ∂y_k/∂x_i from the duals, against the VJP program over rationals.
    let want: Vec<Rational> = (0..xr.len())
        .map(|i| {
            dual.iter()
                .zip(ur)
                .fold(Rational::zero(), |acc, (dv, u)| acc + &dv.d[i] * u)
        })
        .collect();
    let mut args = xs.clone();
    args.extend(ur.iter().cloned().map(scalar));
    match interp::eval_rational(&d.vjp.program, &args) {
        Ok(out) => {
            let got: Vec<Rational> = (0..xr.len())
                .map(|i| {
                    let g = d.vjp.layout.gradient(&out, i).expect("float input");
                    g.data()[0].clone()
                })
                .collect();
            t.check(got == want, || {
                format!(
                    "exact VJP gradient {got:?} differs from dual numbers {want:?}: {}",
                    at()
                )
            });
        }
        Err(e) => t.fail(format!(
            "eval_rational of the VJP program failed: {e}: {}",
            at()
        )),
    }
    // f64: bitwise against the IEEE reference, then within the running bound of the exact value.
    let exact_values: Vec<Rational> = dual.iter().map(|dv| dv.v.clone()).collect();
    f64_check(t, p, xf, &exact_values, "value", &at);
    let mut vx: Vec<f64> = xf.to_vec();
    vx.extend_from_slice(uf);
    let mut exact_vjp: Vec<Rational> = exact_values.clone();
    exact_vjp.extend(want);
    f64_check(t, &d.vjp.program, &vx, &exact_vjp, "gradient", &at);
}

/// Checks a scalar program's f64 outputs against the IEEE reference and the exact values.
fn f64_check(
    t: &mut Tally,
    p: &Program,
    x: &[f64],
    exact: &[Rational],
    what: &str,
    at: &dyn Fn() -> String,
) {
    let reference = match bounded(p, x) {
        Ok(r) => r,
        Err(e) => {
            t.fail(format!("{what}: {e}"));
            return;
        }
    };
    let xs: Vec<Tensor> = x.iter().map(|&v| Tensor::scalar(DType::F64, v)).collect();
    let got = match interp::eval(p, &xs) {
        Ok(y) => y,
        Err(e) => {
            // A float rejection is consistent only where the bound is infinite or the reference
            // also left the finite numbers.
            let consistent = reference
                .iter()
                .any(|(z, e)| !z.is_finite() || !e.is_finite());
            if consistent {
                t.count("f64_rejections_where_the_bound_is_infinite", 1);
            } else {
                t.fail(format!("{what}: f64 eval failed: {e}: {}", at()));
            }
            return;
        }
    };
    let same = got
        .iter()
        .zip(&reference)
        .all(|(g, (z, _))| g.to_f64_vec()[0].to_bits() == z.to_bits());
    t.check(same, || {
        format!("{what}: f64 differs from the IEEE reference: {}", at())
    });
    for ((g, (_, bound)), ex) in got.iter().zip(&reference).zip(exact) {
        let g = g.to_f64_vec()[0];
        let err = rational_to_f64(&(rational_from_f64(g).expect("finite") - ex).abs());
        let rel = if ex.is_zero() {
            0.0
        } else {
            err / rational_to_f64(&ex.abs())
        };
        t.max_error(&format!("f64_{what}_rel_error"), rel);
        if bound.is_finite() && *bound > 0.0 {
            t.max_error(&format!("f64_{what}_error_over_bound"), err / bound);
        }
        t.check(err <= *bound, || {
            format!(
                "{what}: f64 error {err:e} exceeds the running bound {bound:e}: {}",
                at()
            )
        });
    }
}
