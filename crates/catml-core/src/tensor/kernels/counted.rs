//! Elementwise passes that write a node's whole result and, when evaluation asks for the
//! result's non-finite count (`tensor::checked`), count it block by block right after writing
//! each block, while it is in cache, instead of leaving evaluation a pass of its own. The
//! operation must be elementwise: it is applied to blocks of the pieces the plain passes use.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{count_non_finite, for_each_piece, for_each_piece_at, for_each_piece_with};
use crate::tensor::alloc::{self, AllocError};
use crate::tensor::{checked, Array, Float};

/// Elements written and then counted at a time (16 KiB of f64: well inside L1).
const BLOCK: usize = 2048;

/// The fewest elements a result must have for these passes to count it: a smaller one is left
/// to evaluation's scan, which costs less than asking.
pub const COUNTED_MIN: usize = BLOCK;

/// Runs `pass(count)` for the node's result of `len` elements: with `count` adding up the
/// blocks' counts when evaluation asked for one (and the total reported), else with no
/// counting. A result smaller than [`COUNTED_MIN`] is left to evaluation's scan.
fn answering(len: usize, pass: impl FnOnce(Option<&AtomicUsize>)) {
    if len < COUNTED_MIN {
        pass(None)
    } else {
        counting(pass)
    }
}

/// Runs `write(found)` for a kernel writing its node's whole result: with `found` adding up
/// the counts of the pieces written when evaluation asked for one (the total is reported
/// once `write` returns), else `None`.
pub fn counting<R>(write: impl FnOnce(Option<&AtomicUsize>) -> R) -> R {
    match checked::asked() {
        Some(request) => {
            let found = AtomicUsize::new(0);
            let done = write(Some(&found));
            request.counted(found.into_inner());
            done
        }
        None => write(None),
    }
}

/// Adds the non-finite count of `written`, a piece of the result, to `found` (if counting).
pub fn tally<T: Float>(found: Option<&AtomicUsize>, written: &[T]) {
    if let Some(found) = found {
        add(found, count_non_finite(written));
    }
}

/// Adds `n`, the non-finite count of a piece of the result that its kernel worked out as it
/// wrote it, to `found` (if counting).
pub fn add_found(found: Option<&AtomicUsize>, n: usize) {
    if let Some(found) = found {
        add(found, n);
    }
}

fn add(found: &AtomicUsize, n: usize) {
    if n > 0 {
        found.fetch_add(n, Ordering::Relaxed);
    }
}

/// [`for_each_piece`] over a node's whole result, counted when asked.
pub fn for_each_result_piece<T: Float>(a: &mut [T], f: impl Fn(&mut [T]) + Sync) {
    answering(a.len(), |found| match found {
        None => for_each_piece(a, f),
        Some(found) => for_each_piece(a, |piece| {
            let n = piece.chunks_mut(BLOCK).map(|b| {
                f(b);
                count_non_finite(b)
            });
            add(found, n.sum());
        }),
    })
}

/// [`for_each_piece_with`] over a node's whole result `a`, counted when asked.
pub fn for_each_result_piece_with<T: Float, U: Sync>(
    a: &mut [T],
    b: &[U],
    f: impl Fn(&mut [T], &[U]) + Sync,
) {
    answering(a.len(), |found| match found {
        None => for_each_piece_with(a, b, f),
        Some(found) => for_each_piece_with(a, b, |piece, other| {
            let n = piece
                .chunks_mut(BLOCK)
                .zip(other.chunks(BLOCK))
                .map(|(x, y)| {
                    f(x, y);
                    count_non_finite(x)
                });
            add(found, n.sum());
        }),
    })
}

/// [`for_each_piece_at`] over a node's whole, uninitialised result, counted when asked; `f`
/// must write every element of the piece it is given.
pub fn for_each_result_piece_at<T: Float>(
    a: &mut [MaybeUninit<T>],
    f: impl Fn(&mut [MaybeUninit<T>], usize) + Sync,
) {
    answering(a.len(), |found| match found {
        None => for_each_piece_at(a, f),
        Some(found) => for_each_piece_at(a, |piece, at| {
            let n = piece.chunks_mut(BLOCK).enumerate().map(|(i, b)| {
                f(b, at + i * BLOCK);
                // SAFETY: `f` wrote every element of `b`.
                count_non_finite(unsafe { alloc::written(b) })
            });
            add(found, n.sum());
        }),
    })
}

/// `f(a, b)` elementwise on two arrays of one shape, into a new buffer written in pieces across
/// threads: a node's whole result, counted as written when evaluation asks.
pub fn zip_copy<T: Float>(
    a: &Array<T>,
    b: &Array<T>,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<Array<T>, AllocError> {
    debug_assert_eq!(a.shape(), b.shape());
    let n = a.len();
    let mut out = alloc::with_capacity(n)?;
    for_each_result_piece_at(&mut out.spare_capacity_mut()[..n], |d, at| {
        let (a, b) = (&a.data()[at..at + d.len()], &b.data()[at..at + d.len()]);
        for ((o, &x), &y) in d.iter_mut().zip(a).zip(b) {
            o.write(f(x, y));
        }
    });
    // SAFETY: the pieces cover all n elements, and each was written.
    unsafe { out.set_len(n) };
    Ok(Array::from_parts(a.shape().clone(), out))
}

/// A copy of `a` mapped in place by `f`, in pieces across threads, each copied a block at a
/// time and mapped while in cache: a node's whole result, counted as written when evaluation
/// asks. `f` maps every element of the block it is given on its own.
pub fn map_copy<T: Float>(
    a: &Array<T>,
    f: impl Fn(&mut [T]) + Sync,
) -> Result<Array<T>, AllocError> {
    let n = a.len();
    let mut out = alloc::with_capacity(n)?;
    for_each_result_piece_at(&mut out.spare_capacity_mut()[..n], |d, at| {
        for (i, d) in d.chunks_mut(BLOCK).enumerate() {
            let src = &a.data()[at + i * BLOCK..][..d.len()];
            for (o, &x) in d.iter_mut().zip(src) {
                o.write(x);
            }
            // SAFETY: every element of `d` was written just above.
            f(unsafe { alloc::written_mut(d) });
        }
    });
    // SAFETY: the pieces cover all n elements, and each was written.
    unsafe { out.set_len(n) };
    Ok(Array::from_parts(a.shape().clone(), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `pass` as a node's kernel asked for its count.
    fn asked(pass: impl FnOnce()) -> Option<usize> {
        checked::asking(pass).1
    }

    #[test]
    fn a_pass_counts_what_it_wrote_across_blocks_and_pieces() {
        // Long enough for several blocks and, with two threads, two pieces.
        let n = 5 * BLOCK + 7;
        let mut a: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let count = asked(|| {
            for_each_result_piece(&mut a, |d| {
                for v in d {
                    *v = if *v as usize % 1000 == 3 {
                        f64::NAN
                    } else {
                        *v * 2.0
                    };
                }
            })
        });
        assert_eq!(count, Some(n.div_ceil(1000)));
        assert_eq!(a[4], 8.0);
        assert!(a[1003].is_nan());
    }

    #[test]
    fn zipped_and_fresh_results_are_counted_and_written_whole() {
        let n = 3 * BLOCK + 1;
        let b: Vec<f32> = (0..n).map(|i| if i == n - 1 { 0.0 } else { 1.0 }).collect();
        let mut a = vec![1.0f32; n];
        let count = asked(|| {
            for_each_result_piece_with(&mut a, &b, |x, y| {
                for (x, &y) in x.iter_mut().zip(y) {
                    *x /= y;
                }
            })
        });
        assert_eq!(count, Some(1));
        assert_eq!(a[..n - 1], vec![1.0f32; n - 1][..]);
        let mut fresh = vec![MaybeUninit::<f32>::uninit(); n];
        let count = asked(|| {
            for_each_result_piece_at(&mut fresh, |d, at| {
                for (i, v) in d.iter_mut().enumerate() {
                    v.write(if at + i == BLOCK {
                        f32::INFINITY
                    } else {
                        (at + i) as f32
                    });
                }
            })
        });
        assert_eq!(count, Some(1));
        // SAFETY: the pass wrote every element.
        assert_eq!(
            unsafe { fresh[BLOCK + 1].assume_init() },
            (BLOCK + 1) as f32
        );
    }

    #[test]
    fn copies_are_written_whole_and_counted() {
        // Several blocks, and two pieces on two threads, with a tail.
        let n = 20 * BLOCK + 3;
        let a = Array::new([n], (0..n).map(|i| i as f64).collect()).unwrap();
        let b = Array::new([n], vec![2.0; n]).unwrap();
        let (zipped, count) = checked::asking(|| zip_copy(&a, &b, |x, y| x / (y - 2.0 + x)));
        let zipped = zipped.unwrap();
        assert_eq!(count, Some(1), "0 / 0 at element 0");
        assert_eq!(zipped.data()[n - 1], 1.0);
        let (mapped, count) =
            checked::asking(|| map_copy(&a, |d| d.iter_mut().for_each(|v| *v = (*v - 7.0).ln())));
        let mapped = mapped.unwrap();
        assert_eq!(count, Some(8), "ln of 0 and of negatives");
        assert_eq!(mapped.data()[n - 1], ((n - 8) as f64).ln());
        assert_eq!(a.data()[n - 1], (n - 1) as f64, "the operand is untouched");
    }

    #[test]
    fn unasked_and_small_passes_count_nothing() {
        let mut a = vec![f64::NAN; 10];
        for_each_result_piece(&mut a, |d| d.iter_mut().for_each(|v| *v = 1.0));
        assert_eq!(a, vec![1.0; 10]);
        let small = asked(|| for_each_result_piece(&mut a, |d| d.fill(f64::NAN)));
        assert_eq!(small, None, "left to the scan");
    }
}
