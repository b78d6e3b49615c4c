//! arctan and erf written as f64 arithmetic, the algorithms (range reduction and rational
//! approximations, with their coefficients) of the `libm` functions CatML's kernels call
//! (`ONNX.md`, "Export"). ONNX's Atan and Erf would do, but runtimes implement them for float
//! only and not correctly rounded; these compositions run in double everywhere, and an f32
//! operand is computed in f64 and rounded once, as the kernel does.
//!
//! Every branch is computed on an operand clamped into its own interval and the result is
//! chosen with `Where`, so no branch produces a non-finite value from a finite operand.

// The coefficients are written as published, in more digits than a double holds; each reads
// back to the intended double.
#![allow(clippy::excessive_precision)]

use catml_core::prim::names;
use catml_core::tensor::DType;

use super::elementwise::in_f64;
use super::families::MapFn;
use super::graph::{Mapped, Site};
use super::ExportError;

pub(crate) const OPS: &[(&str, MapFn)] = &[(names::ATAN, atan), (names::ERF, erf)];

fn atan(s: &mut Site) -> Result<Mapped, ExportError> {
    in_f64(s, atan_graph)
}

fn erf(s: &mut Site) -> Result<Mapped, ExportError> {
    in_f64(s, erf_graph)
}

/// The arithmetic of one composition: nodes named after the site's output.
struct Arith<'s, 'a> {
    s: &'s mut Site<'a>,
    d: DType,
}

impl Arith<'_, '_> {
    fn c(&mut self, v: f64) -> String {
        self.s.const_scalar(v, self.d)
    }
    fn op(&mut self, op: &str, xs: &[&str]) -> String {
        self.s.tmp(op, xs, vec![])
    }
    fn add(&mut self, a: &str, b: &str) -> String {
        self.op("Add", &[a, b])
    }
    fn sub(&mut self, a: &str, b: &str) -> String {
        self.op("Sub", &[a, b])
    }
    fn mul(&mut self, a: &str, b: &str) -> String {
        self.op("Mul", &[a, b])
    }
    fn div(&mut self, a: &str, b: &str) -> String {
        self.op("Div", &[a, b])
    }
    /// c + v·a for a constant c.
    fn add_c(&mut self, c: f64, v: &str, a: &str) -> String {
        let k = self.c(c);
        let p = self.mul(v, a);
        self.add(&k, &p)
    }
    /// c · a for a constant c.
    fn mul_c(&mut self, c: f64, a: &str) -> String {
        let k = self.c(c);
        self.mul(&k, a)
    }
    /// cs[0] + v (cs[1] + v (cs[2] + ...)), by Horner's rule.
    fn horner(&mut self, v: &str, cs: &[f64]) -> String {
        let (last, rest) = cs.split_last().expect("a polynomial has a coefficient");
        let mut acc = self.c(*last);
        for c in rest.iter().rev() {
            acc = self.add_c(*c, v, &acc);
        }
        acc
    }
    /// v clamped into [lo, hi].
    fn clamp(&mut self, v: &str, lo: f64, hi: f64) -> String {
        let (l, h) = (self.c(lo), self.c(hi));
        let m = self.op("Max", &[v, &l]);
        self.op("Min", &[&m, &h])
    }
    /// [v < c] as a bool.
    fn below(&mut self, v: &str, c: f64) -> String {
        let k = self.c(c);
        self.op("Less", &[v, &k])
    }
    fn pick(&mut self, cond: &str, a: &str, b: &str) -> String {
        self.op("Where", &[cond, a, b])
    }
    /// `values[k]` where k is the first threshold v lies below (the last value past them all).
    fn piecewise(&mut self, v: &str, thresholds: &[f64], values: &[String]) -> String {
        let mut acc = values[thresholds.len()].clone();
        for (t, val) in thresholds.iter().zip(values).rev() {
            let b = self.below(v, *t);
            acc = self.pick(&b, val, &acc);
        }
        acc
    }
    /// -v where x < 0, else v.
    fn with_sign_of(&mut self, x: &str, v: &str) -> String {
        let neg = self.below(x, 0.0);
        let nv = self.op("Neg", &[v]);
        self.pick(&neg, &nv, v)
    }
}

/// arctan x for |x| = a reduced to t in [-7/16, 7/16] by one of the identities
/// atan a = atan c + atan((a - c) / (1 + c a)) (c = 0, 1/2, 1, 3/2) or π/2 + atan(-1/a), then
/// atan t = t - t (t² P(t²)) with π/2's and atan c's values split into hi + lo.
fn atan_graph(s: &mut Site, x: &str, d: DType) -> String {
    // Branch thresholds on |x| and each branch's c, atan(c) hi and lo.
    const EDGES: [f64; 4] = [0.4375, 0.6875, 1.1875, 2.4375];
    const C: [f64; 5] = [0.0, 0.5, 1.0, 1.5, 0.0];
    const HI: [f64; 5] = [
        0.0,
        4.63647609000806093515e-01,
        std::f64::consts::FRAC_PI_4,
        9.82793723247329054082e-01,
        std::f64::consts::FRAC_PI_2,
    ];
    const LO: [f64; 5] = [
        0.0,
        2.26987774529616870924e-17,
        3.06161699786838301793e-17,
        1.39033110312309984516e-17,
        6.12323399573676603587e-17,
    ];
    // atan t = t - t Σ AT[i] t^(2i+2), the minimax series on [0, 7/16].
    const AT: [f64; 11] = [
        3.33333333333329318027e-01,
        -1.99999999998764832476e-01,
        1.42857142725034663711e-01,
        -1.11111104054623557880e-01,
        9.09088713343650656196e-02,
        -7.69187620504482999495e-02,
        6.66107313738753120669e-02,
        -5.83357013379057348645e-02,
        4.97687799461593236017e-02,
        -3.65315727442169155270e-02,
        1.62858201153657823623e-02,
    ];
    let mut m = Arith { s, d };
    let a = m.op("Abs", &[x]);
    let big = m.below(&a, EDGES[3]);
    let per_branch = |m: &mut Arith, vals: &[f64; 5]| {
        let vs: Vec<String> = vals.iter().map(|v| m.c(*v)).collect();
        m.piecewise(&a, &EDGES, &vs)
    };
    let c = per_branch(&mut m, &C);
    let hi = per_branch(&mut m, &HI);
    let lo = per_branch(&mut m, &LO);
    // t = (a - c) / (1 + c a) below 39/16, -1/a above (c is 0 there and in the first branch).
    let minus_one = m.c(-1.0);
    let one = m.c(1.0);
    let amc = m.sub(&a, &c);
    let num = m.pick(&big, &amc, &minus_one);
    let ca = m.mul(&c, &a);
    let opca = m.add(&one, &ca);
    let den = m.pick(&big, &opca, &a);
    let t = m.div(&num, &den);
    let z = m.mul(&t, &t);
    let w = m.mul(&z, &z);
    let odd: Vec<f64> = AT.iter().step_by(2).copied().collect();
    let even: Vec<f64> = AT.iter().skip(1).step_by(2).copied().collect();
    let s1 = m.horner(&w, &odd);
    let s1 = m.mul(&z, &s1);
    let s2 = m.horner(&w, &even);
    let s2 = m.mul(&w, &s2);
    let sum = m.add(&s1, &s2);
    // hi - ((t·sum - lo) - t)
    let ts = m.mul(&t, &sum);
    let tsl = m.sub(&ts, &lo);
    let r = m.sub(&tsl, &t);
    let y = m.sub(&hi, &r);
    m.with_sign_of(x, &y)
}

/// The pieces of erf x and erfc |x| by range: x + x P(x²)/Q(x²) below 0.84375;
/// erfc |x| = (1 - erf(1)) - P(s)/Q(s), s = |x| - 1, below 1.25; erfc |x| =
/// e^(-x² - 0.5625 + R(1/x²)/S(1/x²)) / |x| below 28 (erf is ±1 from 6 on, erfc 0 from 28).
struct ErfPieces {
    a: String,
    one: String,
    small: String,
    erfc_near: String,
    erfc_tail: String,
}

fn erf_pieces(m: &mut Arith, x: &str) -> ErfPieces {
    const ERX: f64 = 8.45062911510467529297e-01;
    const PP: [f64; 5] = [
        1.28379167095512558561e-01,
        -3.25042107247001499370e-01,
        -2.84817495755985104766e-02,
        -5.77027029648944159157e-03,
        -2.37630166566501626084e-05,
    ];
    const QQ: [f64; 6] = [
        1.0,
        3.97917223959155352819e-01,
        6.50222499887672944485e-02,
        5.08130628187576562776e-03,
        1.32494738004321644526e-04,
        -3.96022827877536812320e-06,
    ];
    const PA: [f64; 7] = [
        -2.36211856075265944077e-03,
        4.14856118683748331666e-01,
        -3.72207876035701323847e-01,
        3.18346619901161753674e-01,
        -1.10894694282396677476e-01,
        3.54783043256182359371e-02,
        -2.16637559486879084300e-03,
    ];
    const QA: [f64; 7] = [
        1.0,
        1.06420880400844228286e-01,
        5.40397917702171048937e-01,
        7.18286544141962662868e-02,
        1.26171219808761642112e-01,
        1.36370839120290507362e-02,
        1.19844998467991074170e-02,
    ];
    const RA: [f64; 8] = [
        -9.86494403484714822705e-03,
        -6.93858572707181764372e-01,
        -1.05586262253232909814e+01,
        -6.23753324503260060396e+01,
        -1.62396669462573470355e+02,
        -1.84605092906711035994e+02,
        -8.12874355063065934246e+01,
        -9.81432934416914548592e+00,
    ];
    const SA: [f64; 9] = [
        1.0,
        1.96512716674392571292e+01,
        1.37657754143519042600e+02,
        4.34565877475229228821e+02,
        6.45387271733267880336e+02,
        4.29008140027567833386e+02,
        1.08635005541779435134e+02,
        6.57024977031928170135e+00,
        -6.04244152148580987438e-02,
    ];
    const RB: [f64; 7] = [
        -9.86494292470009928597e-03,
        -7.99283237680523006574e-01,
        -1.77579549177547519889e+01,
        -1.60636384855821916062e+02,
        -6.37566443368389627722e+02,
        -1.02509513161107724954e+03,
        -4.83519191608651397019e+02,
    ];
    const SB: [f64; 8] = [
        1.0,
        3.03380607434824582924e+01,
        3.25792512996573918826e+02,
        1.53672958608443695994e+03,
        3.19985821950859553908e+03,
        2.55305040643316442583e+03,
        4.74528541206955367215e+02,
        -2.24409524465858183362e+01,
    ];
    let a = m.op("Abs", &[x]);
    let ratio = |m: &mut Arith, v: &str, p: &[f64], q: &[f64]| {
        let pv = m.horner(v, p);
        let qv = m.horner(v, q);
        m.div(&pv, &qv)
    };
    let xs = m.clamp(x, -0.84375, 0.84375);
    let z = m.mul(&xs, &xs);
    let y = ratio(m, &z, &PP, &QQ);
    let xy = m.mul(&xs, &y);
    let small = m.add(&xs, &xy);
    let a1 = m.clamp(&a, 0.84375, 1.25);
    let one = m.c(1.0);
    let sv = m.sub(&a1, &one);
    let pq = ratio(m, &sv, &PA, &QA);
    let one_minus_erx = m.c(1.0 - ERX);
    let erfc_near = m.sub(&one_minus_erx, &pq);
    // e^(-z² - 0.5625) e^((z - a)(z + a) + R/S) / a, where z is a with its low 27 bits cut
    // (Veltkamp's split), so that z² is exact.
    let a2 = m.clamp(&a, 1.25, 28.0);
    let a2sq = m.mul(&a2, &a2);
    let inv = m.div(&one, &a2sq);
    let ra = ratio(m, &inv, &RA, &SA);
    let rb = ratio(m, &inv, &RB, &SB);
    let below_rb = m.below(&a2, 1.0 / 0.35);
    let rs = m.pick(&below_rb, &ra, &rb);
    let split = m.mul_c(134217729.0, &a2);
    let diff = m.sub(&split, &a2);
    let hi = m.sub(&split, &diff);
    let hh = m.mul(&hi, &hi);
    let nhh = m.op("Neg", &[&hh]);
    let k = m.c(0.5625);
    let e1_arg = m.sub(&nhh, &k);
    let e1 = m.op("Exp", &[&e1_arg]);
    let zma = m.sub(&hi, &a2);
    let zpa = m.add(&hi, &a2);
    let cross = m.mul(&zma, &zpa);
    let e2_arg = m.add(&cross, &rs);
    let e2 = m.op("Exp", &[&e2_arg]);
    let e12 = m.mul(&e1, &e2);
    let erfc_tail = m.div(&e12, &a2);
    ErfPieces {
        a,
        one,
        small,
        erfc_near,
        erfc_tail,
    }
}

/// `sat` (chosen by x's sign) where x is a number, x itself where it is NaN.
fn by_sign_or_nan(m: &mut Arith, x: &str, neg: f64, pos: f64) -> String {
    let (n, p) = (m.c(neg), m.c(pos));
    let is_neg = m.below(x, 0.0);
    let unit = m.pick(&is_neg, &n, &p);
    let is_number = m.op("Equal", &[x, x]);
    m.pick(&is_number, &unit, x)
}

/// erf x (NaN stays NaN: every comparison with it is false, x = x included).
fn erf_graph(s: &mut Site, x: &str, d: DType) -> String {
    let mut m = Arith { s, d };
    let e = erf_pieces(&mut m, x);
    let near = m.sub(&e.one, &e.erfc_near);
    let near = m.with_sign_of(x, &near);
    let tail = m.sub(&e.one, &e.erfc_tail);
    let tail = m.with_sign_of(x, &tail);
    let saturated = by_sign_or_nan(&mut m, x, -1.0, 1.0);
    m.piecewise(
        &e.a,
        &[0.84375, 1.25, 6.0],
        &[e.small, near, tail, saturated],
    )
}

/// 1 + erf x = erfc(-x), with erfc |x| itself for negative x (no cancellation).
pub(super) fn one_plus_erf_graph(s: &mut Site, x: &str, d: DType) -> String {
    let mut m = Arith { s, d };
    let e = erf_pieces(&mut m, x);
    let lower = m.add(&e.one, &e.small);
    let two = m.c(2.0);
    let is_neg = m.below(x, 0.0);
    let by_sign = |m: &mut Arith, erfc: &str| {
        let other = m.sub(&two, erfc);
        m.pick(&is_neg, erfc, &other)
    };
    let near = by_sign(&mut m, &e.erfc_near);
    let tail = by_sign(&mut m, &e.erfc_tail);
    let beyond = by_sign_or_nan(&mut m, x, 0.0, 2.0);
    m.piecewise(&e.a, &[0.84375, 1.25, 28.0], &[lower, near, tail, beyond])
}
