//! User-defined primitives from closures: a forward kernel, a type rule, a VJP rule, optionally
//! a JVP rule, and a rule label. (Implementing [`Primitive`] directly works too.)
//!
//! Forward mode through a primitive without a JVP rule is an error naming it, not a silent zero.

use std::fmt;
use std::sync::Arc;

use crate::ir::{
    Builder, KernelError, Prim, Primitive, Registry, RuleError, RuleKind, TypeError, Var,
};
use crate::tensor::{Tensor, TensorType};

type InferFn = dyn Fn(&[TensorType]) -> Result<TensorType, TypeError> + Send + Sync;
type EvalFn = dyn Fn(&[&Tensor]) -> Result<Tensor, KernelError> + Send + Sync;
type VjpFn =
    dyn Fn(&mut Builder, &[Var], Var, Var) -> Result<Vec<Option<Var>>, RuleError> + Send + Sync;
type JvpFn = dyn Fn(&mut Builder, &[Var], Var, &[Option<Var>]) -> Result<Option<Var>, RuleError>
    + Send
    + Sync;

/// A primitive assembled from closures.
///
/// A straight-through estimator: forward rounds, backward passes the cotangent unchanged,
/// declared as such.
///
/// ```
/// use catml_core::ir::{Builder, InputKind, RuleKind};
/// use catml_core::prim::{CustomPrimitive, Ops};
/// use catml_core::tensor::{Tensor, DType, TensorType};
///
/// let round = CustomPrimitive::new(
///     "round_ste",
///     |t| Ok(t[0].clone()),
///     |x| Ok(Tensor::f64(x[0].dims().to_vec(), x[0].to_f64_vec().iter().map(|v| v.round()).collect()).unwrap()),
/// )
/// .with_vjp(|_b, _x, _y, u| Ok(vec![Some(u)]))
/// .with_rule(RuleKind::Declared("straight-through: identity response"));
/// let prim = round.into_prim(); // to load modules naming it: prim::registry().with(prim.clone())
///
/// let mut b = Builder::new();
/// let x = b.input("x", TensorType::new(DType::F64, [2]), InputKind::Data).unwrap();
/// let y = b.apply(prim, &[x]).unwrap();
/// let p = b.finish(&[y]).unwrap();
/// assert!(catml_core::ad::vjp(&p).is_ok());
/// assert!(catml_core::ad::jvp(&p).is_err()); // no JVP rule: forward mode says so
/// ```
#[derive(Clone)]
pub struct CustomPrimitive {
    name: String,
    infer: Arc<InferFn>,
    eval: Arc<EvalFn>,
    vjp: Option<Arc<VjpFn>>,
    jvp: Option<Arc<JvpFn>>,
    rule: RuleKind,
}

impl fmt::Debug for CustomPrimitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomPrimitive")
            .field("name", &self.name)
            .field("vjp", &self.vjp.is_some())
            .field("jvp", &self.jvp.is_some())
            .field("rule", &self.rule)
            .finish()
    }
}

impl CustomPrimitive {
    pub fn new(
        name: &str,
        infer: impl Fn(&[TensorType]) -> Result<TensorType, TypeError> + Send + Sync + 'static,
        eval: impl Fn(&[&Tensor]) -> Result<Tensor, KernelError> + Send + Sync + 'static,
    ) -> CustomPrimitive {
        CustomPrimitive {
            name: name.to_string(),
            infer: Arc::new(infer),
            eval: Arc::new(eval),
            vjp: None,
            jvp: None,
            rule: RuleKind::Exact,
        }
    }

    /// The reverse rule: one cotangent per operand (`None` = zero), as new nodes.
    pub fn with_vjp(
        mut self,
        f: impl Fn(&mut Builder, &[Var], Var, Var) -> Result<Vec<Option<Var>>, RuleError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.vjp = Some(Arc::new(f));
        self
    }

    /// The forward rule.
    pub fn with_jvp(
        mut self,
        f: impl Fn(&mut Builder, &[Var], Var, &[Option<Var>]) -> Result<Option<Var>, RuleError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.jvp = Some(Arc::new(f));
        self
    }

    /// The claim the rules make (exact, a convention, or a declared response).
    pub fn with_rule(mut self, rule: RuleKind) -> Self {
        self.rule = rule;
        self
    }

    /// The shared handle that builders apply. No registry is needed to build with it; one is
    /// needed only to load modules that name it ([`Registry::with`]).
    pub fn into_prim(self) -> Prim {
        Arc::new(self)
    }

    /// Registers under its name (so modules naming it load) and returns the shared handle.
    pub fn register(self, registry: &mut Registry) -> Prim {
        let prim = self.into_prim();
        *registry = std::mem::take(registry).with(prim.clone());
        prim
    }
}

impl Primitive for CustomPrimitive {
    fn name(&self) -> &str {
        &self.name
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        (self.infer)(inputs)
    }
    fn eval(&self, inputs: &[&Tensor]) -> Result<Tensor, KernelError> {
        (self.eval)(inputs)
    }
    fn rule(&self) -> RuleKind {
        self.rule
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        match &self.jvp {
            Some(f) => f(b, x, y, dx),
            None => Err(RuleError::Missing {
                op: self.name.clone(),
                mode: "jvp",
            }),
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        match &self.vjp {
            Some(f) => f(b, x, y, u),
            None => Err(RuleError::Missing {
                op: self.name.clone(),
                mode: "vjp",
            }),
        }
    }
}
