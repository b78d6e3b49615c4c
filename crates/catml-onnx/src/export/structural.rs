//! The structural family: constants, layout changes, selections and their transposes, dtype
//! conversion. Every value they write is a copy (or an exact sum, for the scatters).

use catml_core::prim::names;
use catml_core::tensor::{Tensor, TensorType};

use super::families::MapFn;
use super::graph::{Mapped, Site};
use super::proto_build::{attribute, Attr};
use super::ExportError;

type R = Result<Mapped, ExportError>;

pub(crate) const OPS: &[(&str, MapFn)] = &[
    (names::CONSTANT, constant),
    (names::RESHAPE, reshape),
    (names::PERMUTE, permute),
    (names::BROADCAST, broadcast),
    (names::BROADCAST_ROWS, broadcast_rows),
    (names::GATHER, gather),
    (names::SCATTER_ADD, scatter_add),
    (names::CONCAT, concat),
    (names::CONVERT, convert),
    (names::ONE_HOT, one_hot),
    (names::TAKE, take),
    (names::STOP_GRADIENT, identity),
];

fn ints(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

/// The constant's value is what it evaluates to.
fn constant(s: &mut Site) -> R {
    let t = s.prim.eval(&[]).map_err(|e| ExportError::Unexportable {
        index: 0,
        name: s.out.clone(),
        op: names::CONSTANT.to_string(),
        why: e.to_string(),
    })?;
    let out = s.out.clone();
    s.g.node(
        "Constant",
        &[],
        &[&out],
        vec![attribute(
            "value",
            Attr::Tensor(Box::new(super::proto_build::tensor_proto("", &t))),
        )],
    );
    Ok(Mapped::Done)
}

fn identity(s: &mut Site) -> R {
    let x = s.x[0].clone();
    Ok(s.emit("Identity", &[&x], vec![]))
}

/// `x` reshaped to `dims` (as the final node when `last`).
fn reshape_to(s: &mut Site, x: &str, dims: &[usize], last: bool) -> String {
    let shape = s.const_i64(&ints(dims));
    if last {
        s.emit("Reshape", &[x, &shape], vec![]);
        s.out.clone()
    } else {
        s.tmp("Reshape", &[x, &shape], vec![])
    }
}

fn reshape(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let dims = s.ty.dims().to_vec();
    reshape_to(s, &x, &dims, true);
    Ok(Mapped::Done)
}

fn permute(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let perm = s.attr_usizes("perm").unwrap_or_default();
    Ok(s.emit(
        "Transpose",
        &[&x],
        vec![attribute("perm", Attr::Ints(ints(&perm)))],
    ))
}

/// broadcast_in_dim: operand axis i goes to result axis dims[i]. The operand's axes are put in
/// result order, given the result's rank with 1 elsewhere, then expanded.
fn broadcast_in_dim(s: &mut Site, x: &str, xt: &TensorType, dims: &[usize]) -> R {
    let out = s.ty.dims().to_vec();
    let mut order: Vec<usize> = (0..dims.len()).collect();
    order.sort_by_key(|&i| dims[i]);
    let mut v = x.to_string();
    if order.iter().enumerate().any(|(k, &i)| k != i) {
        v = s.tmp(
            "Transpose",
            &[&v],
            vec![attribute("perm", Attr::Ints(ints(&order)))],
        );
    }
    let mut shaped = vec![1usize; out.len()];
    for &i in &order {
        shaped[dims[i]] = xt.dims()[i];
    }
    if shaped == out {
        return Ok(if shaped.as_slice() == xt.dims() && v == x {
            s.emit("Identity", &[&v], vec![])
        } else {
            reshape_to(s, &v, &out, true);
            Mapped::Done
        });
    }
    if shaped.as_slice() != xt.dims() {
        v = reshape_to(s, &v, &shaped, false);
    }
    let shape = s.const_i64(&ints(&out));
    Ok(s.emit("Expand", &[&v, &shape], vec![]))
}

fn broadcast(s: &mut Site) -> R {
    let dims = s.attr_usizes("dims").unwrap_or_default();
    let (x, xt) = (s.x[0].clone(), s.xt[0].clone());
    broadcast_in_dim(s, &x, &xt, &dims)
}

/// (d) to (rows, d).
fn broadcast_rows(s: &mut Site) -> R {
    let (x, xt) = (s.x[0].clone(), s.xt[0].clone());
    broadcast_in_dim(s, &x, &xt, &[1])
}

fn gather(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let axis = s.attr_usize("axis").unwrap_or(0);
    let idx = s.attr_usizes("indices").unwrap_or_default();
    let i = s.const_i64(&ints(&idx));
    Ok(s.emit(
        "Gather",
        &[&x, &i],
        vec![attribute("axis", Attr::Int(axis as i64))],
    ))
}

/// (G^T u)_k = Σ_{j: i_j = k} u_j along `axis`: the axis moved to the front and flattened
/// behind, one Gemm with the constant 0/1 matrix G (n, size), shaped and moved back.
fn scatter_add(s: &mut Site) -> R {
    let axis = s.attr_usize("axis").unwrap_or(0);
    let idx = s.attr_usizes("indices").unwrap_or_default();
    let size = s.attr_usize("size").unwrap_or(1);
    let x = s.x[0].clone();
    let xd = s.xt[0].dims().to_vec();
    let rank = xd.len();
    let mut perm: Vec<usize> = vec![axis];
    perm.extend((0..rank).filter(|&a| a != axis));
    let moved = axis != 0;
    let u = if moved {
        s.tmp(
            "Transpose",
            &[&x],
            vec![attribute("perm", Attr::Ints(ints(&perm)))],
        )
    } else {
        x
    };
    let n = idx.len();
    let rest: usize = xd
        .iter()
        .enumerate()
        .filter(|&(a, _)| a != axis)
        .map(|(_, d)| d)
        .product();
    let u2 = reshape_to(s, &u, &[n, rest], false);
    let mut gm = vec![0.0; n * size];
    for (j, &i) in idx.iter().enumerate() {
        gm[j * size + i] = 1.0;
    }
    let gt = Tensor::from_f64s(s.dtype(), [n, size], gm).expect("n * size entries");
    let hint = format!("{}/indices", s.out);
    let gc = s.g.constant(&gt, &hint);
    let prod = s.tmp("Gemm", &[&gc, &u2], vec![attribute("transA", Attr::Int(1))]);
    let mut front: Vec<usize> = perm.iter().map(|&a| xd[a]).collect();
    front[0] = size;
    if !moved {
        reshape_to(s, &prod, &front, true);
        return Ok(Mapped::Done);
    }
    let shaped = reshape_to(s, &prod, &front, false);
    let mut inv = vec![0usize; rank];
    for (k, &a) in perm.iter().enumerate() {
        inv[a] = k;
    }
    Ok(s.emit(
        "Transpose",
        &[&shaped],
        vec![attribute("perm", Attr::Ints(ints(&inv)))],
    ))
}

fn concat(s: &mut Site) -> R {
    let axis = s.attr_usize("axis").unwrap_or(0);
    let x = s.x.clone();
    let refs: Vec<&str> = x.iter().map(String::as_str).collect();
    Ok(s.emit(
        "Concat",
        &refs,
        vec![attribute("axis", Attr::Int(axis as i64))],
    ))
}

fn convert(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let to = crate::konst::code_of(s.dtype()) as i64;
    let mut attrs = vec![attribute("to", Attr::Int(to))];
    // ONNX saturates float8 targets unless told not to; CatML converts saturate only when asked.
    if s.dtype().is_storage() && s.dtype().is_floating_point() && s.dtype().size() == 1 {
        attrs.push(attribute(
            "saturate",
            Attr::Int(i64::from(s.attr_bool("saturate"))),
        ));
    }
    Ok(s.emit("Cast", &[&x], attrs))
}

/// Integer indices (...) to rows (..., classes): rows of the identity matrix, gathered.
fn one_hot(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let c = *s.ty.dims().last().unwrap_or(&1);
    let mut eye = vec![0.0; c * c];
    for k in 0..c {
        eye[k * c + k] = 1.0;
    }
    let t = Tensor::from_f64s(s.dtype(), [c, c], eye).expect("c * c entries");
    let hint = format!("{}/eye", s.out);
    let e = s.g.constant(&t, &hint);
    Ok(s.emit("Gather", &[&e, &x], vec![attribute("axis", Attr::Int(0))]))
}

/// table[idx]: Gather along axis 0.
fn take(s: &mut Site) -> R {
    let (t, i) = (s.x[0].clone(), s.x[1].clone());
    Ok(s.emit("Gather", &[&t, &i], vec![attribute("axis", Attr::Int(0))]))
}
