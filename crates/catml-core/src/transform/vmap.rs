//! `vmap`: a program over one example becomes a program over a batch of examples. Each input
//! is either batched along a chosen axis or shared by every example; each output gets its batch
//! axis where asked. Every node that reads the batch is replaced by its primitive's batching
//! rule (`Primitive::batch`); a primitive without one is an error naming it and the node. The
//! result is an ordinary program, so it can be differentiated, batched again, printed and
//! saved (`docs/vmap.md`).

use std::fmt;

use crate::ir::{Builder, Program, Var};
use crate::prim::batching::{batch_into, lift, BatchError};
use crate::prim::Ops;
use crate::tensor::TensorType;

/// Where an input or output carries the batch: `Some(axis)`, or `None` for a value shared by
/// every example.
pub type Axis = Option<usize>;

/// Why a program could not be batched.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum VmapError {
    #[error("{what} axes: {found} given, the program has {expected} {what}s")]
    Count {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    #[error(
        "input `{name}`: batch axis {axis} is out of range for its rank {rank} (at most {rank})"
    )]
    InAxis {
        name: String,
        axis: usize,
        rank: usize,
    },
    #[error(
        "output {index} `{name}`: batch axis {axis} is out of range for its batched rank {rank}"
    )]
    OutAxis {
        index: usize,
        name: String,
        axis: usize,
        rank: usize,
    },
    #[error("output {index} `{name}` depends on the batch, but its out axis is `none`")]
    OutputBatched { index: usize, name: String },
    #[error("input {index} has batch size {found}, earlier inputs {expected}")]
    BatchSizes {
        index: usize,
        found: usize,
        expected: usize,
    },
    #[error("no input is batched: give at least one input an axis")]
    NothingBatched,
    #[error("the batch size must be at least 1")]
    EmptyBatch,
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error("building the batched program: {0}")]
    Build(String),
}

fn build(e: impl fmt::Display) -> VmapError {
    VmapError::Build(e.to_string())
}

/// `p` over a batch of `size` examples. `in_axes[k]` is where input `k` carries the batch
/// (`None`: shared by every example); `out_axes[j]` is where output `j` carries it (`None`
/// only for outputs that do not depend on the batch). Inputs keep their names and kinds.
///
/// ```
/// use catml_core::ir::{Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, TensorType};
/// use catml_core::transform::vmap;
///
/// let mut b = Builder::new();
/// let x = b.input("x", TensorType::new(DType::F64, [3]), InputKind::Data).unwrap();
/// let w = b.input("w", TensorType::new(DType::F64, [3]), InputKind::Param).unwrap();
/// let y = b.mul(x, w).unwrap();
/// let y = b.sum(y, None).unwrap();
/// let p = b.finish(&[y]).unwrap();
/// // Five examples of x along axis 1, one w for all of them.
/// let q = vmap(&p, 5, &[Some(1), None], &[Some(0)]).unwrap();
/// assert_eq!(q.inputs()[0].ty.dims(), [3, 5]);
/// assert_eq!(q.output_types()[0].dims(), [5]);
/// ```
pub fn vmap(
    p: &Program,
    size: usize,
    in_axes: &[Axis],
    out_axes: &[Axis],
) -> Result<Program, VmapError> {
    if size == 0 {
        return Err(VmapError::EmptyBatch);
    }
    check_count("input", p.n_inputs(), in_axes.len())?;
    check_count("output", p.outputs().len(), out_axes.len())?;
    if in_axes.iter().all(Option::is_none) {
        return Err(VmapError::NothingBatched);
    }
    let mut b = Builder::new();
    let mut args = Vec::with_capacity(p.n_inputs());
    for (input, &axis) in p.inputs().iter().zip(in_axes) {
        let Some(axis) = axis else {
            let v = b
                .input(&input.name, input.ty.clone(), input.kind)
                .map_err(build)?;
            args.push((v, false));
            continue;
        };
        if axis > input.ty.rank() {
            return Err(VmapError::InAxis {
                name: input.name.clone(),
                axis,
                rank: input.ty.rank(),
            });
        }
        let mut dims = input.ty.dims().to_vec();
        dims.insert(axis, size);
        let v = b
            .input(
                &input.name,
                TensorType::new(input.ty.dtype, dims),
                input.kind,
            )
            .map_err(build)?;
        let v = if axis == 0 {
            v
        } else {
            b.set_name_prefix(&format!("{}.batch_first", input.name));
            let rank = input.ty.rank() + 1;
            let mut perm = vec![axis];
            perm.extend((0..rank).filter(|&d| d != axis));
            b.permute(v, perm).map_err(build)?
        };
        args.push((v, true));
    }
    let outs = batch_into(&mut b, p, &args, size)?;
    let names = p.output_names();
    let mut results = Vec::with_capacity(outs.len());
    for (index, ((v, batched), &axis)) in outs.into_iter().zip(out_axes).enumerate() {
        results.push(place_output(
            &mut b,
            v,
            batched,
            axis,
            size,
            index,
            &names[index],
        )?);
    }
    b.finish(&results).map_err(build)
}

fn check_count(what: &'static str, expected: usize, found: usize) -> Result<(), VmapError> {
    if expected == found {
        Ok(())
    } else {
        Err(VmapError::Count {
            what,
            expected,
            found,
        })
    }
}

/// Output `v` (batched in front, or shared) with its batch at `axis`.
fn place_output(
    b: &mut Builder,
    v: Var,
    batched: bool,
    axis: Axis,
    size: usize,
    index: usize,
    name: &str,
) -> Result<Var, VmapError> {
    let Some(axis) = axis else {
        if batched {
            return Err(VmapError::OutputBatched {
                index,
                name: name.to_string(),
            });
        }
        return Ok(v);
    };
    let rank = b.ty(v).rank() + usize::from(!batched);
    if axis >= rank.max(1) {
        return Err(VmapError::OutAxis {
            index,
            name: name.to_string(),
            axis,
            rank,
        });
    }
    b.set_name_prefix(&format!("{name}.batched"));
    let v = lift(b, v, batched, size).map_err(build)?;
    if axis == 0 {
        return Ok(v);
    }
    // Result dim d is batched dim perm[d]: dims 1..=axis move left, the batch lands at axis.
    let mut perm: Vec<usize> = (1..=axis).collect();
    perm.push(0);
    perm.extend(axis + 1..rank);
    b.permute(v, perm).map_err(build)
}

/// Parses the axes syntax of `catml print --vmap`: comma-separated entries, each a
/// non-negative integer axis or `none` (a value shared by every example), e.g. `0,none,1`.
pub fn parse_axes(spec: &str) -> Result<Vec<Axis>, String> {
    spec.split(',')
        .enumerate()
        .map(|(k, entry)| {
            let entry = entry.trim();
            if entry.eq_ignore_ascii_case("none") {
                Ok(None)
            } else {
                entry.parse::<usize>().map(Some).map_err(|_| {
                    format!("entry {k} `{entry}` is neither a non-negative axis nor `none`")
                })
            }
        })
        .collect()
}
