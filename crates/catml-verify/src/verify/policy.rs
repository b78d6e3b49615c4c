//! Policy descent, finite case (docs/policy.md).
//!
//! For a surjection q: I -> O of finite sets and a Boolean policy P ⊆ I (a bit mask), with
//! kernel pair I ×_O I = {(a, b) : q(a) = q(b)} and projections p1, p2:
//! - the criterion p1*P = p2*P says: q(a) = q(b) implies (a ∈ P ⟺ b ∈ P);
//! - P descends when P = q*Q = {a : q(a) ∈ Q} for some Q ⊆ O, found here by trying every Q
//!   (independently of the criterion).
//!
//! Every surjection with |I| <= N (as a list of images, O = {0..k}) and every P ⊆ I is checked:
//! criterion ⟺ descends, and when it descends, Q is unique. Then the residual-dimension
//! counterexample with real programs: two tapes of the same constant function (same values, same
//! zero pullback) whose VJP programs keep residuals of total dimension 0 and 1; the policy
//! "dim R = 0" separates them inside one observation fiber, so it is not a preimage.

use rand::SeedableRng;

use super::generate::random_inputs;
use super::numeric::{flat, Derivatives};
use super::{Ctx, FamilyReport, Tally};
use crate::interp;
use crate::ir::{Builder, InputKind, Program};
use crate::prim::Ops;
use crate::tensor::{DType, RArray, Rational, Tensor, TensorType};

/// A surjection q: {0..n} -> {0..codomain}, as its list of images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Surjection {
    pub images: Vec<usize>,
    pub codomain: usize,
}

impl Surjection {
    /// `None` if `images` misses a point of {0..codomain} or leaves it.
    pub fn new(images: Vec<usize>, codomain: usize) -> Option<Surjection> {
        let mut hit = vec![false; codomain];
        for &i in &images {
            *hit.get_mut(i)? = true;
        }
        hit.iter()
            .all(|&h| h)
            .then_some(Surjection { images, codomain })
    }

    /// q*Q as a bit mask over I.
    pub fn preimage(&self, q: u64) -> u64 {
        self.images
            .iter()
            .enumerate()
            .filter(|(_, &o)| q >> o & 1 == 1)
            .fold(0, |m, (a, _)| m | 1 << a)
    }
}

/// p1*P = p2*P over the kernel pair: q(a) = q(b) implies a ∈ P ⟺ b ∈ P.
pub fn kernel_pair_criterion(q: &Surjection, p: u64) -> bool {
    let n = q.images.len();
    (0..n).all(|a| (0..n).all(|b| q.images[a] != q.images[b] || (p >> a & 1) == (p >> b & 1)))
}

/// Every Q ⊆ O with q*Q = P.
pub fn descends(q: &Surjection, p: u64) -> Vec<u64> {
    (0..1u64 << q.codomain)
        .filter(|&qq| q.preimage(qq) == p)
        .collect()
}

/// Every surjection from a set of `n` points, over every codomain size.
fn surjections(n: usize) -> Vec<Surjection> {
    let mut out = Vec::new();
    for k in 1..=n {
        for code in 0..k.pow(n as u32) {
            let images: Vec<usize> = (0..n).map(|j| (code / k.pow(j as u32)) % k).collect();
            if let Some(s) = Surjection::new(images, k) {
                out.push(s);
            }
        }
    }
    out
}

pub(crate) fn run(ctx: &Ctx) -> FamilyReport {
    let max_n = ctx.level.pick(3, 6, 6);
    let all: Vec<Surjection> = (1..=max_n).flat_map(surjections).collect();
    let mut t = ctx.tally(
        "every surjection q: I -> O with |I| <= N and every Boolean policy P on I: kernel-pair criterion iff P is a preimage q*Q, with Q unique; the residual-dimension counterexample with real programs",
        "reference: 249 finite surjections with 6,726 Boolean-policy cases",
        all.len() + 1,
    );
    t.figure("max_domain_size", max_n);
    t.figure("surjections", all.len());
    let mut policies = 0u64;
    let mut descending = 0u64;
    for q in &all {
        for p in 0..1u64 << q.images.len() {
            policies += 1;
            let crit = kernel_pair_criterion(q, p);
            let qs = descends(q, p);
            descending += crit as u64;
            t.check(crit != qs.is_empty(), || {
                format!(
                    "q = {:?}, P = {p:b}: criterion {crit}, preimages {qs:?}",
                    q.images
                )
            });
            t.check(qs.len() <= 1, || {
                format!("q = {:?}, P = {p:b}: Q not unique: {qs:?}", q.images)
            });
        }
        t.case();
    }
    t.figure("policy_cases", policies);
    t.figure("descending_policies", descending);
    counterexample(&mut t, ctx.seed);
    t.case();
    t.finish()
}

/// Tape 1: y = 0 (a constant; its VJP keeps no residual). Tape 2: y = a ⊙ c with c = 0 (its
/// VJP reads c: one residual scalar).
pub(crate) fn constant_tapes() -> (Program, Program) {
    let ty = TensorType::scalar(DType::F64);
    let mut b = Builder::new();
    b.input("a", ty.clone(), InputKind::Data).expect("fresh");
    let y = b
        .constant(Tensor::scalar(DType::F64, 0.0))
        .expect("constant");
    let t1 = b.finish(&[y]).expect("output");
    let mut b = Builder::new();
    let a = b.input("a", ty, InputKind::Data).expect("fresh");
    let c = b
        .constant(Tensor::scalar(DType::F64, 0.0))
        .expect("constant");
    let y = b.mul(a, c).expect("scalars");
    let t2 = b.finish(&[y]).expect("output");
    (t1, t2)
}

fn residual_dim(d: &Derivatives) -> usize {
    d.vjp.layout.residuals.iter().map(|r| r.ty.numel()).sum()
}

fn counterexample(t: &mut Tally, seed: u64) {
    let (p1, p2) = constant_tapes();
    let (d1, d2) = match (Derivatives::new(&p1), Derivatives::new(&p2)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            t.fail(format!("counterexample tapes: {e}"));
            return;
        }
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // Same observation: equal values and equal (zero) pullbacks, at random points and exactly.
    let mut same = true;
    for _ in 0..16 {
        let x = random_inputs(&p1, &mut rng);
        let u = vec![Tensor::scalar(DType::F64, 1.0)];
        match (d1.vjp_at(&x, &u), d2.vjp_at(&x, &u)) {
            (Ok((y1, g1)), Ok((y2, g2))) => {
                same &= flat(&y1) == flat(&y2) && flat(&g1) == vec![0.0] && flat(&g2) == vec![0.0]
            }
            _ => same = false,
        }
        let xr = [
            RArray::new(Vec::<usize>::new(), vec![Rational::new(7.into(), 3.into())])
                .expect("scalar"),
        ];
        same &= matches!(
            (interp::eval_rational(&p1, &xr), interp::eval_rational(&p2, &xr)),
            (Ok(a), Ok(b)) if a == b
        );
    }
    t.check(same, || "the two tapes are not one observation".to_string());
    let dims = (residual_dim(&d1), residual_dim(&d2));
    t.figure("counterexample_residual_dims", [dims.0, dims.1]);
    t.check(dims == (0, 1), || {
        format!("residual dims {dims:?}, expected (0, 1)")
    });
    // One observation fiber: I = {tape 1, tape 2}, O = {the observation}; P = {dim R = 0}.
    let q = Surjection::new(vec![0, 0], 1).expect("onto one point");
    let p = (dims.0 == 0) as u64 | ((dims.1 == 0) as u64) << 1;
    t.check(
        !kernel_pair_criterion(&q, p) && descends(&q, p).is_empty(),
        || "the residual-dimension policy descended".to_string(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surjection_counts() {
        // k! S(n, k) summed over k: 1, 3, 13, 75, 541 (ordered Bell numbers).
        let counts: Vec<usize> = (1..=5).map(|n| surjections(n).len()).collect();
        assert_eq!(counts, vec![1, 3, 13, 75, 541]);
    }

    #[test]
    fn a_policy_splitting_a_fibre_does_not_descend() {
        let q = Surjection::new(vec![0, 0, 1], 2).unwrap();
        assert!(!kernel_pair_criterion(&q, 0b001));
        assert!(descends(&q, 0b001).is_empty());
        assert!(kernel_pair_criterion(&q, 0b011));
        assert_eq!(descends(&q, 0b011), vec![0b01]);
    }
}
