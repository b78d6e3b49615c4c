//! Elementwise passes that write a node's whole result and, when evaluation asks for the
//! result's non-finite count (`tensor::checked`), count it block by block right after writing
//! each block, while it is in cache, instead of leaving evaluation a pass of its own. The
//! operation must be elementwise: it is applied to blocks of the pieces the plain passes use.
//! The passes that write in place also count the value asked to be watched, where they write
//! over it or read it, each block just before it is written.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{count_non_finite, for_each_piece, for_each_piece_at, for_each_piece_with};
use crate::tensor::alloc::{self, AllocError};
use crate::tensor::checked::{self, Watched};
use crate::tensor::{Array, Float};

/// Elements written and then counted at a time (16 KiB of f64: well inside L1).
const BLOCK: usize = 2048;

/// The fewest elements a result must have for these passes to count it: a smaller one is left
/// to evaluation's scan, which costs less than asking.
pub const COUNTED_MIN: usize = BLOCK;

/// Runs `pass(count)` for the node's result of `len` elements: with `count` adding up the
/// blocks' counts when evaluation asked for one (and the total reported), else with no
/// counting. A result smaller than [`COUNTED_MIN`] is left to evaluation's scan.
fn answering(len: usize, pass: impl FnOnce(Option<&AtomicUsize>)) {
    answering_watching::<u8>(len, &[], |found, _| pass(found))
}

/// [`answering`], with `pass(count, watch)` also given, when evaluation asks to watch one of
/// the buffers starting at `read` (which the pass reads whole, in order), its position there
/// and a [`Watch`] to count it into.
fn answering_watching<T>(
    len: usize,
    read: &[*const T],
    pass: impl FnOnce(Option<&AtomicUsize>, Option<(usize, &Watch)>),
) {
    // A small result leaves the request open, unanswered.
    let request = (len >= COUNTED_MIN).then(checked::asked).flatten();
    let Some(request) = request else {
        return pass(None, None);
    };
    let found = AtomicUsize::new(0);
    let watch = Watch::new();
    let watched = read.iter().position(|&r| request.watches(r));
    pass(Some(&found), watched.map(|k| (k, &watch)));
    request.counted_watching(found.into_inner(), watched.map(|_| watch.found()));
}

/// The non-finite elements of a watched value, counted block by block across threads.
struct Watch {
    count: AtomicUsize,
    first: AtomicUsize,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            count: AtomicUsize::new(0),
            first: AtomicUsize::new(usize::MAX),
        }
    }

    /// Counts `block`, the watched value's elements from index `at`.
    fn tally<T: Float>(&self, block: &[T], at: usize) {
        let n = count_non_finite(block);
        if n > 0 {
            self.count.fetch_add(n, Ordering::Relaxed);
            let first = block.iter().position(|x| !x.is_finite()).unwrap_or(0);
            self.first.fetch_min(at + first, Ordering::Relaxed);
        }
    }

    fn found(self) -> Watched {
        let count = self.count.into_inner();
        let first = if count == 0 {
            0
        } else {
            self.first.into_inner()
        };
        Watched { count, first }
    }
}

/// The index at which `part`, a subslice of the slice at address `whole`, starts.
fn offset_in<T>(whole: usize, part: &[T]) -> usize {
    (part.as_ptr() as usize - whole) / std::mem::size_of::<T>().max(1)
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

/// [`for_each_piece`] over a node's whole result, written over the values in `a`; counted
/// when asked, and the values written over watched when asked.
pub fn for_each_result_piece<T: Float>(a: &mut [T], f: impl Fn(&mut [T]) + Sync) {
    let base = a.as_ptr() as usize;
    answering_watching(a.len(), &[a.as_ptr()], |found, watch| match found {
        None => for_each_piece(a, f),
        Some(found) => for_each_piece(a, |piece| {
            let at = offset_in(base, piece);
            let n = piece.chunks_mut(BLOCK).enumerate().map(|(i, b)| {
                if let Some((_, w)) = watch {
                    w.tally(b, at + i * BLOCK);
                }
                f(b);
                count_non_finite(b)
            });
            add(found, n.sum());
        }),
    })
}

/// [`for_each_piece_with`] over a node's whole result, written over the values in `a`;
/// counted when asked, and `a`'s values or `b` watched when asked.
pub fn for_each_result_piece_with<T: Float>(
    a: &mut [T],
    b: &[T],
    f: impl Fn(&mut [T], &[T]) + Sync,
) {
    let base = a.as_ptr() as usize;
    answering_watching(
        a.len(),
        &[a.as_ptr(), b.as_ptr()],
        |found, watch| match found {
            None => for_each_piece_with(a, b, f),
            Some(found) => for_each_piece_with(a, b, |piece, other| {
                let at = offset_in(base, piece);
                let blocks = piece.chunks_mut(BLOCK).zip(other.chunks(BLOCK));
                let n = blocks.enumerate().map(|(i, (x, y))| {
                    match watch {
                        Some((0, w)) => w.tally(x, at + i * BLOCK),
                        Some((_, w)) => w.tally(y, at + i * BLOCK),
                        None => {}
                    }
                    f(x, y);
                    count_non_finite(x)
                });
                add(found, n.sum());
            }),
        },
    )
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
    fn a_pass_counts_the_watched_value_it_writes_over_or_reads() {
        // Several blocks, and two pieces on two threads: the first non-finite element is in
        // the second piece's block after one in the first piece's.
        let n = 20 * BLOCK + 7;
        let with_holes = |at: &[usize]| {
            let mut v: Vec<f64> = (0..n).map(|i| i as f64).collect();
            at.iter().for_each(|&i| v[i] = f64::NAN);
            v
        };
        let mut a = with_holes(&[BLOCK + 3, 15 * BLOCK, 15 * BLOCK + 1]);
        let watched = Some(a.as_ptr() as usize);
        let (_, count, found) = checked::asking_watching(watched, || {
            for_each_result_piece(&mut a, |d| d.iter_mut().for_each(|v| *v = v.min(1.0)))
        });
        // min(NaN, 1) is 1: the result hides what the watched value held.
        assert_eq!(
            (count, found),
            (
                Some(0),
                Some(Watched {
                    count: 3,
                    first: BLOCK + 3
                })
            )
        );
        let b = with_holes(&[n - 1]);
        for watch_b in [true, false] {
            let mut a = vec![1.0; n];
            let (watched, want) = match watch_b {
                true => (b.as_ptr(), (n - 1, 1)),
                false => (a.as_ptr(), (0, 0)),
            };
            let (_, count, found) = checked::asking_watching(Some(watched as usize), || {
                for_each_result_piece_with(&mut a, &b, |x, y| {
                    x.iter_mut().zip(y).for_each(|(x, y)| *x = y * 0.0 + 1.0)
                })
            });
            let (first, bad) = want;
            assert_eq!(count, Some(1), "the result holds the NaN of b");
            assert_eq!(found, Some(Watched { count: bad, first }));
        }
        // Another buffer is not watched: the request is answered for the result alone.
        let mut a = vec![1.0; n];
        let other = [0.0f64; 4];
        let (_, count, found) = checked::asking_watching(Some(other.as_ptr() as usize), || {
            for_each_result_piece(&mut a, |d| d.fill(2.0))
        });
        assert_eq!((count, found), (Some(0), None));
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
