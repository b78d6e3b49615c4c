//! ArgMax and ArgMin over the core's `argmax` (first position of the largest entry): ArgMin is
//! argmax of -x; `select_last_index` takes argmax of (x == max) · (k + 1) over positions k,
//! whose largest entry is the last maximum (the core has no integer arithmetic for n - 1 - p).

use catml_core::prim::Ops;
use catml_core::tensor::{DType, Tensor};

use crate::ctx::{Ctx, Value, R};

pub fn arg_extreme(c: &mut Ctx) -> R<Vec<Value>> {
    let d = c.dtype(0)?;
    let mut x = match d {
        DType::F32 | DType::F64 => c.var(0)?,
        // i64 entries compare the same as f64 ones up to 2^53.
        DType::I64 => {
            let v = c.var(0)?;
            t!(c, c.b.convert(v, DType::F64))?
        }
        d => return Err(c.unsupported(format!("{d} input"))),
    };
    let dims = c.ty(x).dims().to_vec();
    let axis = c.axis(c.int("axis", 0)?, dims.len())?;
    let keep = c.int("keepdims", 1)? != 0;
    let last = c.int("select_last_index", 0)? != 0;
    if c.node.op_type == "ArgMin" {
        x = t!(c, c.b.neg(x))?;
    }
    let n = dims[axis];
    if last && n > 1 {
        let dt = c.ty(x).dtype;
        let m = t!(c, c.b.reduce_max(x, Some(vec![axis])))?;
        let map: Vec<usize> = (0..dims.len()).filter(|&k| k != axis).collect();
        let m = t!(c, c.b.broadcast(m, dims.clone(), map))?;
        let e = t!(c, c.b.equal(x, m))?;
        let e = t!(c, c.b.convert(e, dt))?;
        let inner: usize = dims[axis + 1..].iter().product();
        let w: Vec<f64> = (0..dims.iter().product::<usize>())
            .map(|p| ((p / inner) % n + 1) as f64)
            .collect();
        let w = Tensor::from_f64s(dt, dims.clone(), w).map_err(|er| c.err(er.to_string()))?;
        let w = t!(c, c.b.constant(w))?;
        x = t!(c, c.b.mul(e, w))?;
    }
    let mut y = t!(c, c.b.argmax(x, axis))?;
    if keep {
        let mut kd = dims.clone();
        kd[axis] = 1;
        y = t!(c, c.b.reshape(y, kd))?;
    }
    Ok(vec![Value::Var(y)])
}
