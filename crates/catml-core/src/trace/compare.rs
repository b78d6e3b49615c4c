//! Comparisons, logic and selection on values: methods (`x.less(&y)`, `c.select(&a, &b)`) and
//! the operators `!`, `&`, `|`, `^` on bool values.

use std::ops::{BitAnd, BitOr, BitXor, Not};
use std::panic::Location;
use std::sync::Arc;

use super::value::{apply_at, Value};
use crate::prim::compare::{Compare, Comparison, Logical, LogicalOp, Where};

impl Value {
    /// x = y elementwise, as a bool value (operands of one type).
    #[track_caller]
    pub fn equal(&self, y: &Value) -> Value {
        apply_at(
            Location::caller(),
            Arc::new(Compare(Comparison::Equal)),
            &[self, y],
        )
    }

    /// x < y elementwise, as a bool value.
    #[track_caller]
    pub fn less(&self, y: &Value) -> Value {
        apply_at(
            Location::caller(),
            Arc::new(Compare(Comparison::Less)),
            &[self, y],
        )
    }

    /// x ≤ y elementwise, as a bool value.
    #[track_caller]
    pub fn less_equal(&self, y: &Value) -> Value {
        let p = Arc::new(Compare(Comparison::LessEqual));
        apply_at(Location::caller(), p, &[self, y])
    }

    /// x > y elementwise, as a bool value.
    #[track_caller]
    pub fn greater(&self, y: &Value) -> Value {
        apply_at(
            Location::caller(),
            Arc::new(Compare(Comparison::Greater)),
            &[self, y],
        )
    }

    /// x ≥ y elementwise, as a bool value.
    #[track_caller]
    pub fn greater_equal(&self, y: &Value) -> Value {
        let p = Arc::new(Compare(Comparison::GreaterEqual));
        apply_at(Location::caller(), p, &[self, y])
    }

    /// `a` where this bool value holds, else `b` (the LensIR `where`).
    #[track_caller]
    pub fn select(&self, a: &Value, b: &Value) -> Value {
        apply_at(Location::caller(), Arc::new(Where), &[self, a, b])
    }

    /// The logical negation of a bool value.
    #[track_caller]
    pub fn logical_not(&self) -> Value {
        apply_at(
            Location::caller(),
            Arc::new(Logical(LogicalOp::Not)),
            &[self],
        )
    }

    /// Both bool values hold.
    #[track_caller]
    pub fn logical_and(&self, d: &Value) -> Value {
        apply_at(
            Location::caller(),
            Arc::new(Logical(LogicalOp::And)),
            &[self, d],
        )
    }

    /// Either bool value holds.
    #[track_caller]
    pub fn logical_or(&self, d: &Value) -> Value {
        apply_at(
            Location::caller(),
            Arc::new(Logical(LogicalOp::Or)),
            &[self, d],
        )
    }

    /// Exactly one of the bool values holds.
    #[track_caller]
    pub fn logical_xor(&self, d: &Value) -> Value {
        apply_at(
            Location::caller(),
            Arc::new(Logical(LogicalOp::Xor)),
            &[self, d],
        )
    }
}

impl Not for &Value {
    type Output = Value;
    #[track_caller]
    fn not(self) -> Value {
        self.logical_not()
    }
}

impl Not for Value {
    type Output = Value;
    #[track_caller]
    fn not(self) -> Value {
        self.logical_not()
    }
}

macro_rules! logical_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl $trait<&Value> for &Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, d: &Value) -> Value {
                self.$op(d)
            }
        }
        impl $trait<Value> for Value {
            type Output = Value;
            #[track_caller]
            fn $method(self, d: Value) -> Value {
                self.$op(&d)
            }
        }
    };
}

logical_operator!(BitAnd, bitand, logical_and);
logical_operator!(BitOr, bitor, logical_or);
logical_operator!(BitXor, bitxor, logical_xor);
