//! `+ - * /` and unary `-` on values, by value and by reference, and with `f64` scalars on
//! either side. Shapes must agree (broadcasting is explicit); a scalar becomes a constant of the
//! other operand's type. `x / y` is `x * reciprocal(y)`.

use std::ops::{Add, Div, Mul, Neg, Sub};
use std::panic::Location;
use std::sync::Arc;

use super::error::CallSite;
use super::value::{apply_at, Value};
use crate::ir::Prim;
use crate::prim::{Add as AddPrim, Mul as MulPrim, Neg as NegPrim, Reciprocal, Sub as SubPrim};

/// The binary operations, each as primitives applied at the caller's site.
#[derive(Clone, Copy)]
enum Binary {
    Add,
    Sub,
    Mul,
    Div,
}

impl Binary {
    fn apply(self, location: CallSite, x: &Value, y: &Value) -> Value {
        let prim: Prim = match self {
            Binary::Add => Arc::new(AddPrim),
            Binary::Sub => Arc::new(SubPrim),
            Binary::Mul => Arc::new(MulPrim),
            Binary::Div => {
                let r = y.unary_at(location, Arc::new(Reciprocal));
                return apply_at(location, Arc::new(MulPrim), &[x, &r]);
            }
        };
        apply_at(location, prim, &[x, y])
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl $trait<&Value> for &Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, y: &Value) -> Value {
                $op.apply(Location::caller(), self, y)
            }
        }
        impl $trait<Value> for &Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, y: Value) -> Value {
                $op.apply(Location::caller(), self, &y)
            }
        }
        impl $trait<&Value> for Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, y: &Value) -> Value {
                $op.apply(Location::caller(), &self, y)
            }
        }
        impl $trait<Value> for Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, y: Value) -> Value {
                $op.apply(Location::caller(), &self, &y)
            }
        }
        impl $trait<f64> for &Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, c: f64) -> Value {
                let location = Location::caller();
                $op.apply(location, self, &self.full_like_at(location, c))
            }
        }
        impl $trait<f64> for Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, c: f64) -> Value {
                let location = Location::caller();
                $op.apply(location, &self, &self.full_like_at(location, c))
            }
        }
        impl $trait<&Value> for f64 {
            type Output = Value;
            #[track_caller]
            fn $method(self, y: &Value) -> Value {
                let location = Location::caller();
                $op.apply(location, &y.full_like_at(location, self), y)
            }
        }
        impl $trait<Value> for f64 {
            type Output = Value;
            #[track_caller]
            fn $method(self, y: Value) -> Value {
                let location = Location::caller();
                $op.apply(location, &y.full_like_at(location, self), &y)
            }
        }
    };
}

binary_operator!(Add, add, Binary::Add);
binary_operator!(Sub, sub, Binary::Sub);
binary_operator!(Mul, mul, Binary::Mul);
binary_operator!(Div, div, Binary::Div);

impl Neg for &Value {
    type Output = Value;
    #[track_caller]
    fn neg(self) -> Value {
        self.unary_at(Location::caller(), Arc::new(NegPrim))
    }
}

impl Neg for Value {
    type Output = Value;
    #[track_caller]
    fn neg(self) -> Value {
        self.unary_at(Location::caller(), Arc::new(NegPrim))
    }
}
