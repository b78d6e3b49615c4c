//! Fallible buffers: every result buffer a kernel makes comes from here, so running out of
//! memory is an [`AllocError`] that evaluation reports with the node, never an abort.
//!
//! ```
//! use catml_core::tensor::alloc;
//!
//! assert_eq!(&alloc::filled(3, 0.0f64).unwrap()[..], &[0.0; 3]);
//! // More elements than an address space holds: an error, not an abort.
//! assert!(alloc::filled(usize::MAX / 2, 0.0f64).is_err());
//! ```

use std::mem::MaybeUninit;

pub use super::elems::{Elems, Placement};

/// A buffer could not be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("could not allocate {bytes} bytes")]
pub struct AllocError {
    /// The size asked for (saturated at `u64::MAX` when it does not even fit a `usize`).
    pub bytes: u64,
}

fn error<T>(n: usize) -> AllocError {
    let bytes = (n as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    AllocError { bytes }
}

/// An empty vector with room for `n` elements, from the active
/// [`BufferPool`](super::BufferPool) when it holds a buffer for them, or a part of the slab it
/// shares between values living at other times.
pub fn with_capacity<T>(n: usize) -> Result<Elems<T>, AllocError> {
    if let Some(v) = super::pool::take(n) {
        return Ok(v);
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| error::<T>(n))?;
    Ok(v.into())
}

/// `n` copies of `value` (`vec![value; n]`, fallibly).
pub fn filled<T: Clone>(n: usize, value: T) -> Result<Elems<T>, AllocError> {
    let mut v = with_capacity(n)?;
    v.resize(n, value);
    Ok(v)
}

/// The items of an iterator that knows its length (`collect`, fallibly).
pub fn collect<T>(items: impl ExactSizeIterator<Item = T>) -> Result<Elems<T>, AllocError> {
    let mut v = with_capacity(items.len())?;
    v.extend(items);
    Ok(v)
}

/// The elements of a piece of spare capacity, once written.
///
/// # Safety
/// Every element of `piece` has been written.
pub unsafe fn written<T>(piece: &[MaybeUninit<T>]) -> &[T] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the caller vouches each was written.
    unsafe { &*(piece as *const [MaybeUninit<T>] as *const [T]) }
}

/// [`written`], mutably.
///
/// # Safety
/// Every element of `piece` has been written.
pub unsafe fn written_mut<T>(piece: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: as for `written`.
    unsafe { &mut *(piece as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// Initialised elements to write over, as spare room is written: the inverse of
/// [`written_mut`].
///
/// # Safety
/// Only initialised values are written through the result.
pub unsafe fn rewritable<T>(piece: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: as for `written`; the caller keeps every element initialised.
    unsafe { &mut *(piece as *mut [T] as *mut [MaybeUninit<T>]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_hold_what_was_asked() {
        assert_eq!(filled(4, 1.5f32).unwrap().into_vec(), vec![1.5f32; 4]);
        assert_eq!(
            collect([1i64, 2, 3].into_iter()).unwrap().into_vec(),
            vec![1, 2, 3]
        );
        let v = with_capacity::<f64>(10).unwrap();
        assert!(v.is_empty() && v.capacity() == 10);
    }

    #[test]
    fn impossible_sizes_are_errors_with_the_size() {
        let e = with_capacity::<f64>(usize::MAX / 16).unwrap_err();
        assert_eq!(e.bytes, (usize::MAX / 16) as u64 * 8);
        assert!(e.to_string().starts_with("could not allocate "));
        assert!(filled(usize::MAX, 0u8).is_err());
    }
}
