//! An array's elements: a vector the array owns (shared between clones), or memory another
//! owner lends it for reading, such as a NumPy array's buffer passed in without a copy.

use std::any::Any;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use super::elems::Elems;

/// Elements that stay readable, and unchanged, while `owner` is alive.
pub struct Lent<T> {
    ptr: *const T,
    len: usize,
    /// Keeps the memory alive; dropped after the last array that reads it.
    _owner: Box<dyn Any + Send + Sync>,
}

// SAFETY: a `Lent` only reads its elements, and its maker promised (in `Lent::new`) that no one
// writes them while it lives; `T` itself must be shareable.
unsafe impl<T: Sync> Send for Lent<T> {}
unsafe impl<T: Sync> Sync for Lent<T> {}

impl<T> Lent<T> {
    /// Lends `len` elements at `ptr`, kept alive by `owner`.
    ///
    /// # Safety
    /// `ptr` must be non-null, aligned for `T`, and point to `len` initialised elements that
    /// stay valid and are not written for as long as `owner` is alive.
    pub unsafe fn new(ptr: *const T, len: usize, owner: Box<dyn Any + Send + Sync>) -> Lent<T> {
        Lent {
            ptr,
            len,
            _owner: owner,
        }
    }

    fn as_slice(&self) -> &[T] {
        // SAFETY: the contract of `Lent::new`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The storage behind an `Array`.
pub(crate) enum Buffer<T> {
    /// Released by `Drop`, which hands the vector and its shared block to the active pool.
    Owned(ManuallyDrop<Arc<Elems<T>>>),
    Lent(Arc<Lent<T>>),
}

impl<T> Buffer<T> {
    /// `v`, owned; its shared block comes from the active pool when it holds one.
    pub(crate) fn owned(v: Elems<T>) -> Buffer<T> {
        Buffer::Owned(ManuallyDrop::new(super::pool::shared(v)))
    }
}

impl<T> Clone for Buffer<T> {
    fn clone(&self) -> Self {
        match self {
            Buffer::Owned(v) => Buffer::Owned(ManuallyDrop::new(Arc::clone(v))),
            Buffer::Lent(l) => Buffer::Lent(Arc::clone(l)),
        }
    }
}

impl<T: Clone> Buffer<T> {
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Buffer::Owned(v) => v,
            Buffer::Lent(l) => l.as_slice(),
        }
    }

    /// The elements for writing, when the buffer is owned and not shared.
    pub(crate) fn unique_mut(&mut self) -> Option<&mut [T]> {
        match self {
            Buffer::Owned(v) => Arc::get_mut(v).map(|v| v.as_mut_slice()),
            Buffer::Lent(_) => None,
        }
    }

    /// The elements as a vector, copied unless the buffer is owned and not shared.
    pub(crate) fn into_vec(mut self) -> Vec<T> {
        match &mut self {
            Buffer::Owned(v) => match Arc::get_mut(v) {
                Some(mine) => std::mem::take(mine).into_vec(),
                None => v.to_vec(),
            },
            Buffer::Lent(l) => l.as_slice().to_vec(),
        }
    }
}

impl<T> Drop for Buffer<T> {
    /// The last owner of a vector gives its buffer and block to the active pool, if any
    /// (`pool.rs`).
    fn drop(&mut self) {
        if let Buffer::Owned(v) = self {
            // SAFETY: `v` is not used again; this is the buffer's drop.
            super::pool::release(unsafe { ManuallyDrop::take(v) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{Array, TensorError};

    /// An array reading a boxed vector's memory in place, the box as the owner.
    fn lent(values: Vec<f64>, dims: &[usize]) -> Result<(Array<f64>, *const f64), TensorError> {
        let owner = Box::new(values);
        let (ptr, len) = (owner.as_ptr(), owner.len());
        // SAFETY: the vector moves into the Lent with its heap buffer unchanged, and nothing
        // writes it.
        let data = unsafe { Lent::new(ptr, len, owner) };
        Ok((Array::lent(dims.to_vec(), data)?, ptr))
    }

    #[test]
    fn a_lent_array_reads_in_place_and_copies_only_when_taken() {
        let (mut a, ptr) = lent(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
        assert!(a.is_lent());
        assert_eq!(a.data().as_ptr(), ptr);
        assert_eq!(a.data(), &[1.0, 2.0, 3.0, 4.0]);
        let b = a.reshaped([4].into());
        assert_eq!(b.data().as_ptr(), ptr, "a reshape shares the lent buffer");
        assert!(
            a.unique_data_mut().is_none(),
            "lent memory is never written"
        );
        assert_eq!(a, Array::new([2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap());
        let v = b.into_vec();
        assert_ne!(v.as_ptr(), ptr);
        assert_eq!(v, [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn a_lent_buffer_of_the_wrong_length_is_refused() {
        let e = lent(vec![1.0; 3], &[2, 2]).unwrap_err();
        assert!(
            matches!(
                e,
                TensorError::Length {
                    expected: 4,
                    found: 3,
                    ..
                }
            ),
            "{e}"
        );
    }
}
