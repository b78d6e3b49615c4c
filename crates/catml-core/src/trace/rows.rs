//! One `Value` method per elementwise row (`prim::UNARY_ROWS`, `prim::BINARY_ROWS`).

use crate::prim::names;
use std::panic::Location;
use std::sync::Arc;

use super::error::{CallSite, TraceError};
use super::value::{apply_at, operand_types, Value};
use crate::ir::{Prim, TypeError};
use crate::prim::{binary_row, unary_row, Binary, Unary};

impl Value {
    /// The unary row `name` with attribute values in the row's order; an unknown row or
    /// attributes the row refuses are an error naming the call site.
    #[track_caller]
    pub fn unary_row(&self, name: &str, attrs: &[f64]) -> Value {
        self.row_at(Location::caller(), name, attrs)
    }

    /// The binary row `name` applied to `self` and `y` (equal types; broadcast explicitly).
    #[track_caller]
    pub fn binary_row(&self, name: &str, y: &Value) -> Value {
        let location = Location::caller();
        match binary_row(name) {
            Some(row) => apply_at(location, Arc::new(Binary::new(row)), &[self, y]),
            None => self.refused(location, name, &[self, y], no_row(name)),
        }
    }

    fn row_at(&self, location: CallSite, name: &str, attrs: &[f64]) -> Value {
        let prim = unary_row(name)
            .ok_or_else(|| no_row(name))
            .and_then(|row| Unary::new(row, attrs.to_vec()));
        match prim {
            Ok(p) => apply_at(location, Arc::new(p) as Prim, &[self]),
            Err(e) => self.refused(location, name, &[self], e),
        }
    }

    fn refused(&self, location: CallSite, op: &str, operands: &[&Value], e: TypeError) -> Value {
        Value::failed(TraceError::Type {
            location,
            op: op.to_string(),
            operands: operand_types(operands),
            source: e,
        })
    }
}

fn no_row(name: &str) -> TypeError {
    TypeError::Invalid(format!("no elementwise row `{name}`"))
}

/// Methods for rows without attributes.
macro_rules! unary_methods {
    ($($name:ident: $doc:literal),* $(,)?) => {
        impl Value {
            $(
                #[doc = $doc]
                #[track_caller]
                pub fn $name(&self) -> Value {
                    self.row_at(Location::caller(), stringify!($name), &[])
                }
            )*
        }
    };
}

unary_methods! {
    sin: "sin x, elementwise.",
    cos: "cos x, elementwise.",
    atan: "arctan x, elementwise.",
    sqrt: "√x, elementwise; x >= 0.",
    abs: "|x|, elementwise (derivative 0 at 0, a labelled convention).",
    sign: "-1, 0 or 1, elementwise (derivative 0, declared).",
    erf: "The error function, elementwise.",
    square: "x², elementwise.",
    log1p: "ln(1 + x), elementwise; x > -1.",
    expm1: "e^x - 1, elementwise.",
    softplus: "ln(1 + e^x), elementwise, without overflow.",
    floor: "⌊x⌋, elementwise (derivative 0, declared).",
    ceil: "⌈x⌉, elementwise (derivative 0, declared).",
    round: "x rounded half to even, elementwise (derivative 0, declared).",
}

/// Methods for binary rows.
macro_rules! binary_methods {
    ($($name:ident: $doc:literal),* $(,)?) => {
        impl Value {
            $(
                #[doc = $doc]
                #[track_caller]
                pub fn $name(&self, y: &Value) -> Value {
                    let location = Location::caller();
                    let row = binary_row(stringify!($name)).expect("a binary row");
                    apply_at(location, Arc::new(Binary::new(row)), &[self, y])
                }
            )*
        }
    };
}

binary_methods! {
    div: "x / y, elementwise; y != 0.",
    pow: "x^y, elementwise; x > 0.",
    maximum: "max(x, y), elementwise (ties split the derivative evenly).",
    minimum: "min(x, y), elementwise (ties split the derivative evenly).",
}

impl Value {
    /// x Φ(x); with `approximate`, 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
    #[track_caller]
    pub fn gelu(&self, approximate: bool) -> Value {
        let a = f64::from(u8::from(approximate));
        self.row_at(Location::caller(), names::GELU, &[a])
    }

    /// x for x > 0, else alpha x (alpha >= 0).
    #[track_caller]
    pub fn leaky_relu(&self, alpha: f64) -> Value {
        self.row_at(Location::caller(), names::LEAKY_RELU, &[alpha])
    }

    /// x for x > 0, else alpha (e^x - 1) (alpha >= 0).
    #[track_caller]
    pub fn elu(&self, alpha: f64) -> Value {
        self.row_at(Location::caller(), names::ELU, &[alpha])
    }

    /// min(max(x, min), max), with min <= max.
    #[track_caller]
    pub fn clip(&self, min: f64, max: f64) -> Value {
        self.row_at(Location::caller(), names::CLIP, &[min, max])
    }

    /// x^n for an integer n (x != 0 when n < 0).
    #[track_caller]
    pub fn powi(&self, n: i32) -> Value {
        self.row_at(Location::caller(), names::POWI, &[f64::from(n)])
    }
}
