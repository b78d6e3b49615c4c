//! Import-time evaluation of integer and shape arithmetic on known values (Shape -> Gather ->
//! Concat -> Reshape chains), exact on i64, without building a program.

use std::sync::Arc;

use crate::ctx::broadcast_dims;

use crate::konst::{dtype_of, elem, Const, Data};
use crate::proto::NodeProto;
use crate::OnnxError;

type Known = [Option<Arc<Const>>];

/// Folds `node` natively if it is an operator this module evaluates on these operands;
/// `None` leaves it to the general path.
pub fn fold(
    index: usize,
    node: &NodeProto,
    opset: i64,
    x: &Known,
) -> Option<Result<Vec<Const>, OnnxError>> {
    let err = |m: String| OnnxError::Node {
        index,
        name: node.name.clone(),
        op: node.op_type.clone(),
        message: m,
    };
    let any_int = x.iter().flatten().any(|c| !c.is_float());
    let int = |i: usize| x.get(i).and_then(|c| c.as_ref()).map(|c| c.as_i64s());
    let get = |i: usize| x.get(i).and_then(|c| c.as_deref());
    let attr_ints = |name: &str| {
        node.attribute
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.ints.clone())
    };
    let attr_int = |name: &str| node.attribute.iter().find(|a| a.name == name).map(|a| a.i);
    let r = match node.op_type.as_str() {
        "Identity" => get(0).cloned().map(Ok),
        "Reshape" if opset >= 5 => {
            let (c, shape) = (get(0)?, int(1)?);
            let allow_zero = attr_int("allowzero").unwrap_or(0) != 0;
            Some(
                reshape_dims(&c.dims, &shape, allow_zero)
                    .map(|d| Const {
                        dims: d,
                        ..c.clone()
                    })
                    .map_err(err),
            )
        }
        "Unsqueeze" => {
            let c = get(0)?;
            let axes = if opset >= 13 {
                int(1)?
            } else {
                attr_ints("axes")?
            };
            let r = c.dims.len() + axes.len();
            let mut axes: Vec<usize> = axes
                .iter()
                .map(|&a| {
                    if a < 0 {
                        (a + r as i64) as usize
                    } else {
                        a as usize
                    }
                })
                .collect();
            axes.sort();
            let mut dims = c.dims.clone();
            for a in axes {
                if a > dims.len() {
                    return Some(Err(err(format!("unsqueeze axis {a} out of range"))));
                }
                dims.insert(a, 1);
            }
            Some(Ok(Const { dims, ..c.clone() }))
        }
        "Squeeze" => {
            let c = get(0)?;
            let axes = if opset >= 13 {
                int(1)
            } else {
                attr_ints("axes")
            };
            let r = c.dims.len() as i64;
            let dims = match axes {
                None => c.dims.iter().copied().filter(|&d| d != 1).collect(),
                Some(a) => {
                    let a: Vec<usize> = a
                        .iter()
                        .map(|&v| if v < 0 { (v + r) as usize } else { v as usize })
                        .collect();
                    c.dims
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| !a.contains(k))
                        .map(|(_, &d)| d)
                        .collect()
                }
            };
            Some(Ok(Const { dims, ..c.clone() }))
        }
        "Concat" => {
            let parts: Vec<&Const> = x.iter().map(|c| c.as_deref()).collect::<Option<_>>()?;
            let r = parts.first()?.dims.len() as i64;
            let axis = attr_int("axis").unwrap_or(0);
            let axis = if axis < 0 { axis + r } else { axis } as usize;
            Some(concat(&parts, axis).map_err(err))
        }
        "Gather" => {
            let (c, idx) = (get(0)?, get(1)?);
            let r = c.dims.len() as i64;
            let axis = attr_int("axis").unwrap_or(0);
            let axis = if axis < 0 { axis + r } else { axis } as usize;
            Some(gather(c, idx, axis).map_err(err))
        }
        "Shape" | "Size" => None,
        "Cast" => {
            let c = get(0)?;
            let to = attr_int("to")? as i32;
            Some(cast(c, to, attr_int("saturate").unwrap_or(1) != 0).map_err(err))
        }
        "Add" | "Sub" | "Mul" | "Div" | "Equal" | "Less" | "Greater" | "LessOrEqual"
        | "GreaterOrEqual" | "And" | "Or" | "Xor" | "Max" | "Min" | "Mod"
            if any_int && x.len() == 2 =>
        {
            let (a, b) = (get(0)?, get(1)?);
            // fmod = 1: the C remainder (sign of the dividend), else the sign of the divisor.
            let op = if node.op_type == "Mod" && attr_int("fmod") == Some(1) {
                "Fmod"
            } else {
                node.op_type.as_str()
            };
            Some(binary(op, a, b).map_err(err))
        }
        "Pow" if get(0).is_some_and(|c| !c.is_float()) => {
            let (a, b) = (get(0)?, get(1)?);
            Some(int_pow(a, b).map_err(err))
        }
        "Neg" | "Abs" | "Not" | "Sign" if any_int => {
            let c = get(0)?;
            let v: Vec<i64> = c
                .as_i64s()
                .iter()
                .map(|&v| match node.op_type.as_str() {
                    "Neg" => v.wrapping_neg(),
                    "Abs" => v.wrapping_abs(),
                    "Sign" => v.signum(),
                    _ => (v == 0) as i64,
                })
                .collect();
            Some(Ok(Const::ints(c.elem, c.dims.clone(), v)))
        }
        "Range" if any_int => {
            let (s, l, d) = (int(0)?[0], int(1)?[0], int(2)?[0]);
            if d == 0 {
                return Some(Err(err("Range delta is 0".to_string())));
            }
            let n = ((l - s) as f64 / d as f64).ceil().max(0.0) as usize;
            if n > 1 << 24 {
                return Some(Err(err(format!(
                    "Range of {n} elements is too long to fold"
                ))));
            }
            let v: Vec<i64> = (0..n as i64).map(|k| s + k * d).collect();
            Some(Ok(Const::ints(get(0)?.elem, vec![n], v)))
        }
        "Where" if x.len() == 3 => {
            let (c, a, b) = (get(0)?, get(1)?, get(2)?);
            let d1 = broadcast_dims(&c.dims, &a.dims)?;
            let dims = broadcast_dims(&d1, &b.dims)?;
            let cc = expand(c, &dims).as_i64s();
            let (ea, eb) = (expand(a, &dims), expand(b, &dims));
            let data = match (&ea.data, &eb.data) {
                (Data::I(p), Data::I(q)) => Data::I(
                    cc.iter()
                        .zip(p.iter().zip(q))
                        .map(|(&c, (&p, &q))| if c != 0 { p } else { q })
                        .collect(),
                ),
                (Data::F(p), Data::F(q)) => Data::F(
                    cc.iter()
                        .zip(p.iter().zip(q))
                        .map(|(&c, (&p, &q))| if c != 0 { p } else { q })
                        .collect(),
                ),
                _ => return None,
            };
            Some(Ok(Const {
                elem: a.elem,
                dims,
                data,
            }))
        }
        "Expand" => {
            let (c, shape) = (get(0)?, int(1)?);
            let shape: Vec<usize> = shape.iter().map(|&v| v.max(0) as usize).collect();
            let dims = broadcast_dims(&c.dims, &shape)?;
            Some(Ok(expand(c, &dims)))
        }
        "Slice" if opset >= 10 => {
            let c = get(0)?;
            let (starts, ends) = (int(1)?, int(2)?);
            let axes = int(3);
            let steps = int(4);
            Some(slice(c, &starts, &ends, axes.as_deref(), steps.as_deref()).map_err(err))
        }
        // The axes operand is always integer: the data operand decides.
        "ReduceProd" | "ReduceSum" | "ReduceMax" | "ReduceMin"
            if get(0).is_some_and(|c| !c.is_float()) =>
        {
            let c = get(0)?;
            let axes = if opset >= 18 || (node.op_type == "ReduceSum" && opset >= 13) {
                int(1)
            } else {
                attr_ints("axes")
            };
            let keep = attr_int("keepdims").unwrap_or(1) != 0;
            Some(reduce_int(&node.op_type, c, axes.as_deref(), keep).map_err(err))
        }
        _ => None,
    };
    r.map(|r| r.map(|c| vec![c]))
}

/// ONNX Reshape's target: 0 copies the input dim (unless `allowzero`), one -1 is inferred.
pub fn reshape_dims(
    input: &[usize],
    shape: &[i64],
    allow_zero: bool,
) -> Result<Vec<usize>, String> {
    let numel: usize = input.iter().product();
    let mut out = Vec::with_capacity(shape.len());
    let mut infer = None;
    for (k, &s) in shape.iter().enumerate() {
        match s {
            -1 if infer.is_none() => {
                infer = Some(k);
                out.push(1);
            }
            0 if !allow_zero => out.push(
                *input
                    .get(k)
                    .ok_or_else(|| format!("shape[{k}] = 0 copies a dim the input lacks"))?,
            ),
            s if s >= 0 => out.push(s as usize),
            _ => return Err(format!("shape {shape:?} is not a valid Reshape target")),
        }
    }
    let known: usize = out.iter().product();
    if let Some(k) = infer {
        if known == 0 || numel % known != 0 {
            return Err(format!("cannot reshape {input:?} to {shape:?}"));
        }
        out[k] = numel / known;
    } else if known != numel {
        return Err(format!(
            "cannot reshape {input:?} ({numel} elements) to {shape:?}"
        ));
    }
    Ok(out)
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Elements of `c` at flat source positions `src`.
fn pick(c: &Const, dims: Vec<usize>, src: &[usize]) -> Const {
    let data = match &c.data {
        Data::F(v) => Data::F(src.iter().map(|&i| v[i]).collect()),
        Data::I(v) => Data::I(src.iter().map(|&i| v[i]).collect()),
    };
    Const {
        elem: c.elem,
        dims,
        data,
    }
}

/// For each output position (row-major over `out`), the source position under `f` of its
/// multi-index.
fn positions(out: &[usize], mut f: impl FnMut(&[usize]) -> usize) -> Vec<usize> {
    let n: usize = out.iter().product();
    let mut idx = vec![0usize; out.len()];
    let mut res = Vec::with_capacity(n);
    for _ in 0..n {
        res.push(f(&idx));
        for k in (0..out.len()).rev() {
            idx[k] += 1;
            if idx[k] < out[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    res
}

/// `c` broadcast to `dims` (numpy rules).
pub fn expand(c: &Const, dims: &[usize]) -> Const {
    if c.dims == dims {
        return c.clone();
    }
    let off = dims.len() - c.dims.len();
    let st = strides(&c.dims);
    let src = positions(dims, |i| {
        c.dims
            .iter()
            .enumerate()
            .map(|(k, &d)| if d == 1 { 0 } else { i[k + off] * st[k] })
            .sum()
    });
    pick(c, dims.to_vec(), &src)
}

fn concat(parts: &[&Const], axis: usize) -> Result<Const, String> {
    let first = parts[0];
    let mut dims = first.dims.clone();
    if axis >= dims.len() {
        return Err(format!("concat axis {axis} out of range"));
    }
    dims[axis] = parts
        .iter()
        .map(|p| p.dims.get(axis).copied().unwrap_or(0))
        .sum();
    let outer: usize = dims[..axis].iter().product();
    let mut data = match &first.data {
        Data::F(_) => Data::F(Vec::new()),
        Data::I(_) => Data::I(Vec::new()),
    };
    for o in 0..outer {
        for p in parts {
            if p.dims.len() != dims.len() || p.is_float() != first.is_float() {
                return Err("concat operands differ in rank or dtype".to_string());
            }
            let inner: usize = p.dims[axis..].iter().product();
            match (&mut data, &p.data) {
                (Data::F(d), Data::F(v)) => d.extend_from_slice(&v[o * inner..(o + 1) * inner]),
                (Data::I(d), Data::I(v)) => d.extend_from_slice(&v[o * inner..(o + 1) * inner]),
                _ => return Err("concat operands differ in dtype".to_string()),
            }
        }
    }
    Ok(Const {
        elem: first.elem,
        dims,
        data,
    })
}

fn gather(c: &Const, idx: &Const, axis: usize) -> Result<Const, String> {
    if axis >= c.dims.len() {
        return Err(format!("gather axis {axis} out of range"));
    }
    let n = c.dims[axis] as i64;
    let ids: Vec<usize> = idx
        .as_i64s()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + n } else { i };
            if j < 0 || j >= n {
                Err(format!("index {i} is out of range for axis of size {n}"))
            } else {
                Ok(j as usize)
            }
        })
        .collect::<Result<_, _>>()?;
    let mut dims: Vec<usize> = c.dims[..axis].to_vec();
    dims.extend(&idx.dims);
    dims.extend(&c.dims[axis + 1..]);
    let st = strides(&c.dims);
    let ist = strides(&idx.dims);
    let ir = idx.dims.len();
    let src = positions(&dims, |i| {
        let flat: usize = (0..ir).map(|k| i[axis + k] * ist[k]).sum();
        let mut s = ids[flat] * st[axis];
        for k in 0..axis {
            s += i[k] * st[k];
        }
        for k in axis + 1..c.dims.len() {
            s += i[k + ir - 1] * st[k];
        }
        s
    });
    Ok(pick(c, dims, &src))
}

/// ONNX Slice with clamped starts and ends (steps may be negative).
pub fn slice_ranges(
    dims: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Vec<(i64, i64, usize)>, String> {
    let r = dims.len() as i64;
    let mut spec: Vec<(i64, i64, usize)> = dims.iter().map(|&d| (0, 1, d)).collect();
    for (k, (&s, &e)) in starts.iter().zip(ends).enumerate() {
        let a = axes.map_or(k as i64, |a| a[k]);
        let a = if a < 0 { a + r } else { a };
        if a < 0 || a >= r {
            return Err(format!("slice axis {a} out of range"));
        }
        let d = dims[a as usize] as i64;
        let step = steps.map_or(1, |s| s[k]);
        if step == 0 {
            return Err("slice step is 0".to_string());
        }
        let norm = |v: i64| if v < 0 { v + d } else { v };
        let (s, e) = (norm(s.clamp(-d - 1, d + 1)), norm(e.clamp(-d - 1, d + 1)));
        let (s, e) = if step > 0 {
            (s.clamp(0, d), e.clamp(0, d))
        } else {
            (s.clamp(0, d - 1), e.clamp(-1, d - 1))
        };
        let n = if step > 0 {
            ((e - s).max(0) + step - 1) / step
        } else {
            ((s - e).max(0) + (-step) - 1) / (-step)
        };
        spec[a as usize] = (s, step, n as usize);
    }
    Ok(spec)
}

fn slice(
    c: &Const,
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Const, String> {
    let spec = slice_ranges(&c.dims, starts, ends, axes, steps)?;
    let dims: Vec<usize> = spec.iter().map(|s| s.2).collect();
    let st = strides(&c.dims);
    let src = positions(&dims, |i| {
        spec.iter()
            .enumerate()
            .map(|(k, &(s, step, _))| ((s + i[k] as i64 * step) as usize) * st[k])
            .sum()
    });
    Ok(pick(c, dims, &src))
}

/// ONNX Cast of a known value: the tensor layer's `convert` (`docs/dtypes.md`), saturating
/// into the 8-bit floats and E8M0 with `saturate`; a target the tensor layer does not hold, or
/// a float no integer target holds, is an error.
pub fn cast(c: &Const, to: i32, saturate: bool) -> Result<Const, String> {
    let d = dtype_of(to).ok_or_else(|| {
        format!(
            "cast to {}, which the CatML tensor layer does not hold",
            elem::name(to)
        )
    })?;
    if c.numel() == 0 {
        let data = if d.is_floating_point() {
            Data::F(Vec::new())
        } else {
            Data::I(Vec::new())
        };
        return Ok(Const {
            elem: to,
            dims: c.dims.clone(),
            data,
        });
    }
    let saturate = saturate && d.is_floating_point() && d.size() == 1;
    let t = c.to_tensor()?.convert_with(d, saturate)?;
    Ok(Const::from_tensor(&t))
}

fn wrap_int(x: i64, to: i32) -> i64 {
    match to {
        elem::BOOL => (x != 0) as i64,
        elem::INT8 => x as i8 as i64,
        elem::UINT8 => x as u8 as i64,
        elem::INT16 => x as i16 as i64,
        elem::UINT16 => x as u16 as i64,
        elem::INT32 => x as i32 as i64,
        elem::UINT32 => x as u32 as i64,
        _ => x,
    }
}

fn binary(op: &str, a: &Const, b: &Const) -> Result<Const, String> {
    let dims = broadcast_dims(&a.dims, &b.dims)
        .ok_or_else(|| format!("cannot broadcast {:?} and {:?}", a.dims, b.dims))?;
    let (x, y) = (expand(a, &dims).as_i64s(), expand(b, &dims).as_i64s());
    let compare = matches!(
        op,
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual"
    );
    let mut out = Vec::with_capacity(x.len());
    for (&p, &q) in x.iter().zip(&y) {
        out.push(match op {
            "Add" => p.wrapping_add(q),
            "Sub" => p.wrapping_sub(q),
            "Mul" => p.wrapping_mul(q),
            "Div" => {
                if q == 0 {
                    return Err("integer division by zero".to_string());
                }
                p.wrapping_div(q)
            }
            "Mod" => {
                if q == 0 {
                    return Err("integer modulo by zero".to_string());
                }
                p.rem_euclid(q) + if q < 0 && p.rem_euclid(q) != 0 { q } else { 0 }
            }
            "Fmod" => {
                if q == 0 {
                    return Err("integer modulo by zero".to_string());
                }
                p.wrapping_rem(q)
            }
            "Equal" => (p == q) as i64,
            "Less" => (p < q) as i64,
            "Greater" => (p > q) as i64,
            "LessOrEqual" => (p <= q) as i64,
            "GreaterOrEqual" => (p >= q) as i64,
            "And" => (p != 0 && q != 0) as i64,
            "Or" => (p != 0 || q != 0) as i64,
            "Xor" => ((p != 0) != (q != 0)) as i64,
            "Max" => p.max(q),
            _ => p.min(q),
        });
    }
    let elem_out = if compare { elem::BOOL } else { a.elem };
    let out = out.into_iter().map(|v| wrap_int(v, elem_out)).collect();
    Ok(Const::ints(elem_out, dims, out))
}

fn reduce_int(op: &str, c: &Const, axes: Option<&[i64]>, keep: bool) -> Result<Const, String> {
    let r = c.dims.len() as i64;
    let axes: Vec<usize> = match axes {
        None => (0..c.dims.len()).collect(),
        Some([]) => (0..c.dims.len()).collect(),
        Some(a) => a
            .iter()
            .map(|&v| if v < 0 { (v + r) as usize } else { v as usize })
            .collect(),
    };
    let out_full: Vec<usize> = c
        .dims
        .iter()
        .enumerate()
        .map(|(k, &d)| if axes.contains(&k) { 1 } else { d })
        .collect();
    let n: usize = out_full.iter().product();
    // The identity of each reduction (over an empty set it is the result).
    let bool_elem = c.elem == elem::BOOL;
    let init = match op {
        "ReduceProd" => 1,
        "ReduceSum" => 0,
        "ReduceMax" if bool_elem => 0,
        "ReduceMax" => i64::MIN,
        _ if bool_elem => 1,
        _ => i64::MAX,
    };
    let mut acc = vec![init; n];
    let ost = strides(&out_full);
    let v = c.as_i64s();
    let src = positions(&c.dims, |i| {
        i.iter()
            .enumerate()
            .map(|(k, &x)| if axes.contains(&k) { 0 } else { x * ost[k] })
            .sum()
    });
    for (j, &o) in src.iter().enumerate() {
        acc[o] = match op {
            "ReduceProd" => acc[o].wrapping_mul(v[j]),
            "ReduceSum" => acc[o].wrapping_add(v[j]),
            "ReduceMax" => acc[o].max(v[j]),
            _ => acc[o].min(v[j]),
        };
    }
    let dims = if keep {
        out_full
    } else {
        c.dims
            .iter()
            .enumerate()
            .filter(|(k, _)| !axes.contains(k))
            .map(|(_, &d)| d)
            .collect()
    };
    Ok(Const::ints(c.elem, dims, acc))
}

/// Pow of an integer base (the result keeps the base's type): exact for integer exponents,
/// truncated toward zero for float ones.
fn int_pow(a: &Const, b: &Const) -> Result<Const, String> {
    let dims = broadcast_dims(&a.dims, &b.dims)
        .ok_or_else(|| format!("cannot broadcast {:?} and {:?}", a.dims, b.dims))?;
    let x = expand(a, &dims).as_i64s();
    let eb = expand(b, &dims);
    let out: Vec<i64> = match &eb.data {
        Data::I(y) => x
            .iter()
            .zip(y)
            .map(|(&p, &q)| {
                if q < 0 {
                    // 1/p^|q| truncates to 0 unless |p| = 1.
                    match p {
                        1 => 1,
                        -1 => {
                            if q % 2 == 0 {
                                1
                            } else {
                                -1
                            }
                        }
                        _ => 0,
                    }
                } else {
                    p.wrapping_pow(q.min(u32::MAX as i64) as u32)
                }
            })
            .collect(),
        Data::F(y) => x
            .iter()
            .zip(y)
            .map(|(&p, &q)| (p as f64).powf(q) as i64)
            .collect(),
    };
    let out = out.into_iter().map(|v| wrap_int(v, a.elem)).collect();
    Ok(Const::ints(a.elem, dims, out))
}
