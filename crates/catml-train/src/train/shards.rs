//! Shards: each global batch of B rows is cut into K consecutive pieces of ⌈B/K⌉ rows (the last
//! ones shorter, a short final batch leaving some empty). Each piece is evaluated by the loss
//! gradient program rebatched to ⌈B/K⌉ rows, its rows weighted by the counts of the whole
//! global batch, so the pieces' gradients add up to the global batch's mean gradient. They are
//! added in piece order, left to right: the same K gives the same bits whether the pieces are
//! evaluated by one process or spread over ranks.

use std::collections::BTreeMap;
use std::ops::Range;

use super::batches::{make_batch, Needs, Norm};
use super::{Dataset, TrainError};
use crate::diagram::{Compiled, Diagram, DiagramError, Losses, Term};
use crate::tensor::{Params, Tensor};
use crate::transform::rebatch;

/// How a global batch is cut into pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardLayout {
    batch: usize,
    shards: usize,
}

impl ShardLayout {
    /// `shards` pieces of a batch of `batch` rows; needs 1 ≤ shards ≤ batch.
    pub fn new(batch: usize, shards: usize) -> Result<ShardLayout, TrainError> {
        if shards == 0 || shards > batch {
            return Err(TrainError::Shards {
                shards,
                reason: format!("needs between 1 and the batch size {batch} pieces"),
            });
        }
        Ok(ShardLayout { batch, shards })
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Rows per piece: ⌈B/K⌉, the batch size of the pieces' program.
    pub fn size(&self) -> usize {
        self.batch.div_ceil(self.shards)
    }

    /// Piece `s` of a global batch's rows (empty past their end).
    pub fn piece<'a>(&self, s: usize, rows: &'a [usize]) -> &'a [usize] {
        let m = self.size();
        let start = (s * m).min(rows.len());
        &rows[start..((s + 1) * m).min(rows.len())]
    }

    /// The pieces rank `rank` of `ranks` evaluates: consecutive, ⌊K/N⌋ or ⌈K/N⌉ of them.
    pub fn owned(&self, rank: usize, ranks: usize) -> Range<usize> {
        (rank * self.shards / ranks)..((rank + 1) * self.shards / ranks)
    }
}

/// A diagram whose arrows run at `size` rows: the same objects, terms and parameters.
fn rebatched(diagram: &Diagram, size: usize) -> Result<Diagram, TrainError> {
    let from = diagram.batch().ok_or(DiagramError::NoArrows)?;
    let registry = crate::prim::builtins();
    let mut d = Diagram::new();
    for (name, ty) in diagram.objects() {
        d.object(name, ty.clone())?;
    }
    for a in diagram.arrows() {
        let program =
            rebatch(a.program(), from, size, registry).map_err(|e| TrainError::Shards {
                shards: from.div_ceil(size),
                reason: format!("arrow \"{}\" cannot run on {size} rows: {e}", a.name()),
            })?;
        let arrow = crate::diagram::Arrow::new(
            a.name(),
            a.source(),
            a.target(),
            program,
            a.params().clone(),
        )?;
        d.arrow(arrow)?;
    }
    for t in diagram.terms() {
        match t {
            Term::Equation(e) => d.equation(e.clone())?,
            Term::Supervised(s) => d.supervised(s.clone())?,
        }
    }
    Ok(d)
}

/// A layout and the loss gradient program at its pieces' size.
#[derive(Debug, Clone)]
pub(crate) struct Sharded {
    pub layout: ShardLayout,
    /// `None` when the pieces are whole batches: the trainer's own program serves.
    compiled: Option<Compiled>,
}

impl Sharded {
    pub fn new(diagram: &Diagram, layout: ShardLayout) -> Result<Sharded, TrainError> {
        let batch = diagram.batch().ok_or(DiagramError::NoArrows)?;
        let compiled = if layout.size() == batch {
            None
        } else {
            Some(rebatched(diagram, layout.size())?.compile()?)
        };
        Ok(Sharded { layout, compiled })
    }

    /// Losses and gradients of the non-empty pieces in `range` of the global batch `rows`, each
    /// tagged with its piece number.
    #[allow(clippy::too_many_arguments)]
    pub fn pieces(
        &self,
        whole: &Compiled,
        diagram: &Diagram,
        needs: &[Needs],
        data: &Dataset,
        params: &Params,
        rows: &[usize],
        range: Range<usize>,
    ) -> Result<Vec<Piece>, TrainError> {
        let compiled = self.compiled.as_ref().unwrap_or(whole);
        let counts: BTreeMap<String, usize> = needs
            .iter()
            .map(|n| {
                let c = rows
                    .iter()
                    .filter(|&&r| n.objects.iter().all(|o| data.has(o, r)))
                    .count();
                (n.term.clone(), c)
            })
            .collect();
        let mut out = Vec::new();
        for s in range {
            let piece = self.layout.piece(s, rows);
            if piece.is_empty() {
                continue;
            }
            let b = make_batch(
                diagram,
                needs,
                data,
                piece,
                compiled.batch(),
                compiled.dtype(),
                Norm::Total(&counts),
            );
            let (losses, grads) = compiled.gradients(params, &b)?;
            out.push(Piece {
                index: s,
                losses,
                grads,
            });
        }
        Ok(out)
    }
}

/// One piece's losses and gradients.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Piece {
    pub index: usize,
    pub losses: Losses,
    pub grads: Params,
}

/// `a + b` elementwise in their dtype.
pub(crate) fn add(a: &Tensor, b: &Tensor) -> Tensor {
    match (a, b) {
        (Tensor::F32(x), Tensor::F32(y)) => Tensor::f32(
            x.dims().to_vec(),
            x.data().iter().zip(y.data()).map(|(p, q)| p + q).collect(),
        )
        .expect("same shape"),
        (Tensor::F64(x), Tensor::F64(y)) => Tensor::f64(
            x.dims().to_vec(),
            x.data().iter().zip(y.data()).map(|(p, q)| p + q).collect(),
        )
        .expect("same shape"),
        _ => unreachable!("gradients are float tensors of one dtype per parameter"),
    }
}

/// The sum of the pieces' losses and gradients, added left to right in the given order.
pub(crate) fn fold(pieces: Vec<Piece>) -> Option<(Losses, Params)> {
    let mut it = pieces.into_iter();
    let first = it.next()?;
    let (mut losses, mut grads) = (first.losses, first.grads);
    for p in it {
        losses.total += p.losses.total;
        for ((_, acc), (_, v)) in losses.terms.iter_mut().zip(&p.losses.terms) {
            *acc += v;
        }
        for (name, g) in p.grads.iter() {
            let sum = add(grads.get(name).expect("same parameters"), g);
            grads.insert(name, sum);
        }
    }
    Some((losses, grads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_batch_in_order() {
        let l = ShardLayout::new(32, 3).unwrap();
        assert_eq!(l.size(), 11);
        let rows: Vec<usize> = (100..132).collect();
        let lens: Vec<usize> = (0..3).map(|s| l.piece(s, &rows).len()).collect();
        assert_eq!(lens, [11, 11, 10]);
        assert_eq!(l.piece(2, &rows)[0], 122);
        // A short final batch leaves the last pieces short or empty.
        let lens: Vec<usize> = (0..3).map(|s| l.piece(s, &rows[..15]).len()).collect();
        assert_eq!(lens, [11, 4, 0]);
    }

    #[test]
    fn ranks_own_consecutive_pieces() {
        let l = ShardLayout::new(32, 5).unwrap();
        let owned: Vec<_> = (0..3).map(|r| l.owned(r, 3)).collect();
        assert_eq!(owned, [0..1, 1..3, 3..5]);
        let l = ShardLayout::new(32, 2).unwrap();
        let owned: Vec<_> = (0..3).map(|r| l.owned(r, 3)).collect();
        assert_eq!(owned, [0..0, 0..1, 1..2]);
    }

    #[test]
    fn a_layout_needs_one_to_batch_pieces() {
        assert!(ShardLayout::new(8, 0).is_err());
        assert!(ShardLayout::new(8, 9).is_err());
        assert!(ShardLayout::new(8, 8).is_ok());
    }
}
