//! [`Value`]: a tensor outside a trace, a variable of the current trace inside one, or the
//! error that an earlier operation raised. Every primitive call goes through [`Value::apply`].

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

use super::context::{with_current, Recording, TraceId};
use super::error::{CallSite, OperandTypes, TraceError};
use crate::ir::{InputKind, KernelError, Prim, Var};
use crate::prim::Constant;
use crate::tensor::{Tensor, TensorType};

/// A value of a model function, written once and run two ways.
///
/// Outside a trace a `Value` holds a [`Tensor`], and each operation evaluates at once with the
/// interpreter's checks (types, the kernel's admissible domain, non-finite results). Inside a
/// [`trace`](super::trace) it is a typed variable of the program being recorded, and each
/// operation records one node.
///
/// Operations never panic on bad input. A failing operation returns a failed value holding a
/// [`TraceError`] that names the call site; operations on a failed value pass the error on, the
/// way NaN passes through arithmetic. Inside a trace the first error is also recorded, and
/// [`trace`](super::trace) returns it. Outside a trace, [`Value::tensor`] and
/// [`Value::checked`] surface it. Clones are cheap: tensors share their buffers.
#[derive(Clone)]
#[must_use]
pub struct Value {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Eager(Tensor),
    Symbol {
        trace: TraceId,
        var: Var,
        ty: TensorType,
    },
    Failed(Arc<TraceError>),
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Eager(t) => write!(f, "Value({t:?})"),
            Repr::Symbol { var, ty, .. } => write!(f, "Value({var}: {ty}, traced)"),
            Repr::Failed(e) => write!(f, "Value(failed: {e})"),
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value {
            repr: Repr::Eager(t),
        }
    }
}

/// A fallible computation as a value: `Err` becomes a failed value. Layer functions are
/// written with `?` inside and end with `.into()`.
impl From<Result<Value, TraceError>> for Value {
    fn from(r: Result<Value, TraceError>) -> Value {
        r.unwrap_or_else(Value::failed)
    }
}

impl Value {
    /// A failed value; inside a trace the error is also recorded (if it is the first).
    pub fn failed(e: TraceError) -> Value {
        with_current(|r| {
            if let Some(r) = r {
                r.record_error(&e);
            }
        });
        Value {
            repr: Repr::Failed(Arc::new(e)),
        }
    }

    pub(crate) fn symbol(trace: TraceId, var: Var, ty: TensorType) -> Value {
        Value {
            repr: Repr::Symbol { trace, var, ty },
        }
    }

    /// The type, or the error this value carries.
    pub fn ty(&self) -> Result<TensorType, TraceError> {
        match &self.repr {
            Repr::Eager(t) => Ok(t.ty()),
            Repr::Symbol { ty, .. } => Ok(ty.clone()),
            Repr::Failed(e) => Err((**e).clone()),
        }
    }

    /// The tensor of an eager value; the carried error of a failed one.
    #[track_caller]
    pub fn tensor(&self) -> Result<&Tensor, TraceError> {
        match &self.repr {
            Repr::Eager(t) => Ok(t),
            Repr::Symbol { .. } => Err(TraceError::Symbolic {
                location: Location::caller(),
            }),
            Repr::Failed(e) => Err((**e).clone()),
        }
    }

    /// As [`tensor`](Self::tensor), by value.
    #[track_caller]
    pub fn into_tensor(self) -> Result<Tensor, TraceError> {
        let location = Location::caller();
        match self.repr {
            Repr::Eager(t) => Ok(t),
            Repr::Symbol { .. } => Err(TraceError::Symbolic { location }),
            Repr::Failed(e) => Err((*e).clone()),
        }
    }

    /// `Err` with the carried error, else the value: `let h = x.matmul(&w).checked()?;`.
    pub fn checked(self) -> Result<Value, TraceError> {
        match self.repr {
            Repr::Failed(e) => Err((*e).clone()),
            _ => Ok(self),
        }
    }

    /// The carried error, if this value failed.
    pub fn error(&self) -> Option<&TraceError> {
        match &self.repr {
            Repr::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Whether this is a variable of a trace (rather than a tensor or an error).
    pub fn is_traced(&self) -> bool {
        matches!(self.repr, Repr::Symbol { .. })
    }

    /// Applies a primitive: records a node inside a trace, evaluates it outside. Custom
    /// primitives ([`CustomPrimitive`](crate::prim::CustomPrimitive)) go through here too.
    #[track_caller]
    pub fn apply(prim: Prim, operands: &[&Value]) -> Value {
        apply_at(Location::caller(), prim, operands)
    }

    /// A fixed tensor: a `constant` node inside a trace, the tensor itself outside.
    #[track_caller]
    pub fn constant(t: Tensor) -> Value {
        apply_at(Location::caller(), Arc::new(Constant::new(t)), &[])
    }

    /// A trainable parameter named `name`, starting at `initial`. Inside a trace it is a
    /// parameter input of the program and `initial` goes into the trace's parameter store;
    /// outside, it is just `initial`. Layer functions create theirs through here (see `nn`).
    #[track_caller]
    pub fn param(name: &str, initial: Tensor) -> Value {
        let location = Location::caller();
        let declared = with_current(|r| {
            let r = r?;
            let ty = initial.ty();
            let result = match r.builder.input(name, ty.clone(), InputKind::Param) {
                Ok(var) => {
                    r.params.insert(name, initial.clone());
                    Ok(Value::symbol(r.id, var, ty))
                }
                Err(crate::ir::BuildError::Duplicate(name))
                    if r.builder
                        .lookup(&name)
                        .is_some_and(|v| r.builder.is_param(v)) =>
                {
                    Err(TraceError::DuplicateParam { location, name })
                }
                Err(source) => Err(TraceError::Build { location, source }),
            };
            Some(result)
        });
        match declared {
            None => Value::from(initial),
            Some(result) => result.into(),
        }
    }
}

/// [`Value::apply`] with the call site already taken (so helpers can forward theirs).
pub(crate) fn apply_at(location: CallSite, prim: Prim, operands: &[&Value]) -> Value {
    if let Some(e) = operands.iter().find_map(|v| v.error()) {
        return Value::failed(e.clone());
    }
    // Eager kernels run outside the trace stack's borrow: a custom kernel may itself be
    // written with values.
    let recorded = with_current(|r| r.map(|r| record(r, location, &prim, operands)));
    match recorded {
        Some(result) => result.into(),
        None => eager(location, &prim, operands).into(),
    }
}

pub(crate) fn operand_types(operands: &[&Value]) -> OperandTypes {
    OperandTypes(operands.iter().filter_map(|v| v.ty().ok()).collect())
}

/// Records `prim(operands)` in the innermost trace. Tensors become `constant` nodes.
fn record(
    r: &mut Recording,
    location: CallSite,
    prim: &Prim,
    operands: &[&Value],
) -> Result<Value, TraceError> {
    let result = (|| {
        let mut vars = Vec::with_capacity(operands.len());
        for (index, v) in operands.iter().enumerate() {
            vars.push(match &v.repr {
                Repr::Symbol { trace, var, .. } if *trace == r.id => *var,
                Repr::Symbol { .. } => {
                    return Err(TraceError::ForeignValue {
                        location,
                        op: prim.name().to_string(),
                        index,
                    })
                }
                Repr::Eager(t) => {
                    let name = r.next_name();
                    r.builder
                        .apply_hinted(&name, Arc::new(Constant::new(t.clone())), &[])
                        .expect("a constant has no operands to mistype")
                }
                Repr::Failed(e) => return Err((**e).clone()),
            });
        }
        let name = r.next_name();
        let var = r
            .builder
            .apply_hinted(&name, prim.clone(), &vars)
            .map_err(|source| TraceError::Type {
                location,
                op: prim.name().to_string(),
                operands: operand_types(operands),
                source,
            })?;
        Ok(Value::symbol(r.id, var, r.builder.ty(var).clone()))
    })();
    if let Err(e) = &result {
        r.record_error(e);
    }
    result
}

/// Evaluates `prim(operands)` now, with the checks the interpreter makes on every node.
fn eager(location: CallSite, prim: &Prim, operands: &[&Value]) -> Result<Value, TraceError> {
    let mut tensors = Vec::with_capacity(operands.len());
    for (index, v) in operands.iter().enumerate() {
        match &v.repr {
            Repr::Eager(t) => tensors.push(t),
            Repr::Symbol { .. } => {
                return Err(TraceError::ForeignValue {
                    location,
                    op: prim.name().to_string(),
                    index,
                })
            }
            Repr::Failed(e) => return Err((**e).clone()),
        }
    }
    let types = tensors.iter().map(|t| t.ty()).collect::<Vec<_>>();
    let op = || prim.name().to_string();
    let ty = crate::ir::infer_type(prim.as_ref(), &types).map_err(|source| TraceError::Type {
        location,
        op: op(),
        operands: OperandTypes(types.clone()),
        source,
    })?;
    let kernel = |source| TraceError::Kernel {
        location,
        op: op(),
        operands: OperandTypes(types.clone()),
        source,
    };
    let out = prim.eval(&tensors).map_err(kernel)?;
    if out.ty() != ty {
        return Err(kernel(KernelError::Unsupported(format!(
            "kernel returned {}, its type rule says {ty}",
            out.ty()
        ))));
    }
    let count = out.count_non_finite();
    if count > 0 {
        let first = out
            .to_f64_vec()
            .iter()
            .position(|v| !v.is_finite())
            .unwrap_or(0);
        return Err(TraceError::NonFinite {
            location,
            op: op(),
            operands: OperandTypes(types),
            count,
            first,
        });
    }
    Ok(Value::from(out))
}

/// The variable of `v` in recording `r`, lifting tensors to constants (for outputs).
pub(crate) fn lift(
    r: &mut Recording,
    location: CallSite,
    index: usize,
    v: &Value,
) -> Result<Var, TraceError> {
    match &v.repr {
        Repr::Symbol { trace, var, .. } if *trace == r.id => Ok(*var),
        Repr::Symbol { .. } => Err(TraceError::ForeignValue {
            location,
            op: "output".to_string(),
            index,
        }),
        Repr::Eager(t) => {
            let name = r.next_name();
            Ok(r.builder
                .apply_hinted(&name, Arc::new(Constant::new(t.clone())), &[])
                .expect("a constant has no operands to mistype"))
        }
        Repr::Failed(e) => Err((**e).clone()),
    }
}
