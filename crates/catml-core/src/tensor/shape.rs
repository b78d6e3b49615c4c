use std::fmt;

use serde::{Deserialize, Serialize};

use super::DType;

/// A shape: a list of positive dimensions; the empty shape is a scalar. Held inline up to rank
/// 6, so that making and cloning a value's shape allocates nothing.
#[derive(Debug, Eq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Shape(pub Strides);

/// The inline capacity of [`Strides`].
const INLINE_RANK: usize = 6;

impl Clone for Shape {
    /// The dimensions copied slot by slot into a fresh inline list: every value passed between
    /// nodes clones its shape, and `SmallVec`'s own `clone` (or a `memcpy` of unknown length)
    /// costs several times more for these few words.
    fn clone(&self) -> Shape {
        let dims = self.dims();
        if dims.len() > INLINE_RANK {
            return Shape(Strides::from_slice(dims));
        }
        let buf: [usize; INLINE_RANK] = std::array::from_fn(|i| dims.get(i).copied().unwrap_or(0));
        Shape(Strides::from_buf_and_len(buf, dims.len()))
    }
}

impl PartialEq for Shape {
    /// Compared element by element: shapes are short, and a `memcmp` call costs more.
    fn eq(&self, other: &Shape) -> bool {
        let (a, b) = (self.dims(), other.dims());
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
    }
}

impl std::hash::Hash for Shape {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.dims().hash(state);
    }
}

/// Row-major strides, or any per-dimension list a kernel makes per call: inline up to rank 6.
pub type Strides = smallvec::SmallVec<[usize; INLINE_RANK]>;

impl Shape {
    /// The largest element count a shape may have (a buffer of 8-byte elements stays addressable).
    pub const MAX_NUMEL: usize = isize::MAX as usize / 8;

    pub fn new(dims: impl Into<Vec<usize>>) -> Shape {
        Shape(Strides::from_vec(dims.into()))
    }

    pub fn scalar() -> Shape {
        Shape(Strides::new())
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// The number of elements, or `None` if a dimension is zero or the product overflows.
    pub fn checked_numel(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| {
            if d == 0 {
                None
            } else {
                acc.checked_mul(d).filter(|&n| n <= Shape::MAX_NUMEL)
            }
        })
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Strides {
        row_major(&self.0)
    }
}

/// Row-major strides of `dims`: the last is 1, each other the product of the sizes after it.
pub(crate) fn row_major(dims: &[usize]) -> Strides {
    let mut strides: Strides = smallvec::smallvec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    strides
}

/// Whether `perm` permutes the axes of a tensor of `rank` and keeps the last in place, so
/// that a matrix kernel reads or writes its rows as runs of consecutive elements.
pub fn keeps_last_axis(perm: &[usize], rank: usize) -> bool {
    is_permutation(perm, rank) && perm.last() == Some(&(rank.max(1) - 1))
}

/// Whether `perm` permutes the axes of a tensor of `rank` (at least 2) and puts its last axis
/// in one of the last two places, so that each matrix read through it has rows or columns of
/// consecutive elements: a transpose of the last two axes qualifies.
pub fn keeps_last_axis_in_matrix(perm: &[usize], rank: usize) -> bool {
    rank >= 2 && is_permutation(perm, rank) && perm[rank - 2..].contains(&(rank - 1))
}

fn is_permutation(perm: &[usize], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    perm.len() == rank
        && perm
            .iter()
            .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true))
}

/// The strides, in a row-major buffer of `dims`, of its axes permuted by `perm` (axis j of the
/// view is axis `perm[j]` of the buffer): how a permute is read in place.
pub(crate) fn read_through(dims: &[usize], perm: &[usize]) -> Strides {
    let stored = row_major(dims);
    perm.iter().map(|&p| stored[p]).collect()
}

/// The strides of the axes of `dims` in a row-major buffer holding them permuted by `perm`
/// (axis j of the buffer is axis `perm[j]` of `dims`): how a result is written permuted.
pub(crate) fn write_through(dims: &[usize], perm: &[usize]) -> Strides {
    let permuted: Strides = perm.iter().map(|&p| dims[p]).collect();
    let stored = row_major(&permuted);
    let mut strides: Strides = smallvec::smallvec![0; dims.len()];
    for (j, &p) in perm.iter().enumerate() {
        strides[p] = stored[j];
    }
    strides
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Shape {
        Shape::new(v)
    }
}

impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Shape {
        Shape(Strides::from_slice(v))
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Shape {
        Shape(Strides::from_slice(&v))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

/// The type of a value: dtype and shape (an object of the shape category).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorType {
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> TensorType {
        TensorType {
            dtype,
            shape: shape.into(),
        }
    }

    pub fn scalar(dtype: DType) -> TensorType {
        TensorType::new(dtype, Shape::scalar())
    }

    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Size in bytes of a dense buffer of this type.
    pub fn bytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType::new(dtype, self.shape.clone())
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}
