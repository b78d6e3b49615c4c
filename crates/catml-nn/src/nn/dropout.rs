//! Dropout with an explicit key per call (`docs/random.md`).

use super::Mode;
use crate::trace::{tag_scope, Value};

/// Dropout: in training mode x · mask / (1 - rate) with the mask drawn from a key given per
/// call (`docs/random.md`); in evaluation mode the identity. No parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropout {
    /// The probability of dropping an element, 0 <= rate < 1.
    pub rate: f64,
    pub mode: Mode,
}

impl Dropout {
    /// Training mode at this rate (checked when applied).
    pub fn new(rate: f64) -> Dropout {
        Dropout {
            rate,
            mode: Mode::Train,
        }
    }

    /// The same layer in evaluation mode.
    pub fn eval(self) -> Dropout {
        Dropout {
            mode: Mode::Eval,
            ..self
        }
    }

    /// The same layer in training mode.
    pub fn training(self) -> Dropout {
        Dropout {
            mode: Mode::Train,
            ..self
        }
    }

    /// Applies the layer under `tag` with this call's key (an `i64[2]` value).
    #[track_caller]
    pub fn apply(&self, x: &Value, key: &Value, tag: &str) -> Value {
        match self.mode {
            Mode::Train => {
                let _tag = tag_scope(tag);
                x.dropout(key, self.rate)
            }
            Mode::Eval => x.clone(),
        }
    }
}
