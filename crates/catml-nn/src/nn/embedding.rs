//! Token embeddings: rows of a learned (V, D) table `<tag>.table` at runtime i64 indices,
//! differentiable in the table (the `take` primitive).

use rand::Rng;

use super::{param, Init};
use crate::tensor::{DType, TensorType};
use crate::trace::{tag_scope, Value};

/// An embedding of `vocab` tokens in `dim` dimensions. Parameters: vocab · dim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Embedding {
    pub vocab: usize,
    pub dim: usize,
    /// The table's dtype (indices are always i64).
    pub dtype: DType,
    /// How the table starts (N(0, 1) by default, as in PyTorch).
    pub init: Init,
}

impl Embedding {
    /// An f32 table of `vocab` rows of width `dim`, drawn from N(0, 1).
    pub fn new(vocab: usize, dim: usize) -> Embedding {
        Embedding {
            vocab,
            dim,
            dtype: DType::F32,
            init: Init::Normal { std: 1.0 },
        }
    }

    /// The same layer with a table of this dtype.
    pub fn dtype(self, dtype: DType) -> Embedding {
        Embedding { dtype, ..self }
    }

    /// The rows at `indices` (i64, any shape S): a value of shape (S.., dim), under `tag`.
    /// An index outside 0..vocab is a kernel error naming it.
    #[track_caller]
    pub fn apply<R: Rng + ?Sized>(&self, indices: &Value, rng: &mut R, tag: &str) -> Value {
        let ty = TensorType::new(self.dtype, [self.vocab, self.dim]);
        let table = param(&format!("{tag}.table"), &ty, self.init, rng);
        let _tag = tag_scope(tag);
        table.take(indices)
    }
}
