//! Random well-typed programs over the whole primitive set, for property tests and the bundle.
//!
//! A [`GenConfig`] says how many inputs and nodes, the dtype, the largest rank and dimension and
//! which primitives; [`generate`] draws a program from a `ChaCha8Rng` seeded with a `u64`, so a
//! seed names a program. Programs have shared subterms, repeated operands (`mul(x, x)`,
//! `concat(x, x)`), repeated outputs, unused inputs, dead nodes, identity reshapes and (on
//! request) tags and names that need quoting.
//!
//! Each primitive says how to draw an application of itself
//! ([`Primitive::drawing`](crate::ir::Primitive::drawing)): a relative weight and a rule written
//! beside its other rules, against the drawing interface [`Draw`] that [`Gen`] implements here.
//! A new primitive is drawn once it has a drawing rule; the bundle lists registered primitives
//! without one (`uncovered_primitives`).
//!
//! Domains are respected by construction. Every value carries an interval `[lo, hi]` holding all
//! of its elements whenever every input lies in `[-1, 1]` (interval arithmetic, sound for each
//! rule), and:
//! - log, rsqrt, reciprocal and the rows with restricted domains read only values made positive
//!   with margin ([`Draw::positive`]): `x ⊙ x + c` with `c >= 1/4`, or `exp(x)` with `|x| <= 2`
//!   (so `>= e^-2`); a nonzero operand is sometimes the negation of such a value;
//! - values stay moderate: an operand whose magnitude `max(|lo|, |hi|)` exceeds a cap is first
//!   multiplied by a power of two `2^-k` (exact in floating point and over rationals);
//! - exp reads values of magnitude at most 2.
//!
//! Rules may add structural nodes (reshape, mul by a constant, broadcast of a constant) to fit
//! operands, whatever primitives are selected.

use crate::prim::names;
use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::ir::{
    BuildError, Builder, Draw, DrawError, Drawing, InputKind, Prim, Program, TypeError, Var,
};
use crate::prim::{self, Ops};
use crate::tensor::{DType, Shape, Tensor, TensorType};

pub use crate::ir::{Drawn, Interval};

/// An extra elementwise primitive for the generator (a user's custom primitive, or a deliberately
/// wrong rule in a test): applied to values of magnitude <= `cap`, its result lies in
/// `range(operand interval)`.
#[derive(Debug, Clone)]
pub struct UnaryEntry {
    pub prim: Prim,
    pub cap: f64,
    pub range: fn(Interval) -> Interval,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Data inputs (ignored when `input_types` is set).
    pub n_inputs: usize,
    /// Parameter inputs declared up front.
    pub n_params: usize,
    /// Generator steps; each adds one primitive application and maybe helper nodes.
    pub n_nodes: usize,
    /// At most this many output occurrences (at least one).
    pub max_outputs: usize,
    pub dtype: DType,
    pub max_rank: usize,
    pub max_dim: usize,
    /// Names of the primitives to draw (their drawing rules may apply others to fit operands).
    pub prims: Vec<String>,
    /// Extra elementwise primitives, drawn like the others.
    pub extra_unary: Vec<UnaryEntry>,
    /// Fixed data input types (for programs that must compose with others).
    pub input_types: Option<Vec<TensorType>>,
    /// Intervals holding the fixed data inputs (default [-1, 1]), e.g. another generated
    /// program's output intervals.
    pub input_ranges: Option<Vec<Interval>>,
    /// Prefix of input names (distinct prefixes keep parameters of two programs apart).
    pub name_prefix: String,
    /// Weight matrices and biases made on the fly become parameter inputs (else constants).
    pub weights_as_params: bool,
    /// Chance of an extra data input that nothing reads.
    pub unused_input_prob: f64,
    /// Chance that an output occurrence repeats an earlier one.
    pub repeat_output_prob: f64,
    /// Give nodes tags.
    pub tags: bool,
    /// Sometimes name nodes with names that need quoting or look like listing keywords.
    pub exotic_names: bool,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            n_inputs: 2,
            n_params: 1,
            n_nodes: 12,
            max_outputs: 3,
            dtype: DType::F64,
            max_rank: 3,
            max_dim: 4,
            prims: all_names(),
            extra_unary: Vec::new(),
            input_types: None,
            input_ranges: None,
            name_prefix: String::new(),
            weights_as_params: true,
            unused_input_prob: 0.15,
            repeat_output_prob: 0.15,
            tags: false,
            exotic_names: false,
        }
    }
}

impl GenConfig {
    /// Only the primitives that are smooth where generated and whose rules are exact
    /// derivatives (finite differences apply): no relu, step, stop_gradient or convert.
    pub fn smooth(mut self) -> GenConfig {
        self.prims = smooth_names();
        self
    }

    pub fn with_prims(mut self, names: &[&str]) -> GenConfig {
        self.prims = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The same draws without the primitives `names`.
    pub fn without(mut self, names: &[&str]) -> GenConfig {
        self.prims.retain(|p| !names.contains(&p.as_str()));
        self
    }
}

/// Why a program could not be generated (a generator defect: drawing rules must always fit).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    #[error("drawing `{entry}`: {source}")]
    Type { entry: String, source: TypeError },
    #[error("generator: {0}")]
    Build(#[from] BuildError),
    #[error("no drawing rule for `{0}`")]
    UnknownEntry(String),
    #[error("no primitives selected")]
    Empty,
}

impl GenError {
    /// A drawing error met while drawing `entry`.
    fn drawing(entry: &str, e: DrawError) -> GenError {
        match e {
            DrawError::Type(source) => GenError::Type {
                entry: entry.to_string(),
                source,
            },
            DrawError::Build(e) => GenError::Build(e),
        }
    }
}

/// How the built-in primitive `name` is drawn, if it is registered with a drawing rule.
pub fn drawing(name: &str) -> Option<Drawing> {
    prim::builtins().example(name)?.drawing()
}

/// The names of every built-in primitive with a drawing rule.
pub fn all_names() -> Vec<String> {
    prim::builtins()
        .names()
        .filter(|n| drawing(n).is_some())
        .map(str::to_string)
        .collect()
}

/// The primitives the generator draws that are smooth with exact rules where generated, as
/// each primitive says of itself ([`crate::ir::Primitive::smooth`]).
pub fn smooth_names() -> Vec<String> {
    let r = prim::builtins();
    all_names()
        .into_iter()
        .filter(|n| r.example(n).is_some_and(|p| p.smooth()))
        .collect()
}

/// Registered primitives the generator cannot draw.
pub fn uncovered(registry: &crate::ir::Registry) -> Vec<String> {
    registry
        .names()
        .filter(|n| registry.example(n).and_then(|p| p.drawing()).is_none())
        .map(str::to_string)
        .collect()
}

/// Names a node may get when `exotic_names` is on: listing keywords, spaces, quotes, Unicode.
const EXOTIC: &[&str] = &[
    "inputs",
    "outputs",
    "instructions",
    "param",
    "program(",
    "h 1",
    "ω",
    "q\"uote",
    "0",
    "a,b",
    "tag=x",
    ")",
];

/// The generator's state while it builds one program: what drawing rules see through [`Draw`].
pub struct Gen<'a> {
    cfg: &'a GenConfig,
    rng: ChaCha8Rng,
    b: Builder,
    vals: Vec<Drawn>,
    n_weights: usize,
}

/// What one generator step may apply.
enum Choice<'a> {
    Rule(&'a str, Drawing),
    Extra(&'a UnaryEntry),
}

/// Draws the program named by `seed`.
pub fn generate(cfg: &GenConfig, seed: u64) -> Result<Program, GenError> {
    generate_with_ranges(cfg, seed).map(|(p, _)| p)
}

/// Draws the program named by `seed`, with intervals holding its outputs whenever its data
/// inputs lie in their intervals and its parameters in [-1, 1].
pub fn generate_with_ranges(
    cfg: &GenConfig,
    seed: u64,
) -> Result<(Program, Vec<Interval>), GenError> {
    let mut choices: Vec<(u32, Choice)> = Vec::new();
    for name in &cfg.prims {
        let d = drawing(name).ok_or_else(|| GenError::UnknownEntry(name.clone()))?;
        choices.push((d.weight, Choice::Rule(name, d)));
    }
    for u in &cfg.extra_unary {
        choices.push((2, Choice::Extra(u)));
    }
    if choices.is_empty() {
        return Err(GenError::Empty);
    }
    let total: u32 = choices.iter().map(|c| c.0).sum();
    let mut g = Gen {
        cfg,
        rng: ChaCha8Rng::seed_from_u64(seed),
        b: Builder::new(),
        vals: Vec::new(),
        n_weights: 0,
    };
    g.declare_inputs()
        .map_err(|e| GenError::drawing("inputs", e))?;
    let tags = ["enc", "dec", "block 1"];
    for _ in 0..cfg.n_nodes {
        if cfg.tags && g.rng.random_bool(0.3) {
            let t = g.rng.random_range(0..=tags.len());
            g.b.set_tag(tags.get(t).map(|s| s.to_string()));
        }
        let mut r = g.rng.random_range(0..total);
        let (_, c) = choices
            .iter()
            .find(|c| {
                if r < c.0 {
                    true
                } else {
                    r -= c.0;
                    false
                }
            })
            .expect("r < total");
        let v = match c {
            Choice::Rule(name, d) => d.draw(&mut g).map_err(|e| GenError::drawing(name, e))?,
            Choice::Extra(u) => {
                gen_extra_unary(&mut g, u).map_err(|e| GenError::drawing(u.prim.name(), e))?
            }
        };
        g.vals.push(v);
    }
    g.b.set_tag(None);
    let outputs = g.choose_outputs()?;
    let ranges = outputs
        .iter()
        .map(|o| {
            g.vals
                .iter()
                .find(|v| v.var == o.var)
                .map_or(Interval::symmetric(1.0), |v| v.range)
        })
        .collect();
    let vars: Vec<Var> = outputs.iter().map(|o| o.var).collect();
    Ok((g.b.finish(&vars)?, ranges))
}

impl Gen<'_> {
    fn random_shape(&mut self) -> Shape {
        Shape::new((self as &mut dyn Draw).shape())
    }

    fn declare_inputs(&mut self) -> Result<(), DrawError> {
        let p = self.cfg.name_prefix.clone();
        let data: Vec<TensorType> = match &self.cfg.input_types {
            Some(t) => t.clone(),
            None => (0..self.cfg.n_inputs.max(1))
                .map(|_| TensorType::new(self.cfg.dtype, self.random_shape()))
                .collect(),
        };
        let exotic = self.cfg.exotic_names;
        let ranges = self.cfg.input_ranges.clone().unwrap_or_default();
        for (i, ty) in data.into_iter().enumerate() {
            let name = if exotic && self.rng.random_bool(0.4) {
                let k = self.rng.random_range(0..EXOTIC.len());
                self.b.fresh_name(&format!("{p}{}", EXOTIC[k]))
            } else {
                format!("{p}x{i}")
            };
            let var = self.b.input(&name, ty, InputKind::Data)?;
            self.vals.push(Drawn {
                var,
                range: ranges.get(i).copied().unwrap_or(Interval::symmetric(1.0)),
            });
        }
        // Data inputs come first: an unused one, then the parameters.
        if self.cfg.input_types.is_none() && self.rng.random_bool(self.cfg.unused_input_prob) {
            let ty = TensorType::new(self.cfg.dtype, self.random_shape());
            self.b.input(&format!("{p}unused"), ty, InputKind::Data)?;
        }
        for i in 0..self.cfg.n_params {
            let ty = TensorType::new(self.cfg.dtype, self.random_shape());
            let var = self.b.input(&format!("{p}p{i}"), ty, InputKind::Param)?;
            self.vals.push(Drawn {
                var,
                range: Interval::symmetric(1.0),
            });
        }
        Ok(())
    }

    /// Whether each pooled value depends on some input.
    fn live(&self) -> Result<Vec<bool>, GenError> {
        let (p, map) = self.b.clone().finish_mapped(&[self.vals[0].var])?;
        let mut live = vec![true; p.n_inputs()];
        for n in p.nodes() {
            let l = n.operands.iter().any(|o| live[o.index()]);
            live.push(l);
        }
        Ok(self
            .vals
            .iter()
            .map(|v| live[map[v.var.index()].index()])
            .collect())
    }

    /// The last value that depends on an input, then random picks (repeats allowed).
    fn choose_outputs(&mut self) -> Result<Vec<Drawn>, GenError> {
        let n = self.rng.random_range(1..=self.cfg.max_outputs.max(1));
        let live = self.live()?;
        let first = (0..self.vals.len())
            .rev()
            .find(|&i| live[i])
            .unwrap_or(self.vals.len() - 1);
        let mut out = vec![self.vals[first]];
        while out.len() < n {
            if self.rng.random_bool(self.cfg.repeat_output_prob) {
                let k = self.rng.random_range(0..out.len());
                out.push(out[k]);
            } else {
                let v = self.pick();
                out.push(v);
            }
        }
        Ok(out)
    }

    /// n values on the grid of 1/256 in [lo, hi].
    fn values(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n)
            .map(|_| (self as &mut dyn Draw).grid(lo, hi))
            .collect()
    }
}

impl Draw for Gen<'_> {
    fn int(&mut self, lo: usize, hi: usize) -> usize {
        self.rng.random_range(lo..=hi)
    }

    fn float(&mut self, lo: f64, hi: f64) -> f64 {
        self.rng.random_range(lo..=hi)
    }

    fn unit(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn max_rank(&self) -> usize {
        self.cfg.max_rank
    }

    fn max_dim(&self) -> usize {
        self.cfg.max_dim
    }

    fn dtype(&self) -> DType {
        self.cfg.dtype
    }

    fn ty(&self, v: Var) -> TensorType {
        self.b.ty(v).clone()
    }

    fn builder(&mut self) -> &mut Builder {
        &mut self.b
    }

    /// Applies a primitive (sometimes under an exotic name).
    fn apply(&mut self, prim: Prim, operands: &[Var]) -> Result<Var, DrawError> {
        let r = if self.cfg.exotic_names && self.rng.random_bool(0.1) {
            let hint = EXOTIC[self.rng.random_range(0..EXOTIC.len())];
            self.b.apply_hinted(hint, prim, operands)
        } else {
            self.b.apply(prim, operands)
        };
        Ok(r?)
    }

    /// Usually one of the latest values (deep chains), else any (shared subterms).
    fn pick(&mut self) -> Drawn {
        let n = self.vals.len();
        if self.rng.random_bool(0.6) {
            let k = self.rng.random_range(0..n.min(3));
            self.vals[n - 1 - k]
        } else {
            let k = self.rng.random_range(0..n);
            self.vals[k]
        }
    }

    fn pick_where(&mut self, pred: &dyn Fn(&TensorType) -> bool) -> Option<Drawn> {
        let ok: Vec<Drawn> = self
            .vals
            .iter()
            .copied()
            .filter(|v| pred(self.b.ty(v.var)))
            .collect();
        if ok.is_empty() {
            None
        } else {
            Some(ok[self.rng.random_range(0..ok.len())])
        }
    }

    /// `x` itself (a repeated operand) a quarter of the time, else another value of that
    /// type, else a constant.
    fn partner(&mut self, x: Drawn) -> Result<Drawn, DrawError> {
        if self.chance(0.25) {
            return Ok(x);
        }
        let ty = self.ty(x.var);
        if self.chance(0.7) {
            if let Some(v) = self.pick_where(&|t| *t == ty) {
                return Ok(v);
            }
        }
        self.constant_of(&ty)
    }

    /// An existing value, a new parameter input (when weights are parameters), or a constant.
    fn weight(&mut self, ty: &TensorType) -> Result<Drawn, DrawError> {
        if self.chance(0.3) {
            if let Some(v) = self.pick_where(&|t| t == ty) {
                return Ok(v);
            }
        }
        if self.cfg.weights_as_params && self.chance(0.7) {
            let name = format!("{}w{}", self.cfg.name_prefix, self.n_weights);
            self.n_weights += 1;
            let var = self.b.input(&name, ty.clone(), InputKind::Param)?;
            let v = Drawn {
                var,
                range: Interval::symmetric(1.0),
            };
            self.vals.push(v);
            return Ok(v);
        }
        self.constant_of(ty)
    }

    /// A full tensor, or a broadcast scalar, of grid values in [-1, 1].
    fn constant_of(&mut self, ty: &TensorType) -> Result<Drawn, DrawError> {
        if ty.rank() > 0 && self.chance(0.4) {
            let c = self.values(1, -1.0, 1.0)[0];
            let var = self.b.full(c, ty)?;
            return Ok(Drawn {
                var,
                range: Interval::new(c, c),
            });
        }
        let data = self.values(ty.numel(), -1.0, 1.0);
        let range = Interval::new(
            data.iter().cloned().fold(f64::INFINITY, f64::min),
            data.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        );
        let t = Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).expect("numel values");
        let var = self.apply(Arc::new(prim::Constant::new(t)), &[])?;
        Ok(Drawn { var, range })
    }

    /// `x` itself if its elements are >= 0.1, else `exp(x')` (when exp is selected) or
    /// `x' ⊙ x' + c` with `x'` moderated to 2 and `c` in [1/4, 5/4].
    fn positive(&mut self, x: Drawn) -> Result<Drawn, DrawError> {
        if x.range.lo >= 0.1 {
            return Ok(x);
        }
        let m = (self as &mut dyn Draw).moderate(x, 2.0)?;
        if self.cfg.prims.iter().any(|p| p == names::EXP) && self.chance(0.4) {
            let var = self.b.exp(m.var)?;
            return Ok(Drawn {
                var,
                range: m.range.increasing(f64::exp),
            });
        }
        let sq = self.b.mul(m.var, m.var)?;
        let c = self.values(1, 0.25, 1.25)[0].max(0.25);
        let cv = self.b.full_like(c, sq)?;
        let var = self.b.add(sq, cv)?;
        Ok(Drawn {
            var,
            range: m.range.square().plus(Interval::new(c, c)),
        })
    }
}

fn gen_extra_unary(g: &mut Gen, u: &UnaryEntry) -> Result<Drawn, DrawError> {
    let x = g.pick();
    let x = (g as &mut dyn Draw).moderate(x, u.cap)?;
    let var = g.apply(u.prim.clone(), &[x.var])?;
    Ok(Drawn {
        var,
        range: (u.range)(x.range),
    })
}

/// Uniform values in [-1, 1] for every input of `p`, in its declared types.
pub fn random_inputs(p: &Program, rng: &mut ChaCha8Rng) -> Vec<Tensor> {
    p.inputs()
        .iter()
        .map(|i| random_tensor(&i.ty, rng, 1.0))
        .collect()
}

/// A tensor of this type with uniform values in [-m, m].
pub fn random_tensor(ty: &TensorType, rng: &mut ChaCha8Rng, m: f64) -> Tensor {
    let data = (0..ty.numel()).map(|_| rng.random_range(-m..=m)).collect();
    Tensor::from_f64s(ty.dtype, ty.shape.clone(), data).expect("numel values")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp;

    #[test]
    fn every_built_in_primitive_has_a_drawing_rule() {
        assert_eq!(uncovered(prim::builtins()), Vec::<String>::new());
    }

    #[test]
    fn a_seed_names_a_program() {
        let cfg = GenConfig::default();
        for seed in 0..20 {
            assert_eq!(generate(&cfg, seed).unwrap(), generate(&cfg, seed).unwrap());
        }
        assert_ne!(generate(&cfg, 1).unwrap(), generate(&cfg, 2).unwrap());
    }

    #[test]
    fn generated_programs_evaluate_inside_their_domains() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for dtype in [DType::F64, DType::F32] {
            let cfg = GenConfig {
                dtype,
                n_nodes: 20,
                exotic_names: true,
                tags: true,
                ..GenConfig::default()
            };
            for seed in 0..300 {
                let p = generate(&cfg, seed).unwrap();
                let x = random_inputs(&p, &mut rng);
                let y = interp::eval(&p, &x);
                assert!(y.is_ok(), "seed {seed}: {:?}", y.err());
            }
        }
    }

    #[test]
    fn every_drawn_primitive_is_generated() {
        let mut seen = std::collections::BTreeSet::new();
        let cfg = GenConfig::default();
        for seed in 0..200 {
            for n in generate(&cfg, seed).unwrap().nodes() {
                seen.insert(n.prim.name().to_string());
            }
        }
        for name in all_names() {
            assert!(seen.contains(&name), "never generated `{name}`");
        }
    }
}
