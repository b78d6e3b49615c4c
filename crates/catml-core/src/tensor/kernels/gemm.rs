//! Matrix products: `faer`'s product on strided operands (a transpose is read in place, never
//! copied), a product on several threads cut into row or column pieces of C, one
//! single-threaded call each, stacked products, and a plain loop for tiny ones; a product
//! writing a node's whole result counts its non-finite elements piece by piece when
//! evaluation asks (`tensor::checked`).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::count_non_finite;
use crate::tensor::alloc::{self, AllocError, Elems};
use crate::tensor::shape::{keeps_last_axis, read_through, row_major, write_through, Strides};
use crate::tensor::{Element, Float};

/// A matrix operand: a buffer read as (rows, cols) at any row and column strides, so that a
/// transpose, or a matrix of a permuted stack, is read in place.
#[derive(Clone, Copy)]
pub struct MatRef<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    /// Steps in `data` from one row, and from one column, to the next.
    row_stride: usize,
    col_stride: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// A row-major (r, c) buffer.
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef::strided(data, rows, cols, cols, 1)
    }

    /// The transpose of a row-major (r, c) buffer, read as (c, r) without copying.
    pub fn transpose_of(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef::new(data, rows, cols).transposed()
    }

    /// (rows, cols) with element (i, j) at `data[i * row_stride + j * col_stride]`.
    pub fn strided(
        data: &'a [T],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }

    /// This matrix transposed, in place.
    pub fn transposed(self) -> Self {
        MatRef::strided(
            self.data,
            self.cols,
            self.rows,
            self.col_stride,
            self.row_stride,
        )
    }

    /// (row stride, column stride) of the matrix in its buffer.
    fn strides(&self) -> (isize, isize) {
        (self.row_stride as isize, self.col_stride as isize)
    }

    fn at(&self, i: usize, j: usize) -> usize {
        i * self.row_stride + j * self.col_stride
    }

    /// Whether every element lies inside the buffer.
    fn fits(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let rows = (self.rows - 1).checked_mul(self.row_stride);
        let cols = (self.cols - 1).checked_mul(self.col_stride);
        let end = rows.zip(cols).and_then(|(r, c)| r.checked_add(c));
        end.is_some_and(|end| end < self.data.len())
    }
}

/// Where matrix `i` of a stack starts: `i` counted over the batch `dims` in row-major order,
/// each at its stride in `strides` (which may go on to the matrix axes).
fn batch_offset(i: usize, dims: &[usize], strides: &[usize]) -> usize {
    let (mut rest, mut at) = (i, 0);
    for (d, s) in dims.iter().zip(strides).rev() {
        at += (rest % d) * s;
        rest /= d;
    }
    at
}

/// A stack of matrices in one buffer, (batch..., rows, cols) at any strides: a row-major
/// stack, or one read through a permutation of its axes without copying it. Matrix i counts
/// the batch dims in row-major order.
#[derive(Clone)]
pub struct MatStack<'a, T> {
    data: &'a [T],
    dims: Strides,
    strides: Strides,
}

impl<'a, T> MatStack<'a, T> {
    /// A row-major buffer of `dims` (rank at least 2).
    pub fn new(data: &'a [T], dims: &[usize]) -> Self {
        MatStack {
            data,
            dims: Strides::from_slice(dims),
            strides: row_major(dims),
        }
    }

    /// `permute(buffer, perm)` for a row-major buffer of `stored` dims, read in place.
    pub fn permuted(data: &'a [T], stored: &[usize], perm: &[usize]) -> Self {
        MatStack {
            data,
            dims: perm.iter().map(|&p| stored[p]).collect(),
            strides: read_through(stored, perm),
        }
    }

    /// The stack's dims, as read.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Matrix `i` of the stack.
    pub fn matrix(&self, i: usize) -> MatRef<'a, T> {
        let r = self.dims.len();
        let at = batch_offset(i, &self.dims[..r - 2], &self.strides);
        let (rows, cols) = (self.dims[r - 2], self.dims[r - 1]);
        let (rs, cs) = (self.strides[r - 2], self.strides[r - 1]);
        MatRef::strided(&self.data[at.min(self.data.len())..], rows, cols, rs, cs)
    }
}

/// Below this many multiply-adds, a second thread costs more than it saves.
pub(super) const PARALLEL_GEMM_MIN: usize = 1 << 18;

/// Nor does it help when a dimension is this thin: a (256, 10) x (10, 512) product took twice
/// as long on two threads as on one.
const PARALLEL_GEMM_MIN_DIM: usize = 32;

/// At or below this many multiply-adds a plain loop beats the product's dispatch and packing.
const DIRECT_GEMM_MAX: usize = 256;

/// C = A B (+ C if `accumulate`), for row-major C of shape (m, n).
pub fn gemm_into<T: Float>(c: &mut [T], a: MatRef<'_, T>, b: MatRef<'_, T>, accumulate: bool) {
    gemm_into_counting(c, a, b, accumulate, None)
}

/// [`gemm_into`] for a kernel writing its node's whole result: when evaluation asks for the
/// result's non-finite count (`tensor::checked`), C's pieces are counted as they are written.
pub fn gemm_into_result<T: Float>(
    c: &mut [T],
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accumulate: bool,
) {
    super::counting(|counter| gemm_into_counting(c, a, b, accumulate, counter))
}

/// [`gemm()`] for a kernel whose node's whole result is C, counted as [`gemm_into_result`]
/// counts it.
pub fn gemm_result<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<Elems<T>, AllocError> {
    super::counting(|counter| gemm_new(a, b, counter))
}

/// [`gemm_into`], adding to `counter` (if given) how many elements of C are NaN or infinite:
/// each piece of C is counted by the thread that wrote it, while it is still in cache, instead
/// of in a pass of its own.
fn gemm_into_counting<T: Float>(
    c: &mut [T],
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accumulate: bool,
    counter: Option<&AtomicUsize>,
) {
    debug_assert_eq!(c.len(), a.rows * b.cols);
    let parallel = a.rows * b.cols * a.cols >= PARALLEL_GEMM_MIN;
    // SAFETY: `c` is an initialised buffer of m * n elements.
    unsafe { gemm_raw(c.as_mut_ptr(), b.cols, a, b, accumulate, parallel, counter) }
}

/// As [`gemm_into`], on the calling thread only: for callers that already split work across
/// threads (one convolution sample per task, say).
pub fn gemm_into_serial<T: Float>(
    c: &mut [T],
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accumulate: bool,
) {
    debug_assert_eq!(c.len(), a.rows * b.cols);
    // SAFETY: `c` is an initialised buffer of m * n elements.
    unsafe { gemm_raw(c.as_mut_ptr(), b.cols, a, b, accumulate, false, None) }
}

/// `count` products C_i = A_i B_i of equal shape (m, n), stacked in a new buffer and then
/// handed to `then(i, C_i)`; the products run one per task over the thread pool when there is
/// enough work, each on one thread. The buffer is written by the products, never zeroed first.
pub fn gemm_batched<'a, T: Float>(
    count: usize,
    (m, n): (usize, usize),
    operands: impl Fn(usize) -> (MatRef<'a, T>, MatRef<'a, T>) + Sync,
    then: impl Fn(usize, &mut [T]) + Sync,
) -> Result<Elems<T>, AllocError> {
    let block = m * n;
    // SAFETY: product i writes its own block, rows of n at stride n, and `then` reads that
    // block only after the product wrote it.
    unsafe {
        stacked(
            count,
            (m, n),
            (|i| i * block, n),
            operands,
            |i, c| then(i, std::slice::from_raw_parts_mut(c, block)),
            None,
        )
    }
}

/// [`gemm_batched`] with nothing after each product, for a kernel whose node's whole result is
/// the stack: when evaluation asks for its non-finite count (`tensor::checked`), each product
/// is counted by the thread that wrote it, right after writing it.
pub fn gemm_batched_result<'a, T: Float>(
    count: usize,
    (m, n): (usize, usize),
    operands: impl Fn(usize) -> (MatRef<'a, T>, MatRef<'a, T>) + Sync,
) -> Result<Elems<T>, AllocError> {
    let block = m * n;
    // SAFETY: product i writes its own block, rows of n at stride n.
    super::counting(|counter| unsafe {
        stacked(
            count,
            (m, n),
            (|i| i * block, n),
            operands,
            |_, _| {},
            counter,
        )
    })
}

/// The products C_i = A_i B_i of a stack, i over `batch` in row-major order, each (m, n),
/// written as the stack (batch..., m, n) permuted by `perm` (axis j of the result is axis
/// `perm[j]` of the stack), which keeps the last axis last: a product whose result is
/// permuted next writes it in place. The buffer is written by the products, never zeroed.
/// It is a node's whole result, counted as [`gemm_batched_result`] counts it.
pub fn gemm_batched_permuted<'a, T: Float>(
    batch: &[usize],
    (m, n): (usize, usize),
    perm: &[usize],
    operands: impl Fn(usize) -> (MatRef<'a, T>, MatRef<'a, T>) + Sync,
) -> Result<Elems<T>, AllocError> {
    let rank = batch.len() + 2;
    assert!(
        keeps_last_axis(perm, rank),
        "{perm:?} is not a permutation of {rank} axes keeping the last"
    );
    let mut dims = batch.to_vec();
    dims.extend([m, n]);
    let strides = write_through(&dims, perm);
    let place = |i: usize| batch_offset(i, batch, &strides);
    // SAFETY: `perm` is a permutation, so the products' elements, at the stack's strides
    // permuted, are the buffer's, each once; columns keep stride 1.
    super::counting(|counter| unsafe {
        stacked(
            batch.iter().product(),
            (m, n),
            (place, strides[rank - 2]),
            operands,
            |_, _| {},
            counter,
        )
    })
}

/// `count` products into one new buffer of `count` m n elements: product i's element (r, c)
/// at `place(i) + r * ldc + c`, each run on one thread when there is enough work, then
/// `then(i, at)` with `at` its first element; each product's non-finite elements are added
/// to `counter` (if given) before `then`.
///
/// # Safety
/// The products' elements are the buffer's, each exactly once, and `then` touches only its
/// own product's elements.
unsafe fn stacked<'a, T: Float>(
    count: usize,
    (m, n): (usize, usize),
    (place, ldc): (impl Fn(usize) -> usize + Sync, usize),
    operands: impl Fn(usize) -> (MatRef<'a, T>, MatRef<'a, T>) + Sync,
    then: impl Fn(usize, *mut T) + Sync,
    counter: Option<&AtomicUsize>,
) -> Result<Elems<T>, AllocError> {
    use rayon::prelude::*;
    let len = count * m * n;
    let mut out: Elems<T> = alloc::with_capacity(len)?;
    let c = SendPtr(out.as_mut_ptr());
    let product = |i: usize, parallel: bool| {
        let (a, b) = operands(i);
        debug_assert_eq!((a.rows, b.cols), (m, n));
        // SAFETY: as the caller promises, product i's elements lie inside the buffer's
        // capacity and no other product writes them; without `accumulate` every element is
        // written before `then` reads it.
        unsafe {
            let ci = c.get().add(place(i));
            gemm_raw(ci, ldc, a, b, false, parallel, counter);
            then(i, ci);
        }
    };
    let k = if count > 0 { operands(0).0.cols } else { 0 };
    if count > 1 && len * k >= PARALLEL_GEMM_MIN {
        (0..count).into_par_iter().for_each(|i| product(i, false));
    } else {
        (0..count).for_each(|i| product(i, m * n * k >= PARALLEL_GEMM_MIN));
    }
    // SAFETY: every element was written above.
    unsafe { out.set_len(len) };
    Ok(out)
}

/// A pointer handed to the tasks of one product, each writing its own part.
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);

impl<T> SendPtr<T> {
    /// The pointer (a method, so that closures capture the whole wrapper).
    fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: the tasks sharing one write disjoint parts of the buffer it points into.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

/// A matrix by its first element and strides.
#[derive(Clone, Copy)]
struct Strided<T> {
    ptr: *const T,
    rs: isize,
    cs: isize,
}

impl<T> Strided<T> {
    /// The same matrix read as elements of type `U`, which must be `T`.
    fn cast<U>(self) -> Strided<U> {
        Strided {
            ptr: self.ptr.cast(),
            rs: self.rs,
            cs: self.cs,
        }
    }
}

// SAFETY: read only, by tasks of one product while the operands are borrowed.
unsafe impl<T> Send for Strided<T> {}
unsafe impl<T> Sync for Strided<T> {}

/// How many threads share one product: the larger of m and n is cut into pieces of at least
/// `PARALLEL_GEMM_MIN_DIM`, one per thread, each a product of its own on one thread. Cutting
/// C beats the crate's own threads on thin products (1024 x 128 x 128 and the 128 x 1024 x 128
/// of a weight gradient), whose few blocks leave a thread waiting.
fn pieces(m: usize, k: usize, n: usize) -> usize {
    if m.min(n).min(k) < PARALLEL_GEMM_MIN_DIM {
        return 1;
    }
    rayon::current_num_threads().min(m.max(n) / PARALLEL_GEMM_MIN_DIM)
}

/// # Safety
/// `c` points to an (m, n) matrix of writable elements at row stride `ldc`, initialised if
/// `accumulate`.
unsafe fn gemm_raw<T: Float>(
    c: *mut T,
    ldc: usize,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accumulate: bool,
    parallel: bool,
    counter: Option<&AtomicUsize>,
) {
    use rayon::prelude::*;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    // Both paths below read the views unchecked, so they must lie inside their buffers.
    assert!(
        b.rows == k && a.fits() && b.fits() && ldc >= n,
        "matrix views of ({m}, {k}) and ({}, {n}) over buffers of {} and {}",
        b.rows,
        a.data.len(),
        b.data.len()
    );
    if m * n * k <= DIRECT_GEMM_MAX {
        let (pa, pb) = (a.data.as_ptr(), b.data.as_ptr());
        for i in 0..m {
            for j in 0..n {
                // a[i, t] and b[t, j]; the views lie inside their buffers (checked above).
                let mut acc = T::zero();
                for t in 0..k {
                    acc = acc + *pa.add(a.at(i, t)) * *pb.add(b.at(t, j));
                }
                let dst = c.add(i * ldc + j);
                dst.write(if accumulate { *dst + acc } else { acc });
            }
        }
        count_into(counter, c, ldc, m, n);
        return;
    }
    let (ars, acs) = a.strides();
    let (brs, bcs) = b.strides();
    let sa = Strided {
        ptr: a.data.as_ptr(),
        rs: ars,
        cs: acs,
    };
    let sb = Strided {
        ptr: b.data.as_ptr(),
        rs: brs,
        cs: bcs,
    };
    let parts = if parallel { pieces(m, k, n) } else { 1 };
    if parts < 2 {
        gemm_block(c, ldc, sa, sb, (m, k, n), accumulate);
        count_into(counter, c, ldc, m, n);
        return;
    }
    // Rows of A and C when m >= n, else columns of B and C: piece p starts at `at` and
    // spans `len`; C keeps its row stride.
    let along_m = m >= n;
    let whole = if along_m { m } else { n };
    let step = whole.div_ceil(parts);
    let c = SendPtr(c);
    (0..whole.div_ceil(step)).into_par_iter().for_each(|p| {
        let (at, len) = (p * step, step.min(whole - p * step));
        // SAFETY: each piece reads inside A and B and writes its own rows or columns of C.
        unsafe {
            if along_m {
                let ap = Strided {
                    ptr: sa.ptr.offset(at as isize * sa.rs),
                    ..sa
                };
                gemm_block(c.get().add(at * ldc), ldc, ap, sb, (len, k, n), accumulate);
                count_into(counter, c.get().add(at * ldc), ldc, len, n);
            } else {
                let bp = Strided {
                    ptr: sb.ptr.offset(at as isize * sb.cs),
                    ..sb
                };
                gemm_block(c.get().add(at), ldc, sa, bp, (m, k, len), accumulate);
                count_into(counter, c.get().add(at), ldc, m, len);
            }
        }
    });
}

/// One product on the calling thread, C of row stride `ldc`, by `faer`'s matrix product (its
/// AVX-512 kernels where the CPU has them, else AVX2 and FMA; chosen by the measurements in
/// BENCHMARKS.md, "faer for the matrix products").
///
/// # Safety
/// The views describe (m, k) and (k, n) matrices inside live buffers and `c` (m, n) writable
/// elements at row stride `ldc`, initialised if `accumulate`.
unsafe fn gemm_block<T: Float>(
    c: *mut T,
    ldc: usize,
    a: Strided<T>,
    b: Strided<T>,
    (m, k, n): (usize, usize, usize),
    accumulate: bool,
) {
    use std::any::TypeId;
    // `Float` is f32 or f64; the casts below are between a type and itself.
    let id = TypeId::of::<T>();
    let mkn = (m, k, n);
    if id == TypeId::of::<f32>() {
        faer_block::<f32>(c.cast(), ldc, a.cast(), b.cast(), mkn, accumulate);
    } else if id == TypeId::of::<f64>() {
        faer_block::<f64>(c.cast(), ldc, a.cast(), b.cast(), mkn, accumulate);
    } else {
        unreachable!(
            "a matrix product of {:?}, which is neither f32 nor f64",
            T::DTYPE
        );
    }
}

/// C = A B (+ C if `accumulate`) on this thread, for an element type `faer` knows.
///
/// # Safety
/// As `gemm_block`.
unsafe fn faer_block<E: faer::traits::ComplexField + num_traits::One>(
    c: *mut E,
    ldc: usize,
    a: Strided<E>,
    b: Strided<E>,
    (m, k, n): (usize, usize, usize),
    accumulate: bool,
) {
    use faer::{linalg::matmul::matmul, Accum, MatMut, MatRef, Par};
    // SAFETY: as the caller promises. `Replace` writes C without reading it.
    let dst = MatMut::from_raw_parts_mut(c, m, n, ldc as isize, 1);
    let lhs = MatRef::from_raw_parts(a.ptr, m, k, a.rs, a.cs);
    let rhs = MatRef::from_raw_parts(b.ptr, k, n, b.rs, b.cs);
    let beta = if accumulate {
        Accum::Add
    } else {
        Accum::Replace
    };
    matmul(dst, beta, lhs, rhs, E::one(), Par::Seq);
}

/// C = A B for floats.
pub fn gemm<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<Vec<T>, AllocError> {
    gemm_new(a, b, None).map(Elems::into_vec)
}

/// C = A B in a new buffer, counting C's non-finite elements into `counter` if given.
fn gemm_new<T: Float>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    counter: Option<&AtomicUsize>,
) -> Result<Elems<T>, AllocError> {
    let len = a.rows * b.cols;
    let mut c = alloc::with_capacity(len)?;
    let parallel = a.rows * b.cols * a.cols >= PARALLEL_GEMM_MIN;
    // SAFETY: the buffer has room for m * n elements, and without `accumulate` every one of
    // them is written and none is read.
    unsafe {
        gemm_raw(c.as_mut_ptr(), b.cols, a, b, false, parallel, counter);
        c.set_len(len);
    }
    Ok(c)
}

/// Adds to `counter`, if given, the non-finite elements of the (rows, cols) block at `c` of
/// row stride `ldc`.
///
/// # Safety
/// The block lies inside an initialised buffer.
unsafe fn count_into<T: Float>(
    counter: Option<&AtomicUsize>,
    c: *const T,
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    let Some(counter) = counter else {
        return;
    };
    let found: usize = if cols == ldc {
        count_non_finite(std::slice::from_raw_parts(c, rows * cols))
    } else {
        (0..rows)
            .map(|i| count_non_finite(std::slice::from_raw_parts(c.add(i * ldc), cols)))
            .sum()
    };
    if found > 0 {
        counter.fetch_add(found, Ordering::Relaxed);
    }
}

/// C = A B for any ring (used by exact rationals; floats go to `gemm`).
pub fn matmul_generic<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> Result<Elems<T>, AllocError> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let mut c = alloc::with_capacity(m * n)?;
    for i in 0..m {
        for j in 0..n {
            let mut acc = T::zero();
            for t in 0..k {
                acc = acc + a.data[a.at(i, t)].clone() * b.data[b.at(t, j)].clone();
            }
            c.push(acc);
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Integer-valued operands: every partial sum is exact, so any order of accumulation
    /// (pieces, blocks, threads) gives the generic loop's bits.
    fn whole_numbers(len: usize, modulus: usize) -> Vec<f64> {
        (0..len).map(|x| (x % modulus) as f64 - 2.0).collect()
    }

    #[test]
    fn products_cut_across_threads_match_the_generic_loop() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        // Cut along m (300 rows) and along n (300 columns), in uneven pieces.
        for (m, k, n) in [(300, 40, 64), (40, 64, 300)] {
            let (a, b) = (whole_numbers(m * k, 7), whole_numbers(k * n, 5));
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let ma = if ta {
                    MatRef::transpose_of(&a[..], k, m)
                } else {
                    MatRef::new(&a[..], m, k)
                };
                let mb = if tb {
                    MatRef::transpose_of(&b[..], n, k)
                } else {
                    MatRef::new(&b[..], k, n)
                };
                let want = matmul_generic(ma, mb).unwrap();
                pool.install(|| {
                    assert_eq!(pieces(m, k, n), 3);
                    let mut c = vec![1.0; m * n];
                    gemm_into(&mut c, ma, mb, true);
                    assert!(c.iter().zip(&want).all(|(c, w)| *c == w + 1.0));
                    assert_eq!(gemm(ma, mb).unwrap(), want);
                });
            }
        }
    }

    #[test]
    fn products_count_the_non_finite_elements_they_write() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        // Cut along m, along n, on one thread, and the direct loop of tiny products.
        for (m, k, n) in [(300, 40, 64), (40, 64, 300), (20, 8, 12), (3, 4, 5)] {
            let mut a = whole_numbers(m * k, 7);
            let b = whole_numbers(k * n, 5);
            // A NaN in row 1 of A spoils row 1 of C; an infinity in the last row of A, times
            // B's nonzero elements and plus their NaN, the last row.
            a[k] = f64::NAN;
            a[(m - 1) * k] = f64::INFINITY;
            let (ma, mb) = (MatRef::new(&a[..], m, k), MatRef::new(&b[..], k, n));
            pool.install(|| {
                let counted = |a, b| {
                    let counter = AtomicUsize::new(0);
                    let c = gemm_new(a, b, Some(&counter)).unwrap();
                    (c, counter.into_inner())
                };
                let (c, count) = counted(ma, mb);
                let want = c.iter().filter(|v| !v.is_finite()).count();
                assert!(want >= n, "{m}x{k}x{n}: row 1 at least");
                assert_eq!(count, want, "{m}x{k}x{n}");
                let mut acc = vec![0.5; m * n];
                let counter = AtomicUsize::new(0);
                gemm_into_counting(&mut acc, ma, mb, true, Some(&counter));
                assert_eq!(counter.into_inner(), want);
                let clean = MatRef::new(&b[..k * m.min(n)], m.min(n), k);
                assert_eq!(counted(clean, mb).1, 0);
            });
        }
    }

    #[test]
    fn batched_products_match_each_slice_and_hand_over_their_own_block() {
        let (m, k, n) = (64, 40, 48);
        for count in [1, 5] {
            let (a, b) = (
                whole_numbers(count * m * k, 9),
                whole_numbers(count * k * n, 4),
            );
            let slice = |i: usize| {
                (
                    MatRef::new(&a[i * m * k..(i + 1) * m * k], m, k),
                    MatRef::transpose_of(&b[i * k * n..(i + 1) * k * n], n, k),
                )
            };
            let shifted = |i: usize, c: &mut [f64]| c.iter_mut().for_each(|v| *v += i as f64);
            let got = gemm_batched(count, (m, n), slice, shifted).unwrap();
            for i in 0..count {
                let (x, y) = slice(i);
                let mut want = matmul_generic(x, y).unwrap();
                shifted(i, &mut want);
                assert_eq!(&got[i * m * n..(i + 1) * m * n], &want[..], "slice {i}");
            }
        }
    }

    #[test]
    fn permuted_stacks_are_read_and_written_in_place() {
        use crate::tensor::kernels::permute;
        use crate::tensor::Array;
        // A stored (2, 40, 3, 32) and read as (2, 3, 40, 32); B a row-major (2, 3, 32, 24)
        // stack, read transposed as well; the (2, 3, 40, 24) result written as (40, 3, 2, 24).
        let a = Array::new(vec![2, 40, 3, 32], whole_numbers(2 * 40 * 3 * 32, 9)).unwrap();
        let b = Array::new(vec![2, 3, 32, 24], whole_numbers(2 * 3 * 32 * 24, 5)).unwrap();
        let moved = permute(&a, &[0, 2, 1, 3]).unwrap();
        let read = MatStack::permuted(a.data(), a.dims(), &[0, 2, 1, 3]);
        assert_eq!(read.dims(), moved.dims());
        let copied = MatStack::new(moved.data(), moved.dims());
        let bs = MatStack::new(b.data(), b.dims());
        let want = gemm_batched(6, (40, 24), |i| (copied.matrix(i), bs.matrix(i)), |_, _| {});
        let want = Array::with_elems(vec![2, 3, 40, 24], want.unwrap()).unwrap();
        let perm = [2, 1, 0, 3];
        let got =
            gemm_batched_permuted(&[2, 3], (40, 24), &perm, |i| (read.matrix(i), bs.matrix(i)));
        assert_eq!(got.unwrap(), permute(&want, &perm).unwrap().data());
        // B^T read in place: the transpose of a (24, 32) matrix of a permuted stack.
        let bt = Array::new(vec![3, 2, 24, 32], whole_numbers(2 * 3 * 24 * 32, 7)).unwrap();
        let bt_read = MatStack::permuted(bt.data(), bt.dims(), &[1, 0, 2, 3]);
        let bt_moved = permute(&bt, &[1, 0, 2, 3]).unwrap();
        let bt_copied = MatStack::new(bt_moved.data(), bt_moved.dims());
        let product = |b: &MatStack<'_, f64>| {
            gemm_batched(
                6,
                (40, 24),
                |i| (read.matrix(i), b.matrix(i).transposed()),
                |_, _| {},
            )
        };
        assert_eq!(product(&bt_read).unwrap(), product(&bt_copied).unwrap());
    }

    #[test]
    fn gemm_matches_generic_with_transposes() {
        let a: Vec<f64> = (0..6).map(|x| x as f64).collect();
        let b: Vec<f64> = (0..12).map(|x| (x as f64) * 0.5 - 1.0).collect();
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let ma = if ta {
                MatRef::transpose_of(&a[..], 3, 2)
            } else {
                MatRef::new(&a[..], 2, 3)
            };
            let mb = if tb {
                MatRef::transpose_of(&b[..], 4, 3)
            } else {
                MatRef::new(&b[..], 3, 4)
            };
            assert_eq!(gemm(ma, mb).unwrap(), matmul_generic(ma, mb).unwrap());
        }
    }
}
