//! Elementwise operations as rows of data. A row states an operation once: its name,
//! attributes, kernel, exact rational kernel (or none), admissible domain, derivative as an
//! expression built from primitives, rule label, kinks, lowering, and the operand intervals a
//! random program generator may use. [`Unary`] and [`Binary`] turn a row into a primitive;
//! every interpreter, transform and check then reads the row through the `Primitive` trait.
//!
//! Kernels compute in f64 and round once to the operand's dtype, so an f32 result is the f64
//! reference rounded: within u|y| + η (`docs/budgets.md`), or exact where the f64 result is a
//! value of the operand's dtype (selections, integer rounding, sign changes).
//!
//! One derivative expression gives both the JVP (ẏ = f'(x) ẋ) and the VJP (x̄ = f'(x) ȳ) of a
//! row, as in JAX's elementwise rules: the adjoint check holds them to each other by
//! construction, so for rows it is finite differences in f64 (and exact kernels against their
//! lowerings) that test the derivative itself.

use std::fmt;
use std::sync::Arc;

use num_traits::{FromPrimitive, Signed, Zero};
use serde_json::Value;

use crate::ir::{
    operand_refs, AttrReader, Attrs, BlockKernel, Budget, Builder, Drawing, Fragment, KernelError,
    Operands, Prim, Primitive, Registry, RuleError, RuleKind, TypeError, Var,
};
use crate::prim::Ops;
use crate::tensor::{kernels, Array, Float, RArray, Rational, Tensor, TensorType};

pub use crate::ir::Interval;

/// Where an operand's elements must lie for the operation to be defined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Domain {
    All,
    Positive,
    NonNegative,
    /// x > the bound.
    Above(f64),
    NonZero,
}

impl Domain {
    pub fn contains(self, x: f64) -> bool {
        match self {
            Domain::All => true,
            Domain::Positive => x > 0.0,
            Domain::NonNegative => x >= 0.0,
            Domain::Above(a) => x > a,
            Domain::NonZero => x != 0.0,
        }
    }

    fn contains_rational(self, x: &Rational) -> bool {
        match self {
            Domain::All => true,
            Domain::Positive => x.is_positive(),
            Domain::NonNegative => !x.is_negative(),
            Domain::Above(a) => Rational::from_f64(a).is_none_or(|a| *x > a),
            Domain::NonZero => !x.is_zero(),
        }
    }

    /// What an admissible element is, for error messages and `catml ops`.
    pub fn describe(self) -> String {
        match self {
            Domain::All => "any value".to_string(),
            Domain::Positive => "a positive value".to_string(),
            Domain::NonNegative => "a nonnegative value".to_string(),
            Domain::Above(a) => format!("a value above {a}"),
            Domain::NonZero => "a nonzero value".to_string(),
        }
    }
}

/// The type of an attribute of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrKind {
    Float,
    Integer,
    Bool,
}

impl AttrKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AttrKind::Float => "float",
            AttrKind::Integer => "integer",
            AttrKind::Bool => "bool",
        }
    }
}

/// One attribute of a row: held as f64 (a flag as 0 or 1), written to JSON in its own type.
#[derive(Debug, Clone, Copy)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
    /// `None`: required.
    pub default: Option<f64>,
}

/// The kernel of a derivative expression: builds f'(x) (unary) from the operand `x`, the
/// result `y` and the attributes; `None` is the zero derivative.
pub type UnaryFactor = fn(&mut Builder, Var, Var, &[f64]) -> Result<Option<Var>, TypeError>;

/// f'(x) ⊙ u built directly from `x`, `y`, `u` and the attributes, where that has a cheaper
/// form than a product with f'(x) (a fused node, a linear map applied to `u`).
pub type UnaryApply = fn(&mut Builder, Var, Var, Var, &[f64]) -> Result<Var, TypeError>;

/// The derivative of a unary row. The derivative of an elementwise map is diagonal, so one
/// form gives both the JVP (ẏ = f'(x) ẋ) and the VJP (x̄ = f'(x) ȳ).
#[derive(Clone, Copy)]
pub enum UnaryDerivative {
    /// f'(x) as an expression; the rules multiply by it.
    Factor(UnaryFactor),
    /// u ↦ f'(x) ⊙ u as an expression.
    Apply(UnaryApply),
}

/// The f32 error budget of a row (a [`Budget`] that a static row can hold).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowBudget {
    /// Bitwise equal to the f64 reference rounded.
    Exact,
    /// |ŷ - y| <= c (u|y| + η) per element.
    Relative(f64),
}

impl RowBudget {
    pub fn budget(self) -> Budget {
        match self {
            RowBudget::Exact => Budget::Exact,
            RowBudget::Relative(c) => Budget::Relative(c),
        }
    }
}

/// Whole-tensor kernels of a row where a vectorised or native-precision path exists: the
/// result of `borrowed`, and of `owned` written into an operand's buffer when it is held only
/// here (`Err` gives the operands back). Operands are checked against the domain first.
#[derive(Clone, Copy)]
pub struct TensorKernel {
    pub borrowed: fn(&[&Tensor]) -> Result<Tensor, KernelError>,
    pub owned: fn(&mut Operands) -> Option<Tensor>,
    /// The same operation on blocks of elements, for fused passes (`ir::BlockKernel`).
    pub block: BlockFns,
}

/// A row's kernel on one block of elements per float dtype: the operands' blocks in, every
/// element of the last argument written, with the values `TensorKernel::borrowed` gives.
#[derive(Clone, Copy)]
pub struct BlockFns {
    pub f32: fn(&[&[f32]], &mut [f32]),
    pub f64: fn(&[&[f64]], &mut [f64]),
}

/// A unary row's expansion into other primitives, from the operand and the attributes.
pub type UnaryLowering = fn(&mut Builder, Var, &[f64]) -> Result<Var, TypeError>;

/// A binary row's expansion into other primitives.
pub type BinaryLowering = fn(&mut Builder, Var, Var) -> Result<Var, TypeError>;

/// An elementwise operation of one operand, stated once.
pub struct UnaryRow {
    /// The LensIR `op` name.
    pub name: &'static str,
    /// The formula, for `catml ops` and the docs.
    pub formula: &'static str,
    pub attrs: &'static [AttrSpec],
    /// Rejects attribute values the operation does not admit.
    pub check: fn(&[f64]) -> Result<(), TypeError>,
    /// f(x) in f64.
    pub f: fn(f64, &[f64]) -> f64,
    /// f(x) exactly, for rational operations.
    pub exact: Option<fn(&Rational, &[f64]) -> Rational>,
    pub domain: fn(&[f64]) -> Domain,
    pub derivative: UnaryDerivative,
    pub rule: RuleKind,
    /// Where the rule's convention decides the derivative.
    pub kink: Option<fn(f64, &[f64]) -> bool>,
    /// The expansion into other primitives, if the row has one.
    pub lower: Option<UnaryLowering>,
    /// The f32 error budget (`docs/budgets.md`): `RowBudget::Exact` when the f64 result is
    /// always a value of the operand's dtype.
    pub budget: RowBudget,
    /// The place in the core fragment (`docs/lowering.md`).
    pub fragment: Fragment,
    /// The kernel used instead of `f` on floats, when there is one; it computes `f`.
    pub kernel: Option<TensorKernel>,
    /// The kernel on i64 operands, for a row without attributes that is defined on integers
    /// (`docs/dtypes.md`); a row without one refuses i64 operands.
    pub int: Option<super::int::IntUnary>,
    /// Generators keep operands within this magnitude.
    pub cap: f64,
    /// Relative frequency with which generators draw the row.
    pub weight: u32,
    /// An interval holding f over an operand interval (inside the domain).
    pub range: fn(Interval, &[f64]) -> Interval,
    /// Draws attribute values from uniform numbers in [0, 1).
    pub sample_attrs: fn(&mut dyn FnMut() -> f64) -> Vec<f64>,
}

/// ∂f/∂x and ∂f/∂y of a binary row from x, y and z = f(x, y); `None` is zero.
pub type BinaryPartials = fn(&mut Builder, Var, Var, Var) -> Result<[Option<Var>; 2], TypeError>;

/// A coefficient ±1 of a linear binary row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    Plus,
    Minus,
}

/// The derivative of a binary row.
#[derive(Clone, Copy)]
pub enum BinaryDerivative {
    /// The partials as expressions: ż = ∂x f ẋ + ∂y f ẏ, (x̄, ȳ) = (∂x f z̄, ∂y f z̄).
    Partials(BinaryPartials),
    /// f(x, y) = a x + b y with signs a, b (add, sub): ż = f(ẋ, ẏ) (a lone tangent times its
    /// sign), and the transpose (x̄, ȳ) = (a z̄, b z̄).
    Linear([Sign; 2]),
    /// f symmetric and bilinear (mul): ż = f(ẋ, y) + f(x, ẏ), (x̄, ȳ) = (f(z̄, y), f(z̄, x)).
    Bilinear,
}

/// An elementwise operation of two operands of one type, stated once.
pub struct BinaryRow {
    pub name: &'static str,
    pub formula: &'static str,
    pub f: fn(f64, f64) -> f64,
    pub exact: Option<fn(&Rational, &Rational) -> Rational>,
    pub domains: [Domain; 2],
    pub derivative: BinaryDerivative,
    pub rule: RuleKind,
    pub kink: Option<fn(f64, f64) -> bool>,
    pub lower: Option<BinaryLowering>,
    /// The f32 error budget (`docs/budgets.md`).
    pub budget: RowBudget,
    pub fragment: Fragment,
    /// The kernel used instead of `f` on floats, when there is one; it computes `f`.
    pub kernel: Option<TensorKernel>,
    /// The kernel on i64 operands, when the operation is defined on integers
    /// (`docs/dtypes.md`); a row without one refuses i64 operands.
    pub int: Option<super::int::IntBinary>,
    pub caps: [f64; 2],
    /// Relative frequency with which generators draw the row.
    pub weight: u32,
    pub range: fn(Interval, Interval) -> Interval,
}

/// The primitive of a unary row with its attribute values.
#[derive(Clone)]
pub struct Unary {
    row: &'static UnaryRow,
    attrs: Vec<f64>,
}

impl fmt::Debug for Unary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.row.name, self.attrs)
    }
}

impl Unary {
    /// The row's primitive with these attribute values (in the row's order).
    pub fn new(row: &'static UnaryRow, attrs: Vec<f64>) -> Result<Unary, TypeError> {
        if attrs.len() != row.attrs.len() {
            return Err(TypeError::Invalid(format!(
                "`{}` takes {} attributes, got {}",
                row.name,
                row.attrs.len(),
                attrs.len()
            )));
        }
        (row.check)(&attrs)?;
        Ok(Unary { row, attrs })
    }

    /// The primitive of a row without attributes.
    pub const fn of(row: &'static UnaryRow) -> Unary {
        Unary {
            row,
            attrs: Vec::new(),
        }
    }

    /// The row's primitive from LensIR attributes.
    pub fn from_attrs(row: &'static UnaryRow, attrs: &Attrs) -> Result<Unary, TypeError> {
        Unary::new(row, read_attrs(row.attrs, attrs)?)
    }

    pub fn row(&self) -> &'static UnaryRow {
        self.row
    }

    fn domain(&self) -> Domain {
        (self.row.domain)(&self.attrs)
    }

    fn check<T: Float>(&self, data: &[T]) -> Result<(), KernelError> {
        check_floats(self.row.name, None, self.domain(), data)
    }

    /// The domain check of a float operand tensor.
    fn check_tensor(&self, x: &Tensor) -> Result<(), KernelError> {
        match x {
            Tensor::F32(a) => self.check(a.data()),
            Tensor::F64(a) => self.check(a.data()),
            _ => Ok(()),
        }
    }

    fn map<T: Float>(&self, x: &Array<T>) -> Result<Array<T>, KernelError> {
        self.check(x.data())?;
        let (f, a) = (self.row.f, &self.attrs[..]);
        Ok(kernels::map_copy(x, |d| map_wide(d, f, a))?)
    }

    fn map_owned<T: Float>(&self, mut x: Array<T>) -> Result<Array<T>, KernelError> {
        self.check(x.data())?;
        let (f, a) = (self.row.f, &self.attrs[..]);
        match x.unique_data_mut() {
            Some(d) => {
                kernels::for_each_result_piece(d, |d| map_wide(d, f, a));
                Ok(x)
            }
            None => Ok(kernels::map_copy(&x, |d| map_wide(d, f, a))?),
        }
    }
}

/// The native block function of a row's kernel for one dtype.
type NativeBlock<T> = Option<fn(&[&[T]], &mut [T])>;

/// A row's block kernel on operands checked against the domain (`in_domain`): the native
/// kernel's block function when the row has one, else `computed`, the row's `f` in f64.
fn block_of<T: Float>(
    in_domain: bool,
    native: NativeBlock<T>,
    computed: impl FnOnce(&[&[T]], &mut [T]),
    x: &[&[T]],
    out: &mut [T],
) -> bool {
    match (in_domain, native) {
        (false, _) => return false,
        (true, Some(k)) => k(x, out),
        (true, None) => computed(x, out),
    }
    true
}

impl Unary {
    fn block<T: Float>(&self, x: &[&[T]], out: &mut [T], native: NativeBlock<T>) -> bool {
        let (f, a) = (self.row.f, &self.attrs[..]);
        let computed = |x: &[&[T]], out: &mut [T]| {
            out.copy_from_slice(x[0]);
            map_wide(out, f, a);
        };
        block_of(self.check(x[0]).is_ok(), native, computed, x, out)
    }
}

impl BlockKernel for Unary {
    fn block_f32(&self, x: &[&[f32]], out: &mut [f32]) -> bool {
        self.block(x, out, self.row.kernel.map(|k| k.block.f32))
    }
    fn block_f64(&self, x: &[&[f64]], out: &mut [f64]) -> bool {
        self.block(x, out, self.row.kernel.map(|k| k.block.f64))
    }
    fn conventions_f32(&self, x: &[&[f32]]) -> usize {
        self.row
            .kink
            .map_or(0, |k| count_where(x[0], |v| k(v, &self.attrs)))
    }
    fn conventions_f64(&self, x: &[&[f64]]) -> usize {
        self.row
            .kink
            .map_or(0, |k| count_where(x[0], |v| k(v, &self.attrs)))
    }
}

impl Binary {
    fn block<T: Float>(&self, x: &[&[T]], out: &mut [T], native: NativeBlock<T>) -> bool {
        let f = self.row.f;
        let computed = |x: &[&[T]], out: &mut [T]| {
            for ((o, &a), &b) in out.iter_mut().zip(x[0]).zip(x[1]) {
                *o = T::from_f64(f(wide(a), wide(b)));
            }
        };
        block_of(self.check(x[0], x[1]).is_ok(), native, computed, x, out)
    }

    /// How many element pairs sit at the row's kink.
    fn conventions<T: Float>(&self, x: &[&[T]]) -> usize {
        let Some(k) = self.row.kink else {
            return 0;
        };
        let pairs = x[0].iter().zip(x[1]);
        pairs.filter(|(a, b)| k(wide(**a), wide(**b))).count()
    }
}

impl BlockKernel for Binary {
    fn block_f32(&self, x: &[&[f32]], out: &mut [f32]) -> bool {
        self.block(x, out, self.row.kernel.map(|k| k.block.f32))
    }
    fn block_f64(&self, x: &[&[f64]], out: &mut [f64]) -> bool {
        self.block(x, out, self.row.kernel.map(|k| k.block.f64))
    }
    fn conventions_f32(&self, x: &[&[f32]]) -> usize {
        self.conventions(x)
    }
    fn conventions_f64(&self, x: &[&[f64]]) -> usize {
        self.conventions(x)
    }
}

/// `f(v, attrs)` in place on each element, computed in f64.
fn map_wide<T: Float>(d: &mut [T], f: fn(f64, &[f64]) -> f64, attrs: &[f64]) {
    for v in d {
        *v = T::from_f64(f(v.to_f64(), attrs));
    }
}

/// An element widened to f64.
fn wide<T: Float>(v: T) -> f64 {
    Float::to_f64(v)
}

/// The domain error at element `i` of an operand (`operand`: its index, for binary rows):
/// `log of 0 at element 1, expected a positive value`.
pub(super) fn domain_error(
    name: &str,
    operand: Option<usize>,
    value: impl fmt::Display,
    i: usize,
    d: Domain,
) -> KernelError {
    let what = match operand {
        None => format!("{name} of {value}"),
        Some(k) => format!("{name} with operand {k} = {value}"),
    };
    KernelError::Domain(format!("{what} at element {i}, expected {}", d.describe()))
}

/// The first float element outside `d`, as a domain error.
fn check_floats<T: Float>(
    name: &str,
    operand: Option<usize>,
    d: Domain,
    data: &[T],
) -> Result<(), KernelError> {
    if all_within(d, data) {
        return Ok(());
    }
    match data.iter().position(|v| !d.contains(wide(*v))) {
        Some(i) => Err(domain_error(name, operand, data[i].to_f64(), i, d)),
        None => Ok(()),
    }
}

/// Whether every element of `data` lies in `d` (`Domain::contains`, NaN included): one test per
/// domain, branch-free over chunks so that it vectorises and still stops soon after a failure.
pub(super) fn all_within<T: Float>(d: Domain, data: &[T]) -> bool {
    fn all<T: Float>(data: &[T], inside: impl Fn(T) -> bool) -> bool {
        data.chunks(64)
            .all(|c| c.iter().fold(true, |ok, &v| ok & inside(v)))
    }
    // Comparisons of an f32 with 0 agree with those of its exact f64 value.
    match d {
        Domain::All => true,
        Domain::Positive => all(data, |v| v > T::zero()),
        Domain::NonNegative => all(data, |v| v >= T::zero()),
        Domain::Above(a) => all(data, |v| wide(v) > a),
        Domain::NonZero => all(data, |v| v != T::zero()),
    }
}

/// The first rational element outside `d`, as a domain error.
fn check_rationals(
    name: &str,
    operand: Option<usize>,
    d: Domain,
    data: &[Rational],
) -> Result<(), KernelError> {
    match data.iter().position(|v| !d.contains_rational(v)) {
        Some(i) => Err(domain_error(name, operand, &data[i], i, d)),
        None => Ok(()),
    }
}

/// Reads a row's attributes, by spec, from LensIR JSON.
fn read_attrs(specs: &[AttrSpec], attrs: &Attrs) -> Result<Vec<f64>, TypeError> {
    let mut r = AttrReader::new(attrs);
    let mut out = Vec::with_capacity(specs.len());
    for s in specs {
        let v = match (r.get(s.name), s.default) {
            (None, Some(d)) => d,
            (None, None) => {
                return Err(TypeError::attr(
                    s.name,
                    format!("missing, expected {}", s.kind.as_str()),
                ))
            }
            (Some(v), _) => attr_value(s, v)?,
        };
        out.push(v);
    }
    r.finish()?;
    Ok(out)
}

fn attr_value(s: &AttrSpec, v: &Value) -> Result<f64, TypeError> {
    let bad = |what: &str| TypeError::attr(s.name, format!("expected {what}, found {v}"));
    match s.kind {
        AttrKind::Float => v
            .as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| bad("a finite number")),
        AttrKind::Integer => v
            .as_i64()
            .filter(|n| n.unsigned_abs() <= 1 << 20)
            .map(|n| n as f64)
            .ok_or_else(|| bad("an integer of magnitude at most 2^20")),
        AttrKind::Bool => v
            .as_bool()
            .map(|b| f64::from(u8::from(b)))
            .ok_or_else(|| bad("true or false")),
    }
}

fn attrs_json(specs: &[AttrSpec], values: &[f64]) -> Attrs {
    specs
        .iter()
        .zip(values)
        .map(|(s, &v)| {
            let j = match s.kind {
                AttrKind::Float => serde_json::json!(v),
                AttrKind::Integer => serde_json::json!(v as i64),
                AttrKind::Bool => serde_json::json!(v != 0.0),
            };
            (s.name.to_string(), j)
        })
        .collect()
}

/// An attribute value as an exact rational (attributes are finite).
pub fn rational(a: f64) -> Rational {
    Rational::from_f64(a).unwrap_or_else(Rational::zero)
}

fn count_where<T: Float>(data: &[T], p: impl Fn(f64) -> bool) -> usize {
    data.iter().filter(|v| p(wide(**v))).count()
}

/// u ↦ f'(x) ⊙ u of a unary row.
fn apply_unary_derivative(
    row: &UnaryRow,
    b: &mut Builder,
    x: Var,
    y: Var,
    u: Var,
    attrs: &[f64],
) -> Result<Option<Var>, TypeError> {
    match row.derivative {
        UnaryDerivative::Factor(d) => d(b, x, y, attrs)?.map(|g| b.mul(u, g)).transpose(),
        UnaryDerivative::Apply(f) => f(b, x, y, u, attrs).map(Some),
    }
}

/// `u` times a sign.
fn signed(b: &mut Builder, s: Sign, u: Var) -> Result<Var, TypeError> {
    match s {
        Sign::Plus => Ok(u),
        Sign::Minus => b.neg(u),
    }
}

impl Primitive for Unary {
    fn name(&self) -> &str {
        self.row.name
    }
    fn attrs(&self) -> Attrs {
        attrs_json(self.row.attrs, &self.attrs)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        super::int::infer_unary(self.row.int.is_some(), inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        if let [Tensor::I64(a)] = x {
            let f = self
                .row
                .int
                .ok_or_else(|| super::int::refused(self.row.name))?;
            return Ok(Tensor::I64(super::int::map(f, a)));
        }
        if let (Some(k), [t]) = (self.row.kernel, x) {
            self.check_tensor(t)?;
            return (k.borrowed)(x);
        }
        match x {
            [Tensor::F32(a)] => Ok(Tensor::F32(self.map(a)?)),
            [Tensor::F64(a)] => Ok(Tensor::F64(self.map(a)?)),
            _ => Err(KernelError::Unsupported(format!(
                "`{}` takes one float operand",
                self.row.name
            ))),
        }
    }
    fn eval_owned(&self, x: &mut Operands) -> Result<Tensor, KernelError> {
        if let [Tensor::I64(_)] = &x[..] {
            return self.eval(&operand_refs(x));
        }
        if let (Some(k), [t]) = (self.row.kernel, &x[..]) {
            self.check_tensor(t)?;
            return match (k.owned)(x) {
                Some(t) => Ok(t),
                None => (k.borrowed)(&operand_refs(x)),
            };
        }
        match (x.pop(), x.is_empty()) {
            (Some(Tensor::F32(a)), true) => Ok(Tensor::F32(self.map_owned(a)?)),
            (Some(Tensor::F64(a)), true) => Ok(Tensor::F64(self.map_owned(a)?)),
            (last, _) => {
                x.extend(last);
                self.eval(&operand_refs(x))
            }
        }
    }
    /// Every float row maps in its operand's buffer when it holds the only reference.
    fn writes_in_operand(&self, inputs: &[TensorType], output: &TensorType) -> bool {
        output.dtype.is_float() && inputs == std::slice::from_ref(output)
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let f = self.row.exact?;
        Some(
            check_rationals(self.row.name, None, self.domain(), x[0].data())
                .map(|()| x[0].map(|v| f(v, &self.attrs))),
        )
    }
    fn elementwise(&self) -> Option<&dyn BlockKernel> {
        Some(self)
    }
    /// The float passes count the result as they write it (`kernels::for_each_result_piece`,
    /// `zip_copy`, `map_copy`); other paths leave it to evaluation's scan.
    fn counts_non_finite(&self, output: &TensorType) -> bool {
        output.numel() >= kernels::COUNTED_MIN
    }
    fn has_rational_eval(&self) -> bool {
        self.row.exact.is_some()
    }
    fn rule(&self) -> RuleKind {
        self.row.rule
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        self.row.budget.budget()
    }
    fn fragment(&self) -> Fragment {
        self.row.fragment
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        let (Some(k), a) = (self.row.kink, &self.attrs[..]) else {
            return 0;
        };
        match x[0] {
            Tensor::F32(t) => count_where(t.data(), |v| k(v, a)),
            Tensor::F64(t) => count_where(t.data(), |v| k(v, a)),
            _ => 0,
        }
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        let Some(d) = dx[0].filter(|_| b.ty(y).dtype.is_float()) else {
            return Ok(None);
        };
        Ok(apply_unary_derivative(
            self.row,
            b,
            x[0],
            y,
            d,
            &self.attrs,
        )?)
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        y: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        if !b.ty(y).dtype.is_float() {
            return Ok(vec![None]);
        }
        Ok(vec![apply_unary_derivative(
            self.row,
            b,
            x[0],
            y,
            u,
            &self.attrs,
        )?])
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        // The expansions are float expressions (scale, reciprocal): integer nodes stay.
        if !b.ty(x[0]).dtype.is_float() {
            return None;
        }
        self.row.lower.map(|l| l(b, x[0], &self.attrs))
    }
    fn drawing(&self) -> Option<Drawing> {
        let row = self.row;
        Some(Drawing::new(row.weight, move |d| {
            super::row_draw::draw_unary(d, row)
        }))
    }
    /// Batching: elementwise, so the batch is one more axis of the same operation.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::elementwise(b, x, at)
    }
}

/// The primitive of a binary row.
#[derive(Clone, Copy)]
pub struct Binary {
    row: &'static BinaryRow,
}

impl fmt::Debug for Binary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.row.name)
    }
}

impl Binary {
    pub const fn new(row: &'static BinaryRow) -> Binary {
        Binary { row }
    }

    pub fn row(&self) -> &'static BinaryRow {
        self.row
    }

    fn check<T: Float>(&self, x: &[T], y: &[T]) -> Result<(), KernelError> {
        for (k, data) in [x, y].into_iter().enumerate() {
            check_floats(self.row.name, Some(k), self.row.domains[k], data)?;
        }
        Ok(())
    }

    /// The domain checks of float operand tensors.
    fn check_tensors(&self, x: &[&Tensor]) -> Result<(), KernelError> {
        match x {
            [Tensor::F32(a), Tensor::F32(b)] => self.check(a.data(), b.data()),
            [Tensor::F64(a), Tensor::F64(b)] => self.check(a.data(), b.data()),
            _ => Ok(()),
        }
    }

    fn zip<T: Float>(&self, x: &Array<T>, y: &Array<T>) -> Result<Array<T>, KernelError> {
        self.check(x.data(), y.data())?;
        let f = self.row.f;
        Ok(kernels::zip_copy(x, y, |a, b| {
            T::from_f64(f(wide(a), wide(b)))
        })?)
    }
}

impl Primitive for Binary {
    fn name(&self) -> &str {
        self.row.name
    }
    fn sums_operands(&self) -> bool {
        matches!(
            self.row.derivative,
            BinaryDerivative::Linear([Sign::Plus, Sign::Plus])
        )
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, TypeError> {
        super::int::infer_binary(self.row.int.is_some(), inputs)
    }
    fn eval(&self, x: &[&Tensor]) -> Result<Tensor, KernelError> {
        if super::int::any_i64(x.iter().copied()) {
            let f = self
                .row
                .int
                .ok_or_else(|| super::int::refused(self.row.name))?;
            return match x {
                [Tensor::I64(a), Tensor::I64(b)] => Ok(Tensor::I64(super::int::zip(
                    self.row.name,
                    self.row.domains,
                    f,
                    a,
                    b,
                )?)),
                _ => Err(KernelError::Unsupported(format!(
                    "`{}` takes two operands of one dtype",
                    self.row.name
                ))),
            };
        }
        if let Some(k) = self.row.kernel {
            self.check_tensors(x)?;
            return (k.borrowed)(x);
        }
        match x {
            [Tensor::F32(a), Tensor::F32(b)] => Ok(Tensor::F32(self.zip(a, b)?)),
            [Tensor::F64(a), Tensor::F64(b)] => Ok(Tensor::F64(self.zip(a, b)?)),
            _ => Err(KernelError::Unsupported(format!(
                "`{}` takes two float operands of one dtype",
                self.row.name
            ))),
        }
    }
    fn eval_owned(&self, x: &mut Operands) -> Result<Tensor, KernelError> {
        let Some(k) = self.row.kernel.filter(|_| !super::int::any_i64(x.iter())) else {
            return self.eval(&operand_refs(x));
        };
        self.check_tensors(&operand_refs(x))?;
        match (k.owned)(x) {
            Some(t) => Ok(t),
            None => (k.borrowed)(&operand_refs(x)),
        }
    }
    /// A row with a native kernel zips into either operand's buffer (`dispatch::zip_in_place`).
    fn writes_in_operand(&self, inputs: &[TensorType], output: &TensorType) -> bool {
        self.row.kernel.is_some() && output.dtype.is_float() && inputs.contains(output)
    }
    fn eval_rational(&self, x: &[&RArray]) -> Option<Result<RArray, KernelError>> {
        let f = self.row.exact?;
        for (k, a) in x.iter().enumerate() {
            if let Err(e) = check_rationals(self.row.name, Some(k), self.row.domains[k], a.data()) {
                return Some(Err(e));
            }
        }
        let data = x[0].data().iter().zip(x[1].data()).map(|(a, b)| f(a, b));
        Some(Ok(
            Array::new(x[0].shape().clone(), data.collect()).expect("same length")
        ))
    }
    fn elementwise(&self) -> Option<&dyn BlockKernel> {
        Some(self)
    }
    /// The float passes count the result as they write it (`kernels::for_each_result_piece`,
    /// `zip_copy`, `map_copy`); other paths leave it to evaluation's scan.
    fn counts_non_finite(&self, output: &TensorType) -> bool {
        output.numel() >= kernels::COUNTED_MIN
    }
    fn has_rational_eval(&self) -> bool {
        self.row.exact.is_some()
    }
    fn rule(&self) -> RuleKind {
        self.row.rule
    }
    fn f32_budget(&self, _inputs: &[TensorType], _output: &TensorType) -> Budget {
        self.row.budget.budget()
    }
    fn fragment(&self) -> Fragment {
        self.row.fragment
    }
    fn convention_points(&self, x: &[&Tensor]) -> usize {
        match x {
            [Tensor::F32(a), Tensor::F32(b)] => self.conventions(&[a.data(), b.data()]),
            [Tensor::F64(a), Tensor::F64(b)] => self.conventions(&[a.data(), b.data()]),
            _ => 0,
        }
    }
    fn jvp(
        &self,
        b: &mut Builder,
        x: &[Var],
        z: Var,
        dx: &[Option<Var>],
    ) -> Result<Option<Var>, RuleError> {
        if dx.iter().all(Option::is_none) || !b.ty(z).dtype.is_float() {
            return Ok(None);
        }
        match self.row.derivative {
            BinaryDerivative::Partials(partials) => {
                let partials = partials(b, x[0], x[1], z)?;
                let mut terms = Vec::new();
                for (d, p) in dx.iter().zip(partials) {
                    if let (Some(d), Some(p)) = (d, p) {
                        terms.push(Some(b.mul(*d, p)?));
                    }
                }
                crate::prim::sum_terms(b, &terms)
            }
            BinaryDerivative::Linear(signs) => Ok(Some(match (dx[0], dx[1]) {
                (Some(p), Some(q)) => apply_binary(b, self.row, p, q)?,
                (Some(p), None) => signed(b, signs[0], p)?,
                (None, Some(q)) => signed(b, signs[1], q)?,
                (None, None) => unreachable!("a tangent is present"),
            })),
            BinaryDerivative::Bilinear => {
                let left = dx[0]
                    .map(|d| apply_binary(b, self.row, d, x[1]))
                    .transpose()?;
                let right = dx[1]
                    .map(|d| apply_binary(b, self.row, x[0], d))
                    .transpose()?;
                crate::prim::sum_terms(b, &[left, right])
            }
        }
    }
    fn vjp(
        &self,
        b: &mut Builder,
        x: &[Var],
        z: Var,
        u: Var,
    ) -> Result<Vec<Option<Var>>, RuleError> {
        if !b.ty(z).dtype.is_float() {
            return Ok(vec![None, None]);
        }
        match self.row.derivative {
            BinaryDerivative::Partials(partials) => partials(b, x[0], x[1], z)?
                .into_iter()
                .map(|p| Ok(p.map(|p| b.mul(u, p)).transpose()?))
                .collect(),
            BinaryDerivative::Linear(signs) => Ok(vec![
                Some(signed(b, signs[0], u)?),
                Some(signed(b, signs[1], u)?),
            ]),
            BinaryDerivative::Bilinear => Ok(vec![
                Some(apply_binary(b, self.row, u, x[1])?),
                Some(apply_binary(b, self.row, u, x[0])?),
            ]),
        }
    }
    fn lower(&self, b: &mut Builder, x: &[Var]) -> Option<Result<Var, TypeError>> {
        // The expansions are float expressions (scale, reciprocal): integer nodes stay.
        if !b.ty(x[0]).dtype.is_float() {
            return None;
        }
        self.row.lower.map(|l| l(b, x[0], x[1]))
    }
    fn drawing(&self) -> Option<Drawing> {
        let row = self.row;
        Some(Drawing::new(row.weight, move |d| {
            super::row_draw::draw_binary(d, row)
        }))
    }
    /// Batching: elementwise, so the batch is one more axis of the same operation.
    fn batch(
        &self,
        b: &mut crate::ir::Builder,
        x: &[crate::ir::Var],
        at: &crate::ir::BatchCtx,
    ) -> Result<crate::ir::Var, crate::ir::RuleError> {
        crate::prim::batching::elementwise(b, x, at)
    }
}

/// The primitive of `row` with default attributes, for derivative expressions.
pub fn apply_unary(
    b: &mut Builder,
    row: &'static UnaryRow,
    attrs: &[f64],
    x: Var,
) -> Result<Var, TypeError> {
    let p: Prim = Arc::new(Unary::new(row, attrs.to_vec())?);
    b.op(p, &[x])
}

/// The primitive of a binary row applied to `x` and `y`.
pub fn apply_binary(
    b: &mut Builder,
    row: &'static BinaryRow,
    x: Var,
    y: Var,
) -> Result<Var, TypeError> {
    b.op(Arc::new(Binary::new(row)), &[x, y])
}

/// Registers every row under its name.
pub(crate) fn register_rows(
    r: &mut Registry,
    unary: &'static [&'static UnaryRow],
    binary: &'static [&'static BinaryRow],
) {
    for &row in unary {
        r.register(row.name, move |a: &Attrs| {
            Ok(Arc::new(Unary::from_attrs(row, a)?) as Prim)
        });
        let mut half = || 0.5;
        let example = (row.sample_attrs)(&mut half);
        r.set_example(row.name, attrs_json(row.attrs, &example));
    }
    for &row in binary {
        r.register(row.name, move |a: &Attrs| {
            AttrReader::new(a).finish()?;
            Ok(Arc::new(Binary::new(row)) as Prim)
        });
    }
}
