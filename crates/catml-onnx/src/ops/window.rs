//! HannWindow, HammingWindow and BlackmanWindow: with the size known at import, the window is a
//! known value.

use std::f64::consts::PI;
use std::sync::Arc;

use crate::ctx::{Ctx, Value, R};
use crate::konst::{elem, Const};

/// With M = size (periodic) or size - 1 (symmetric) and φ = 2πn/M: Hann `0.5 - 0.5 cos φ`,
/// Hamming `25/46 - 21/46 cos φ`, Blackman `0.42 - 0.5 cos φ + 0.08 cos 2φ`, for n < size.
pub fn window(c: &mut Ctx) -> R<Vec<Value>> {
    let size = c.need_known(0, "size")?.as_i64s();
    let size = match size.as_slice() {
        [s] if *s > 0 => *s as usize,
        _ => return Err(c.err(format!("size {size:?} must be one positive length"))),
    };
    let out = c.int("output_datatype", elem::FLOAT as i64)?;
    if out != elem::FLOAT as i64 && out != elem::DOUBLE as i64 {
        return Err(c.unsupported(format!(
            "output_datatype {out} (float and double are supported)"
        )));
    }
    let m = if c.int("periodic", 1)? != 0 {
        size
    } else {
        size - 1
    };
    let op = c.node.op_type.clone();
    let w: Vec<f64> = (0..size)
        .map(|n| {
            // A one-point symmetric window divides by zero in the formula; its value is 1.
            let phi = if m == 0 {
                0.0
            } else {
                2.0 * PI * n as f64 / m as f64
            };
            match op.as_str() {
                "HannWindow" => 0.5 - 0.5 * phi.cos(),
                "HammingWindow" => 25.0 / 46.0 - 21.0 / 46.0 * phi.cos(),
                _ => 0.42 - 0.5 * phi.cos() + 0.08 * (2.0 * phi).cos(),
            }
        })
        .collect();
    Ok(vec![Value::Const(Arc::new(Const::floats(
        out as i32,
        vec![size],
        w,
    )))])
}
