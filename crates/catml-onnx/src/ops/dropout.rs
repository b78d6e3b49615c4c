//! Dropout: at inference, and in training with ratio 0, nothing is dropped (the output is the
//! input, the mask all true). Training with a positive ratio draws random masks, which the
//! importer does not reproduce.

use std::sync::Arc;

use crate::ctx::{Ctx, Value, R};
use crate::konst::{elem, Const};

/// Dropout (opset 12 on: `ratio` and `training_mode` inputs; before: inference only).
pub fn dropout(c: &mut Ctx) -> R<Vec<Value>> {
    let training = c.has(2)
        && c.need_known(2, "training_mode")?
            .as_i64s()
            .first()
            .is_some_and(|&t| t != 0);
    if training {
        let ratio = if c.has(1) {
            let r = c.need_known(1, "ratio")?.as_f64s();
            r.first().copied().unwrap_or(0.5)
        } else {
            0.5
        };
        if ratio != 0.0 {
            return Err(c.unsupported(format!(
                "training_mode = true with ratio {ratio}: random dropping is not reproduced"
            )));
        }
    }
    let x = c.value(0)?.clone();
    if c.node.output.len() < 2 || c.node.output[1].is_empty() {
        return Ok(vec![x]);
    }
    let dims = c.dims(0)?;
    let n = dims.iter().product();
    let mask = Const::ints(elem::BOOL, dims, vec![1; n]);
    Ok(vec![x, Value::Const(Arc::new(mask))])
}
