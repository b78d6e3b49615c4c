//! Data-parallel training: ranks that each evaluate some pieces of every global batch (see
//! [`ShardLayout`](super::ShardLayout)) and combine their losses and gradients through a
//! [`Collective`], so that every rank takes the same optimiser step.
//!
//! Two ways to combine:
//! - deterministic (the default): every piece's gradient is gathered on every rank in rank
//!   order, which is piece order, and added left to right, exactly as one process adds them. K
//!   pieces give the same bits on any number of ranks.
//! - summed: each rank adds its own pieces, then one all-reduce adds the ranks' sums, in an
//!   order the MPI library chooses. It moves K/N times fewer bytes and may differ in the last
//!   bits.
//!
//! Rank 0's state (parameters, optimiser state, epoch, shuffling position, metrics) is broadcast
//! when training starts, so replicas cannot start apart; after every epoch the replicas compare
//! a hash of their parameters and optimiser state.

#[cfg(feature = "mpi")]
pub mod mpi;

use std::rc::Rc;
use std::time::Duration;

use super::shards::{fold, Piece};
use super::TrainError;
use crate::diagram::Losses;
use crate::tensor::{Params, Tensor, TensorType};

/// Why a collective operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CollectiveError(pub String);

/// The collective operations data-parallel training needs, over ranks 0..size.
pub trait Collective: std::fmt::Debug {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// How long one operation may wait for the other ranks before the job is stopped.
    fn set_timeout(&self, timeout: Duration);
    /// Rank 0's bytes, on every rank.
    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<(), CollectiveError>;
    /// Every rank's bytes, in rank order.
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CollectiveError>;
    /// Elementwise sums over the ranks.
    fn sum_f64(&self, xs: &mut [f64]) -> Result<(), CollectiveError>;
    fn sum_f32(&self, xs: &mut [f32]) -> Result<(), CollectiveError>;
}

/// Time and traffic of the steps so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CommStats {
    pub ranks: usize,
    /// Pieces per batch.
    pub shards: usize,
    /// Whether pieces are gathered and added in order (else all-reduced).
    pub deterministic: bool,
    pub steps: u64,
    /// Seconds spent in the collectives that combine gradients (waiting for slower ranks too).
    pub comm_seconds: f64,
    /// Seconds spent evaluating this rank's pieces.
    pub compute_seconds: f64,
    /// Bytes of gradients and losses this rank has sent.
    pub bytes_sent: u64,
    /// Times the replicas differed after an epoch and took rank 0's state (summed mode).
    pub resyncs: u64,
}

impl CommStats {
    pub fn comm_ms_per_step(&self) -> f64 {
        1e3 * self.comm_seconds / self.steps.max(1) as f64
    }

    pub fn compute_ms_per_step(&self) -> f64 {
        1e3 * self.compute_seconds / self.steps.max(1) as f64
    }
}

/// A trainer's link to the other ranks.
#[derive(Debug, Clone)]
pub(crate) struct Distributed {
    pub comm: Rc<dyn Collective>,
    pub deterministic: bool,
    pub stats: CommStats,
}

fn fault(comm: &dyn Collective, e: impl std::fmt::Display) -> TrainError {
    TrainError::Distributed {
        rank: comm.rank(),
        ranks: comm.size(),
        reason: e.to_string(),
    }
}

/// Pieces as bytes: per piece its index, total, terms and every gradient's values, little
/// endian in the gradient's dtype.
fn encode(pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pieces {
        out.extend((p.index as u64).to_le_bytes());
        out.extend(p.losses.total.to_le_bytes());
        for (_, v) in &p.losses.terms {
            out.extend(v.to_le_bytes());
        }
        for (_, g) in p.grads.iter() {
            match g {
                Tensor::F32(a) => a.data().iter().for_each(|x| out.extend(x.to_le_bytes())),
                Tensor::F64(a) => a.data().iter().for_each(|x| out.extend(x.to_le_bytes())),
                Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => {
                    unreachable!("gradients are f32 or f64")
                }
            }
        }
    }
    out
}

/// The shape of one piece's record: term names and each gradient's name and type.
struct Layout<'a> {
    terms: &'a [String],
    grads: &'a [(String, TensorType)],
}

fn take<const N: usize>(bytes: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = bytes.split_first_chunk::<N>()?;
    *bytes = rest;
    Some(*head)
}

fn decode(mut bytes: &[u8], layout: &Layout) -> Option<Vec<Piece>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let index = u64::from_le_bytes(take(&mut bytes)?) as usize;
        let total = f64::from_le_bytes(take(&mut bytes)?);
        let mut terms = Vec::new();
        for name in layout.terms {
            terms.push((name.clone(), f64::from_le_bytes(take(&mut bytes)?)));
        }
        let mut grads = Params::new();
        for (name, ty) in layout.grads {
            let n = ty.numel();
            let t = match ty.dtype {
                crate::tensor::DType::F32 => {
                    let v = (0..n)
                        .map(|_| take(&mut bytes).map(f32::from_le_bytes))
                        .collect::<Option<Vec<_>>>()?;
                    Tensor::f32(ty.shape.clone(), v).ok()?
                }
                crate::tensor::DType::F64 => {
                    let v = (0..n)
                        .map(|_| take(&mut bytes).map(f64::from_le_bytes))
                        .collect::<Option<Vec<_>>>()?;
                    Tensor::f64(ty.shape.clone(), v).ok()?
                }
                _ => return None,
            };
            grads.insert(name.clone(), t);
        }
        out.push(Piece {
            index,
            losses: Losses { total, terms },
            grads,
        });
    }
    Some(out)
}

impl Distributed {
    pub fn new(comm: Rc<dyn Collective>, deterministic: bool, shards: usize) -> Distributed {
        let ranks = comm.size();
        Distributed {
            comm,
            deterministic,
            stats: CommStats {
                ranks,
                shards,
                deterministic,
                ..CommStats::default()
            },
        }
    }

    /// The global batch's losses and gradients from this rank's pieces. `grads` names every
    /// gradient and its type, in the order the pieces hold them.
    pub fn combine(
        &mut self,
        mine: Vec<Piece>,
        terms: &[String],
        grads: &[(String, TensorType)],
    ) -> Result<(Losses, Params), TrainError> {
        let comm = self.comm.clone();
        let start = std::time::Instant::now();
        let out = if self.deterministic {
            let bytes = encode(&mine);
            self.stats.bytes_sent += bytes.len() as u64;
            let all = comm.all_gather(&bytes).map_err(|e| fault(&*comm, e))?;
            let layout = Layout { terms, grads };
            let mut pieces = Vec::new();
            for (rank, b) in all.iter().enumerate() {
                let p = decode(b, &layout).ok_or_else(|| {
                    fault(&*comm, format!("rank {rank} sent malformed gradients"))
                })?;
                pieces.extend(p);
            }
            if pieces.windows(2).any(|w| w[0].index >= w[1].index) {
                return Err(fault(&*comm, "the ranks' pieces are not in piece order"));
            }
            fold(pieces).ok_or_else(|| fault(&*comm, "no rank evaluated a piece"))?
        } else {
            let (losses, sums) = fold(mine).unwrap_or_else(|| {
                let zeros = grads
                    .iter()
                    .map(|(n, ty)| (n.clone(), Tensor::zeros(ty)))
                    .collect();
                let terms = terms.iter().map(|t| (t.clone(), 0.0)).collect();
                (Losses { total: 0.0, terms }, zeros)
            });
            let mut f64s: Vec<f64> = std::iter::once(losses.total)
                .chain(losses.terms.iter().map(|(_, v)| *v))
                .collect();
            let mut f32s: Vec<f32> = Vec::new();
            for (_, g) in sums.iter() {
                match g {
                    Tensor::F32(a) => f32s.extend(a.data()),
                    Tensor::F64(a) => f64s.extend(a.data()),
                    Tensor::I64(_) | Tensor::Bool(_) | Tensor::Stored(_) => {
                        unreachable!("gradients are f32 or f64")
                    }
                }
            }
            self.stats.bytes_sent += (8 * f64s.len() + 4 * f32s.len()) as u64;
            comm.sum_f64(&mut f64s).map_err(|e| fault(&*comm, e))?;
            if !f32s.is_empty() {
                comm.sum_f32(&mut f32s).map_err(|e| fault(&*comm, e))?;
            }
            let total = f64s[0];
            let terms = terms
                .iter()
                .cloned()
                .zip(f64s[1..].iter().copied())
                .collect();
            let (mut at64, mut at32) = (1 + losses.terms.len(), 0);
            let mut out = Params::new();
            for (name, g) in sums.iter() {
                let n = g.numel();
                let t = match g {
                    Tensor::F32(_) => {
                        at32 += n;
                        Tensor::f32(g.dims().to_vec(), f32s[at32 - n..at32].to_vec())
                    }
                    _ => {
                        at64 += n;
                        Tensor::f64(g.dims().to_vec(), f64s[at64 - n..at64].to_vec())
                    }
                };
                out.insert(name, t.expect("same shape"));
            }
            (Losses { total, terms }, out)
        };
        self.stats.comm_seconds += start.elapsed().as_secs_f64();
        self.stats.steps += 1;
        Ok(out)
    }

    /// Rank 0's checkpoint bytes on every rank.
    pub fn broadcast_state(&self, mut bytes: Vec<u8>) -> Result<Vec<u8>, TrainError> {
        self.comm
            .broadcast(&mut bytes)
            .map_err(|e| fault(&*self.comm, e))?;
        Ok(bytes)
    }

    /// Whether every rank holds the same bytes (compared by a 64-bit FNV-1a hash).
    pub fn replicas_agree(&self, state: &[u8]) -> Result<Option<usize>, TrainError> {
        let hash = state.iter().fold(0xcbf29ce484222325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
        let all = self
            .comm
            .all_gather(&hash.to_le_bytes())
            .map_err(|e| fault(&*self.comm, e))?;
        Ok(all.iter().position(|h| h[..] != all[0][..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_survive_their_encoding_bit_for_bit() {
        let mut grads = Params::new();
        grads.insert(
            "a.W",
            Tensor::f32([2, 2], vec![1.5, -0.0, 3e-39, 7.0]).unwrap(),
        );
        grads.insert("b.b", Tensor::f64([1], vec![f64::MIN_POSITIVE]).unwrap());
        let piece = Piece {
            index: 3,
            losses: Losses {
                total: 0.1,
                terms: vec![("t".to_string(), 0.2)],
            },
            grads,
        };
        let types: Vec<(String, TensorType)> = piece
            .grads
            .iter()
            .map(|(n, t)| (n.to_string(), t.ty()))
            .collect();
        let terms = ["t".to_string()];
        let layout = Layout {
            terms: &terms,
            grads: &types,
        };
        let bytes = encode(&[piece.clone(), piece.clone()]);
        let back = decode(&bytes, &layout).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(encode(&back), bytes);
        assert!(decode(&bytes[..bytes.len() - 1], &layout).is_none());
    }
}
