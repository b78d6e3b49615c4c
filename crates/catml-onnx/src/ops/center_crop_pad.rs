//! CenterCropPad: each listed axis cropped or zero-padded to the known target size, the kept
//! (or placed) window centred with the odd element on the far side.

use catml_core::prim::Ops;

use crate::ctx::{Ctx, Value, R};

/// Along an axis of size n with target m, the window starts at ⌊|n - m| / 2⌋: crop gathers
/// elements [s, s + m), pad scatters the n elements to [s, s + n) of a zero result.
pub fn center_crop_pad(c: &mut Ctx) -> R<Vec<Value>> {
    let x = c.fvar(0)?;
    let dims = c.ty(x).dims().to_vec();
    let shape = c.need_known(1, "shape")?.as_i64s();
    let axes: Vec<usize> = match c.ints("axes")? {
        Some(a) => a.iter().map(|&a| c.axis(a, dims.len())).collect::<R<_>>()?,
        None => (0..dims.len()).collect(),
    };
    if shape.len() != axes.len() {
        return Err(c.err(format!(
            "shape has {} entries for {} axes",
            shape.len(),
            axes.len()
        )));
    }
    let mut y = x;
    for (&axis, &m) in axes.iter().zip(&shape) {
        if m <= 0 {
            return Err(c.unsupported(format!("target size {m} on axis {axis}")));
        }
        let (n, m) = (dims[axis], m as usize);
        if m < n {
            let s = (n - m) / 2;
            y = t!(c, c.b.gather(y, axis, (s..s + m).collect()))?;
        } else if m > n {
            let s = (m - n) / 2;
            y = t!(c, c.b.scatter_add(y, axis, (s..s + n).collect(), m))?;
        }
    }
    Ok(vec![Value::Var(y)])
}
