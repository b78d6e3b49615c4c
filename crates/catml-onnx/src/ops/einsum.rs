//! Einsum: each operand's repeated letters become its diagonal (a flat gather), every operand is
//! laid out over all the equation's letters (permute, reshape, broadcast), the operands multiply,
//! the letters missing from the output are summed and the rest put in the output's order.

use catml_core::ir::Var;
use catml_core::prim::Ops;

use crate::ctx::{Ctx, Value, R};

/// The letters of one term, with `...` spelled as `rank - letters` fresh uppercase letters.
fn letters(c: &Ctx, term: &str, rank: usize) -> R<Vec<char>> {
    let named = term.replace("...", "").chars().count();
    if let Some((a, b)) = term.split_once("...") {
        if rank < named {
            return Err(c.err(format!("term `{term}` names more axes than rank {rank}")));
        }
        let ell: String = (0..rank - named)
            .map(|k| char::from(b'A' + (26 - (rank - named) + k) as u8))
            .collect();
        return Ok(format!("{a}{ell}{b}").chars().collect());
    }
    if named != rank {
        return Err(c.err(format!("term `{term}` has {named} letters for rank {rank}")));
    }
    Ok(term.chars().collect())
}

/// x with repeated letters reduced to their diagonal.
fn diagonal(c: &mut Ctx, x: Var, ls: &[char]) -> R<(Var, Vec<char>)> {
    let dims = c.ty(x).dims().to_vec();
    let mut uniq: Vec<char> = Vec::new();
    for &l in ls {
        if !uniq.contains(&l) {
            uniq.push(l);
        }
    }
    if uniq.len() == ls.len() {
        return Ok((x, uniq));
    }
    let mut udims = Vec::new();
    for &u in &uniq {
        let ds: Vec<usize> = ls
            .iter()
            .zip(&dims)
            .filter(|(l, _)| **l == u)
            .map(|(_, &d)| d)
            .collect();
        if ds.iter().any(|&d| d != ds[0]) {
            return Err(c.err(format!("letter `{u}` spans dims {ds:?}")));
        }
        udims.push(ds[0]);
    }
    let mut strides = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * dims[k + 1];
    }
    let n: usize = udims.iter().product();
    let mut pos = Vec::with_capacity(n);
    let mut coord = vec![0usize; uniq.len()];
    for _ in 0..n {
        let p: usize = ls
            .iter()
            .enumerate()
            .map(|(k, l)| coord[uniq.iter().position(|u| u == l).expect("listed")] * strides[k])
            .sum();
        pos.push(p);
        for k in (0..coord.len()).rev() {
            coord[k] += 1;
            if coord[k] < udims[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    let total: usize = dims.iter().product();
    let flat = t!(c, c.b.reshape(x, vec![total]))?;
    let g = t!(c, c.b.gather(flat, 0, pos))?;
    Ok((t!(c, c.b.reshape(g, udims))?, uniq))
}

pub fn einsum(c: &mut Ctx) -> R<Vec<Value>> {
    let eq: String = c
        .string("equation", "")?
        .chars()
        .filter(|ch| !ch.is_whitespace())
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != c.n_inputs() {
        return Err(c.err(format!(
            "equation `{eq}` has {} operands, the node {}",
            terms.len(),
            c.n_inputs()
        )));
    }
    let mut ops: Vec<(Var, Vec<char>)> = Vec::new();
    let mut all: Vec<char> = Vec::new();
    let mut size = std::collections::HashMap::new();
    let mut ell_rank = 0;
    for (i, term) in terms.iter().enumerate() {
        let x = c.fvar(i)?;
        let rank = c.ty(x).rank();
        let ls = letters(c, term, rank)?;
        if term.contains("...") {
            ell_rank = ell_rank.max(rank + 3 - term.chars().count());
        }
        let (x, ls) = diagonal(c, x, &ls)?;
        for (l, &d) in ls.iter().zip(c.ty(x).dims()) {
            if *size.entry(*l).or_insert(d) != d {
                return Err(c.unsupported(format!("letter `{l}` with sizes that broadcast")));
            }
            if !all.contains(l) {
                all.push(*l);
            }
        }
        ops.push((x, ls));
    }
    let out: Vec<char> = match rhs {
        Some(r) => letters(c, &r, r.replace("...", "").chars().count() + ell_rank)?,
        None => {
            // Implicit output: the ellipsis letters, then letters used once, sorted.
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|l| l.is_lowercase())
                .filter(|l| terms.iter().map(|t| t.matches(*l).count()).sum::<usize>() == 1)
                .collect();
            once.sort();
            let mut o: Vec<char> = all.iter().copied().filter(|l| l.is_uppercase()).collect();
            o.extend(once);
            o
        }
    };
    if let Some(l) = out.iter().find(|l| !all.contains(l)) {
        return Err(c.err(format!("output letter `{l}` is in no operand")));
    }
    let full: Vec<usize> = all.iter().map(|l| size[l]).collect();
    let mut acc: Option<Var> = None;
    for (x, ls) in ops {
        // Permute to the order of `all`, then broadcast over the missing letters.
        let order: Vec<usize> = all
            .iter()
            .filter_map(|l| ls.iter().position(|m| m == l))
            .collect();
        let x = if order.iter().enumerate().all(|(k, &p)| k == p) {
            x
        } else {
            t!(c, c.b.permute(x, order))?
        };
        let map: Vec<usize> = all
            .iter()
            .enumerate()
            .filter(|(_, l)| ls.contains(l))
            .map(|(k, _)| k)
            .collect();
        let x = if map.len() == full.len() {
            x
        } else {
            t!(c, c.b.broadcast(x, full.clone(), map))?
        };
        acc = Some(match acc {
            None => x,
            Some(a) => t!(c, c.b.mul(a, x))?,
        });
    }
    let mut y = acc.ok_or_else(|| c.err("no operands"))?;
    let summed: Vec<usize> = (0..all.len()).filter(|&k| !out.contains(&all[k])).collect();
    let kept: Vec<char> = all.iter().copied().filter(|l| out.contains(l)).collect();
    if !summed.is_empty() {
        y = t!(c, c.b.sum(y, Some(summed)))?;
    }
    let perm: Vec<usize> = out
        .iter()
        .map(|l| kept.iter().position(|m| m == l).expect("kept"))
        .collect();
    if perm.iter().enumerate().any(|(k, &p)| k != p) {
        y = t!(c, c.b.permute(y, perm))?;
    }
    Ok(vec![Value::Var(y)])
}
