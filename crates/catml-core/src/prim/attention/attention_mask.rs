//! Structural attention masks (docs/architectures.md): each query row attends to a fixed, nonempty
//! set of keys, and normalisation runs over that set only; no infinite constants are involved.
//!
//! Both masks CatML supports keep a prefix of the keys, so the allowed set of query row i in
//! batch entry b is {0, .., end(b, i) - 1}:
//! - `causal`: query i of tq sees keys j <= i + (tk - tq), aligned at the end of the key
//!   sequence (with tq = tk: j <= i);
//! - `key_lengths`: per batch entry b, keys j < key_lengths[b] are valid (padding after them).
//!
//! An empty allowed set would make the normaliser's denominator 0; it is a type error naming
//! the query row.

use crate::ir::{AttrReader, Attrs, TypeError};
use crate::tensor::{DType, Tensor};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttentionMask {
    pub causal: bool,
    pub key_lengths: Option<Vec<usize>>,
}

impl AttentionMask {
    /// Every key allowed.
    pub fn none() -> AttentionMask {
        AttentionMask::default()
    }

    pub fn causal() -> AttentionMask {
        AttentionMask {
            causal: true,
            key_lengths: None,
        }
    }

    pub fn with_key_lengths(mut self, lengths: Vec<usize>) -> AttentionMask {
        self.key_lengths = Some(lengths);
        self
    }

    /// Whether every key is allowed for every query.
    pub fn is_full(&self) -> bool {
        !self.causal && self.key_lengths.is_none()
    }

    /// One past the last allowed key of query row `i` in batch entry `b`.
    pub fn end(&self, b: usize, i: usize, tq: usize, tk: usize) -> usize {
        let mut end = tk;
        if self.causal {
            end = end.min((i + 1 + tk).saturating_sub(tq));
        }
        if let Some(l) = &self.key_lengths {
            end = end.min(l[b]);
        }
        end
    }

    /// Checks the mask against `batch` entries of `tq` queries and `tk` keys: one length per
    /// batch entry, each at most `tk`, and a nonempty allowed set for every query row.
    pub fn check(&self, batch: usize, tq: usize, tk: usize) -> Result<(), TypeError> {
        if let Some(l) = &self.key_lengths {
            if l.len() != batch {
                return Err(TypeError::attr(
                    "key_lengths",
                    format!(
                        "expected {batch} entries (one per batch entry), found {}",
                        l.len()
                    ),
                ));
            }
            if let Some(b) = l.iter().position(|&n| n > tk) {
                return Err(TypeError::attr(
                    "key_lengths",
                    format!(
                        "batch entry {b} has length {}, expected at most the {tk} keys",
                        l[b]
                    ),
                ));
            }
        }
        for b in 0..batch {
            // Allowed sets grow with i, so the first row is the one that can be empty.
            if self.end(b, 0, tq, tk) == 0 {
                let why = match &self.key_lengths {
                    Some(l) if l[b] == 0 => "key length 0".to_string(),
                    _ => format!("causal mask with {tq} queries and {tk} keys"),
                };
                let empty = (0..tq).filter(|&i| self.end(b, i, tq, tk) == 0).count();
                return Err(TypeError::Invalid(format!(
                    "attention mask: query row 0 of batch entry {b} has an empty allowed key set \
                     ({why}), expected at least one allowed key; {empty} of {tq} rows are empty"
                )));
            }
        }
        Ok(())
    }

    /// The mask as 0/1 values of shape (batch, tq, tk).
    pub fn matrix(&self, dtype: DType, batch: usize, tq: usize, tk: usize) -> Tensor {
        let mut data = Vec::with_capacity(batch * tq * tk);
        for b in 0..batch {
            for i in 0..tq {
                let end = self.end(b, i, tq, tk);
                data.extend((0..tk).map(|j| if j < end { 1.0 } else { 0.0 }));
            }
        }
        Tensor::from_f64s(dtype, [batch, tq, tk], data).expect("batch * tq * tk values")
    }

    /// Adds `causal` and `key_lengths` to a primitive's attributes (absent when unset).
    pub(crate) fn write(&self, a: &mut Attrs) {
        if self.causal {
            a.insert("causal".into(), true.into());
        }
        if let Some(l) = &self.key_lengths {
            a.insert("key_lengths".into(), l.clone().into());
        }
    }

    pub(crate) fn read<'a>(a: &mut AttrReader<'a>) -> Result<AttentionMask, TypeError> {
        let causal = a.flag("causal")?;
        let key_lengths = a.opt_usize_list("key_lengths")?;
        Ok(AttentionMask {
            causal,
            key_lengths,
        })
    }
}

impl AttentionMask {
    /// A random mask for `batch` entries of `tq` queries and `tk` keys, for drawing rules:
    /// causal (when tq <= tk leaves every row a key), key lengths in 1..=tk, both or none.
    pub(crate) fn draw(d: &mut dyn crate::ir::Draw, batch: usize, tq: usize, tk: usize) -> Self {
        let causal = tq <= tk && d.chance(0.5);
        let mut m = if causal {
            AttentionMask::causal()
        } else {
            AttentionMask::none()
        };
        if d.chance(0.5) {
            let lengths = (0..batch).map(|_| d.int(1, tk)).collect();
            m = m.with_key_lengths(lengths);
        }
        m
    }
}
