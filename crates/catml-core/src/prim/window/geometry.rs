//! Sliding-window geometry shared by convolution and pooling, and the attributes that describe
//! it. Along one spatial axis, with input size L, kernel K, stride s, padding (lo, hi) and
//! dilation d, output o reads input position o·s + k·d − lo at tap k (padding where that falls
//! outside 0..L), and the output size is ⌊(L + lo + hi − d(K − 1) − 1) / s⌋ + 1.
//!
//! 1-D operations are 2-D ones whose H axis is trivial (size 1, kernel 1, stride 1, no padding),
//! so kernels and lowerings are written once for NCHW.

use serde_json::Value;

use crate::ir::{AttrReader, Attrs, TypeError};

/// One spatial axis of a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axis {
    pub size: usize,
    pub kernel: usize,
    pub stride: usize,
    pub lo: usize,
    pub hi: usize,
    pub dilation: usize,
}

impl Axis {
    /// The axis of a 1-D operation's missing H dimension.
    pub const TRIVIAL: Axis = Axis {
        size: 1,
        kernel: 1,
        stride: 1,
        lo: 0,
        hi: 0,
        dilation: 1,
    };

    pub fn padded(&self) -> usize {
        self.size + self.lo + self.hi
    }

    /// d(K − 1) + 1: how many padded positions one window spans.
    pub fn extent(&self) -> usize {
        self.dilation * (self.kernel - 1) + 1
    }

    /// The output size; the axis must have passed [`check_axis`].
    pub fn out(&self) -> usize {
        (self.padded() - self.extent()) / self.stride + 1
    }

    /// The input position read by output `o` at tap `k`, or `None` in the padding.
    pub fn source(&self, o: usize, k: usize) -> Option<usize> {
        (o * self.stride + k * self.dilation)
            .checked_sub(self.lo)
            .filter(|&i| i < self.size)
    }

    /// The output that reads input position `i` at tap `k`, if one does (the transpose of
    /// [`source`](Self::source)).
    pub fn target(&self, i: usize, k: usize) -> Option<usize> {
        let q = (i + self.lo).checked_sub(k * self.dilation)?;
        (q % self.stride == 0 && q / self.stride < self.out()).then_some(q / self.stride)
    }

    /// The outputs [lo, hi) whose tap `k` reads real input (not padding).
    pub fn valid_outputs(&self, k: usize) -> (usize, usize) {
        let offset = k * self.dilation;
        let s = self.stride;
        let lo = self.lo.saturating_sub(offset).div_ceil(s);
        let hi = (self.size + self.lo).saturating_sub(offset).div_ceil(s);
        let hi = hi.min(self.out());
        (lo.min(hi), hi)
    }
}

/// Checks that the attributes are positive and the dilated kernel fits the padded input.
pub fn check_axis(axis: &Axis, name: &str) -> Result<(), TypeError> {
    for (key, v) in [
        ("kernel", axis.kernel),
        ("stride", axis.stride),
        ("dilation", axis.dilation),
    ] {
        if v == 0 {
            return Err(TypeError::attr(
                key,
                format!("must be positive on axis {name}, found 0"),
            ));
        }
    }
    if axis.extent() > axis.padded() {
        return Err(TypeError::Invalid(format!(
            "kernel extent {} (kernel {}, dilation {}) is larger than the padded input {} \
             (size {} + padding {} + {}) on axis {name}",
            axis.extent(),
            axis.kernel,
            axis.dilation,
            axis.padded(),
            axis.size,
            axis.lo,
            axis.hi
        )));
    }
    Ok(())
}

/// The names of the spatial axes of a rank-`rank` operation, last `rank` of (H, W).
pub fn axis_names(rank: usize) -> &'static [&'static str] {
    &["H", "W"][2 - rank..]
}

/// Reads `key` as a list of `rank` positive-or-zero integers, or `default` when absent.
pub fn read_list<'a>(
    r: &mut AttrReader<'a>,
    key: &'a str,
    rank: usize,
    default: Option<usize>,
) -> Result<Vec<usize>, TypeError> {
    let list = match (r.opt_usize_list(key)?, default) {
        (Some(list), _) => list,
        (None, Some(d)) => vec![d; rank],
        (None, None) => return Err(TypeError::attr(key, "missing")),
    };
    if list.len() != rank {
        return Err(TypeError::attr(
            key,
            format!("expected {rank} entries, found {}", list.len()),
        ));
    }
    Ok(list)
}

/// Reads `padding` as a list of `rank` pairs [before, after]; absent means no padding.
pub fn read_padding<'a>(r: &mut AttrReader<'a>, rank: usize) -> Result<Vec<[usize; 2]>, TypeError> {
    let Some(v) = r.get("padding") else {
        return Ok(vec![[0, 0]; rank]);
    };
    let bad = || {
        TypeError::attr(
            "padding",
            format!("expected {rank} pairs [before, after] of non-negative integers, found {v}"),
        )
    };
    let items = v.as_array().ok_or_else(bad)?;
    if items.len() != rank {
        return Err(bad());
    }
    items
        .iter()
        .map(|p| match p.as_array().map(|a| a.as_slice()) {
            Some([a, b]) => match (a.as_u64(), b.as_u64()) {
                (Some(a), Some(b)) => Ok([a as usize, b as usize]),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        })
        .collect()
}

/// `padding` as JSON pairs.
pub fn padding_json(padding: &[[usize; 2]]) -> Value {
    Value::Array(padding.iter().map(|p| p.to_vec().into()).collect())
}

/// Reads an optional extra size list (`input_size`, `kernel_size`) of `rank` entries.
pub fn read_size<'a>(
    r: &mut AttrReader<'a>,
    key: &'a str,
    rank: usize,
) -> Result<[usize; 2], TypeError> {
    let list = read_list(r, key, rank, None)?;
    Ok(widen(&list, 1))
}

/// A per-axis list of length 1 or 2 as (H, W), filling a missing H with `fill`.
pub fn widen<T: Copy>(list: &[T], fill: T) -> [T; 2] {
    match list {
        [w] => [fill, *w],
        [h, w] => [*h, *w],
        _ => unreachable!("spatial rank is 1 or 2"),
    }
}

/// The last `rank` entries of an (H, W) pair.
pub fn narrow<T: Copy>(pair: [T; 2], rank: usize) -> Vec<T> {
    pair[2 - rank..].to_vec()
}

/// Inserts a size list attribute (for the transposes' `input_size` / `kernel_size`).
pub fn insert_size(attrs: &mut Attrs, key: &str, size: [usize; 2], rank: usize) {
    attrs.insert(key.to_string(), narrow(size, rank).into());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(size: usize, kernel: usize, stride: usize, lo: usize, hi: usize, d: usize) -> Axis {
        Axis {
            size,
            kernel,
            stride,
            lo,
            hi,
            dilation: d,
        }
    }

    #[test]
    fn output_size_follows_the_formula() {
        // (5 + 1 + 1 - 2*(3-1) - 1) / 2 + 1 = 2
        assert_eq!(axis(5, 3, 2, 1, 1, 2).out(), 2);
        assert_eq!(axis(32, 3, 1, 1, 1, 1).out(), 32);
    }

    #[test]
    fn source_and_target_are_inverse() {
        let a = axis(7, 3, 2, 2, 1, 2);
        for o in 0..a.out() {
            for k in 0..a.kernel {
                if let Some(i) = a.source(o, k) {
                    assert_eq!(a.target(i, k), Some(o));
                }
            }
        }
        for i in 0..a.size {
            for k in 0..a.kernel {
                if let Some(o) = a.target(i, k) {
                    assert_eq!(a.source(o, k), Some(i));
                }
            }
        }
    }

    #[test]
    fn valid_outputs_are_exactly_the_non_padding_reads() {
        for a in [
            axis(7, 3, 2, 2, 1, 2),
            axis(3, 2, 3, 2, 2, 1),
            axis(4, 1, 1, 0, 0, 1),
        ] {
            for k in 0..a.kernel {
                let (lo, hi) = a.valid_outputs(k);
                let expected: Vec<usize> =
                    (0..a.out()).filter(|&o| a.source(o, k).is_some()).collect();
                assert_eq!((lo..hi).collect::<Vec<_>>(), expected, "{a:?} tap {k}");
            }
        }
    }
}
