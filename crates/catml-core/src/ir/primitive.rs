//! The interface every primitive implements: its rules, side by side.

use std::fmt;
use std::sync::Arc;

use crate::ir::{BatchCtx, Budget, Builder, Drawing, Linearity, Var};
use crate::tensor::{DType, RArray, Tensor, TensorType};

/// A node's operands handed to its kernel ([`Primitive::eval_owned`]), held inline: nodes
/// rarely take more than four, and evaluation makes one list per node.
pub type Operands = smallvec::SmallVec<[Tensor; 4]>;

/// Borrows of `operands`, for a kernel that reads them.
pub fn operand_refs(operands: &[Tensor]) -> smallvec::SmallVec<[&Tensor; 4]> {
    match operands {
        // Filled as a whole array (the unused slots repeat the first): `collect` into a
        // `SmallVec` costs several times more, and every node's kernel call makes one.
        [first, ..] if operands.len() <= 4 => {
            let refs = std::array::from_fn(|i| operands.get(i).unwrap_or(first));
            smallvec::SmallVec::from_buf_and_len(refs, operands.len())
        }
        _ => operands.iter().collect(),
    }
}

/// A primitive's attributes as JSON (the LensIR `attrs` object).
pub type Attrs = serde_json::Map<String, serde_json::Value>;

/// What kind of claim a primitive's derivative rules make (docs/derivatives.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// The classical derivative everywhere on the admissible domain.
    Exact,
    /// The derivative on open regions, with a stated choice on a boundary (ReLU at 0).
    Convention(&'static str),
    /// A response that is not the derivative, declared as such (stop-gradient, straight-through).
    Declared(&'static str),
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleKind::Exact => write!(f, "exact"),
            RuleKind::Convention(c) => write!(f, "convention: {c}"),
            RuleKind::Declared(d) => write!(f, "declared: {d}"),
        }
    }
}

/// A primitive's type rule rejected its operands or attributes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TypeError {
    #[error("expected {expected} operand{}, found {found}", plural(.expected))]
    Arity { expected: String, found: usize },
    #[error("operand {index} has dtype {found}, expected {expected}")]
    DType {
        index: usize,
        expected: String,
        found: DType,
    },
    #[error("operand types differ: operand 0 is {left}, operand 1 is {right}{}", mismatch_hint(.left, .right))]
    Mismatch { left: TensorType, right: TensorType },
    #[error("operand {index} has type {found}, expected {expected}")]
    Operand {
        index: usize,
        expected: String,
        found: TensorType,
    },
    #[error("attribute `{key}`: {message}")]
    Attr { key: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// How to make two operands agree: nothing is cast or broadcast implicitly.
fn mismatch_hint(left: &TensorType, right: &TensorType) -> &'static str {
    if left.dtype != right.dtype {
        "; dtypes are never cast implicitly: convert one with `convert`"
    } else if left.shape != right.shape {
        "; shapes are never broadcast implicitly: broadcast one with `broadcast` first"
    } else {
        ""
    }
}

/// The plural suffix for a count written as text ("1" operand, "2" or "at least 1" operands).
fn plural(count: &str) -> &'static str {
    if count == "1" {
        ""
    } else {
        "s"
    }
}

impl TypeError {
    pub fn attr(key: &str, message: impl Into<String>) -> TypeError {
        TypeError::Attr {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// [`Primitive::infer`] under the rule every primitive shares: storage dtypes (f16, u8, ...)
/// enter and leave only primitives that [move](Primitive::moves_storage) them, so no kernel
/// ever meets one. Builders, tracers and the shape interpreter type nodes through this.
pub fn infer_type(prim: &dyn Primitive, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
    if !prim.moves_storage() {
        if let Some(index) = inputs.iter().position(|t| t.dtype.is_storage()) {
            return Err(TypeError::DType {
                index,
                expected: format!(
                    "a compute dtype (f32, f64, i64, bool): convert {} first",
                    inputs[index].dtype
                ),
                found: inputs[index].dtype,
            });
        }
    }
    let ty = prim.infer(inputs)?;
    if ty.dtype.is_storage() && !prim.moves_storage() {
        return Err(TypeError::Invalid(format!(
            "the result would have the storage dtype {}; produce {} and `convert`",
            ty.dtype,
            ty.dtype.compute()
        )));
    }
    Ok(ty)
}

/// A kernel refused its inputs (outside the admissible domain, an unsupported dtype) or could
/// not allocate its result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    #[error("outside the admissible domain: {0}")]
    Domain(String),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Alloc(#[from] crate::tensor::alloc::AllocError),
}

/// A derivative rule could not be emitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    #[error("primitive `{op}` has no {mode} rule")]
    Missing { op: String, mode: &'static str },
    #[error(transparent)]
    Type(#[from] TypeError),
}

/// A primitive: one operation's rules side by side. Interpreters and transforms ask these
/// methods and never match on the primitive, so a new operation touches only its own file.
pub trait Primitive: fmt::Debug + Send + Sync + 'static {
    /// The registry name, as in LensIR `op`.
    fn name(&self) -> &str;

    /// Attributes as LensIR JSON; `Registry::construct(name, attrs)` must rebuild `self`.
    fn attrs(&self) -> Attrs {
        Attrs::new()
    }

    /// The nested program the primitive runs (the LensIR node's `body`), for primitives built
    /// around one (`scan`); `Registry::construct_with_body` must rebuild `self` from it and
    /// the attributes.
    fn body(&self) -> Option<&super::Program> {
        None
    }

    /// What it computes, in one line, for the catalog (`docs/ops.md`); elementwise rows give
    /// theirs as data.
    fn formula(&self) -> Option<&'static str> {
        None
    }

    /// The shape functor: the output type from the operand types, or why they do not fit.
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError>;

    /// Whether operands or results may have a storage dtype (`docs/dtypes.md`): only the
    /// primitives that hold or convert values (`constant`, `convert`) say yes.
    fn moves_storage(&self) -> bool {
        false
    }

    /// The eval functor on f32/f64 (and i64 where meaningful). Operands have the types `infer`
    /// accepted. Rejects inputs outside the admissible domain.
    fn eval(&self, inputs: &[&Tensor]) -> Result<Tensor, KernelError>;

    /// `eval` with the operands handed over: an operand whose value dies at this node arrives
    /// holding the only reference to its buffer, and an elementwise kernel may write its result
    /// there instead of allocating. The default borrows and calls `eval`.
    fn eval_owned(&self, inputs: &mut Operands) -> Result<Tensor, KernelError> {
        self.eval(&operand_refs(inputs))
    }

    /// Whether [`eval_owned`](Self::eval_owned), on operands of these types, writes its result
    /// into an operand of the result's type that arrives holding the only reference to its
    /// buffer, instead of allocating. The plan's peak then counts no new buffer for the node
    /// (`docs/memory.md`, "The planned peak").
    fn writes_in_operand(&self, _inputs: &[TensorType], _output: &TensorType) -> bool {
        false
    }

    /// Where the evaluated result's elements live: in a buffer of its own (the default), in
    /// operand 0's buffer, shared (`reshape`, `stop_gradient`), or in one the program holds
    /// (`constant`). The plan's peak counts new bytes for the first alone, and keeps a shared
    /// buffer until every value in it is dead (`docs/memory.md`, "The planned peak").
    fn result_storage(&self) -> ResultStorage {
        ResultStorage::Own
    }

    /// Whether the result is the elementwise sum of the two operands, both of the result's type
    /// (`add`). An executable's plan may then fold the sum into the kernel that makes one
    /// operand ([`eval_added`](Self::eval_added); `docs/memory.md`).
    fn sums_operands(&self) -> bool {
        false
    }

    /// Whether [`eval_added`](Self::eval_added) serves operands of these types.
    fn adds_into(&self, _inputs: &[TensorType]) -> bool {
        false
    }

    /// sum += this node's result, in `sum`'s buffer (of the result's type, held only by the
    /// caller), in the same pass that computes it: a product accumulating into its
    /// destination. Called only where [`adds_into`](Self::adds_into) said yes.
    fn eval_added(&self, _inputs: &[&Tensor], _sum: &mut Tensor) -> Result<(), KernelError> {
        Err(KernelError::Unsupported(format!(
            "`{}` cannot add its result into a value",
            self.name()
        )))
    }

    /// Whether the kernel counts the non-finite values of its result, of type `output`, as it
    /// writes them, when evaluation asks (`tensor::checked`): evaluation then asks this node's
    /// kernel only, and scans the results of every other node itself.
    fn counts_non_finite(&self, _output: &TensorType) -> bool {
        false
    }

    /// This operation on blocks of elements, when each result element depends on one element
    /// of each operand (an elementwise operation, a broadcast): an executable then runs a chain
    /// of such nodes as one pass ([`BlockKernel`](super::BlockKernel)).
    fn elementwise(&self) -> Option<&dyn super::BlockKernel> {
        None
    }

    /// This node's kernel on whole operands held as slices, writing its value into a slice of
    /// the caller's: an executable then runs a small program of such nodes in one buffer
    /// ([`SliceKernel`](super::SliceKernel); `docs/memory.md`, "Small programs").
    fn slice_kernel(&self) -> Option<&dyn super::SliceKernel> {
        None
    }

    /// This node's kernel reading permuted operands or writing a permuted result in place:
    /// an executable then copies no permute between it and its neighbours
    /// ([`PermutedKernel`](super::PermutedKernel)).
    fn permuted(&self) -> Option<&dyn super::PermutedKernel> {
        None
    }

    /// `Some(perm)` when the result is the one operand with its axes permuted, axis j of the
    /// result being axis `perm[j]` of the operand (`permute`).
    fn permutation(&self) -> Option<&[usize]> {
        None
    }

    /// Whether every output element is a copy of an operand element (reshape, permute,
    /// broadcast, gather, ...). The interpreter checks each node's output for non-finite
    /// values; a copy of checked values needs no second scan.
    fn copies_operand_values(&self) -> bool {
        false
    }

    /// Exact evaluation over rationals; `None` when the operation is not rational.
    fn eval_rational(&self, _inputs: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        None
    }

    /// Whether [`Primitive::eval_rational`] evaluates (the operation is rational).
    fn has_rational_eval(&self) -> bool {
        false
    }

    /// The f32 error budget of one application to operands of these types
    /// (`docs/budgets.md`).
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        Budget::Measured
    }

    /// Where the primitive stands with respect to the core fragment (`docs/lowering.md`).
    fn fragment(&self) -> Fragment {
        Fragment::Outside
    }

    /// Smooth with exact derivative rules wherever generated programs apply it, so finite
    /// differences check its rules. By default: exactly when the rule is [`RuleKind::Exact`].
    fn smooth(&self) -> bool {
        self.rule() == RuleKind::Exact
    }

    /// Whether this application returns its single operand unchanged (a reshape to the
    /// operand's own type): rewrites may drop such a node.
    fn is_identity(&self, _inputs: &[TensorType], _output: &TensorType) -> bool {
        false
    }

    /// Floating-point operations for one application (default: one per output element).
    fn flops(&self, _inputs: &[TensorType], output: &TensorType) -> u64 {
        output.numel() as u64
    }

    /// Whether the primitive contracts its operands (a matrix product or a convolution): its
    /// result costs far more to compute than to keep, so the `dots` checkpoint policy saves it
    /// (`docs/checkpoint.md`).
    fn is_contraction(&self) -> bool {
        false
    }

    /// Which claim the derivative rules make.
    fn rule(&self) -> RuleKind {
        RuleKind::Exact
    }

    /// For a primitive linear in one operand, the others fixed data: which operand, and its
    /// transpose. The default [`jvp`](Self::jvp) and [`vjp`](Self::vjp) follow from it.
    fn linearity(&self) -> Option<Linearity<'_>> {
        None
    }

    /// Forward rule: the output tangent from operand tangents (`None` = zero), as new nodes.
    /// By default, a linear primitive applied to the tangent ([`Primitive::linearity`]).
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        if let Some(linear) = self.linearity() {
            return linear.jvp(b, x, dx);
        }
        Err(RuleError::Missing {
            op: self.name().to_string(),
            mode: "jvp",
        })
    }

    /// Reverse rule, independent of `jvp`: one cotangent per operand occurrence (`None` = zero).
    /// By default, a linear primitive's transpose ([`Primitive::linearity`]).
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        _y: Var,
        dy: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        if let Some(linear) = self.linearity() {
            return linear.vjp(b, x, dy);
        }
        Err(RuleError::Missing {
            op: self.name().to_string(),
            mode: "vjp",
        })
    }

    /// How many elements of these inputs sit where a labelled convention decides the
    /// derivative (a ReLU-mask input exactly 0, a max tie).
    fn convention_points(&self, _inputs: &[&Tensor]) -> usize {
        0
    }

    /// Batching rule (`vmap`): this primitive over a batch of operands, as new nodes. The
    /// batched operands lead with the batch axis (`at.batched`, size `at.size`); the result
    /// must lead with it too (`docs/vmap.md`). Rules live beside the primitive's other rules;
    /// `prim::batching` holds the shared ones.
    fn batch(&self, _b: &mut Builder, _x: &[Var], _at: &BatchCtx) -> Result<Var, RuleError> {
        Err(RuleError::Missing {
            op: self.name().to_string(),
            mode: "batching",
        })
    }

    /// The expansion of a composite into the core fragment; `None` for core primitives.
    fn lower(&self, _b: &mut Builder, _x: &[Var]) -> Option<Result<Var, TypeError>> {
        None
    }

    /// How a random program generator draws applications of this primitive, attributes and
    /// operands included (`self` only finds the rule); `None` when it cannot, and the
    /// verification bundle then lists the primitive as uncovered.
    fn drawing(&self) -> Option<Drawing> {
        None
    }
}

/// Where a primitive's evaluated result keeps its elements ([`Primitive::result_storage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultStorage {
    /// A buffer the kernel makes.
    Own,
    /// Operand 0's buffer, read under the result's own shape.
    Operand,
    /// A buffer the program itself holds, such as a constant's value.
    Program,
}

/// A primitive's place with respect to the core fragment: the few primitives every composite
/// lowers into (`docs/lowering.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fragment {
    /// One of the core fragment's primitives.
    Core,
    /// Not in the core fragment, but lowerings may emit it, for the stated reason.
    LoweringExtra(&'static str),
    /// Neither: a composite (with a lowering) or an operation the core cannot express.
    Outside,
}

/// A shared handle to a primitive.
pub type Prim = Arc<dyn Primitive>;

/// Two primitives are the same operation when their names, attributes and bodies agree.
pub fn same_prim(a: &dyn Primitive, b: &dyn Primitive) -> bool {
    a.name() == b.name() && a.attrs() == b.attrs() && a.body() == b.body()
}
