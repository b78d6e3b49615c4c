//! Model functions of separate arguments: [`args`] turns `|x: &Value, y: &Value| ...` into
//! the slice form every transform takes, and a call with another number of inputs becomes an
//! error instead of an index out of bounds in the model.

use super::error::TraceError;
use super::value::Value;

/// A function of a fixed number of `&Value` arguments. `M` is the function's signature
/// (`fn(&Value, &Value) -> O`), which tells the implementations apart; it is inferred.
pub trait ArgsFn<M> {
    /// What the function returns.
    type Output;
    /// How many arguments it takes.
    const ARITY: usize;
    /// Calls it on `values`, which has exactly [`ARITY`](Self::ARITY) entries.
    fn call_with(&mut self, values: &[Value]) -> Self::Output;
}

macro_rules! args_fn {
    ($n:expr; $($i:tt)+) => {
        impl<F, O> ArgsFn<fn($(args_fn!(@ty $i)),+) -> O> for F
        where
            F: FnMut($(args_fn!(@ty $i)),+) -> O,
        {
            type Output = O;
            const ARITY: usize = $n;
            fn call_with(&mut self, values: &[Value]) -> O {
                self($(&values[$i]),+)
            }
        }
    };
    (@ty $i:tt) => { &Value };
}

args_fn!(1; 0);
args_fn!(2; 0 1);
args_fn!(3; 0 1 2);
args_fn!(4; 0 1 2 3);
args_fn!(5; 0 1 2 3 4);
args_fn!(6; 0 1 2 3 4 5);

/// A model function of separate arguments (one to six `&Value`s, annotated), as the slice
/// function that [`trace`](super::trace) and the transforms take. Called with another number
/// of inputs, it returns [`TraceError::Count`] naming both numbers.
///
/// ```
/// use catml_core::tensor::{Params, Tensor};
/// use catml_core::trace::{args, value_and_grad, TraceError, Value};
///
/// let mut f = value_and_grad(args(|x: &Value, y: &Value| ((x - y) * (x - y)).sum_all()))
///     .argnums(&[0]); // labels y are not differentiated
/// let x = Tensor::f64([2], vec![1.0, 2.0]).unwrap();
/// let y = Tensor::f64([2], vec![0.0, 4.0]).unwrap();
/// let r = f.call(&Params::new(), &[x.clone(), y]).unwrap();
/// assert_eq!(r.grads.inputs[0].as_ref().unwrap().to_f64_vec(), vec![2.0, -4.0]);
/// assert!(r.grads.inputs[1].is_none());
/// // Too few inputs: an error, not a panic.
/// assert!(matches!(f.call(&Params::new(), &[x]), Err(TraceError::Count { expected: 2, found: 1, .. })));
/// ```
pub fn args<M, F: ArgsFn<M>>(mut f: F) -> impl FnMut(&[Value]) -> Result<F::Output, TraceError> {
    move |values: &[Value]| {
        if values.len() != F::ARITY {
            return Err(TraceError::Count {
                what: "model input",
                expected: F::ARITY,
                found: values.len(),
            });
        }
        Ok(f.call_with(values))
    }
}
