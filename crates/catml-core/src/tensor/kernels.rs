//! Kernels, generic over the element type where the operation is a ring or index operation, so
//! f32, f64, i64 and exact rationals share one implementation; GEMM goes to the `gemm` crate.

use std::mem::MaybeUninit;

use std::sync::atomic::{AtomicUsize, Ordering};

use super::alloc::{self, AllocError};
use super::shape::{row_major, Strides};
use super::{Array, Element, Float, Shape};

/// Elementwise passes over at least this many elements are split across the thread pool (the
/// one the GEMM threads come from); below it the hand-off costs more than it saves.
const PARALLEL_ELEMENTWISE_MIN: usize = 1 << 15;

/// `f(piece)` over consecutive pieces of `a`, one per thread when `a` is large.
pub fn for_each_piece<T: Send>(a: &mut [T], f: impl Fn(&mut [T]) + Sync) {
    use rayon::prelude::*;
    // The length first: asking rayon for its thread count costs more than a tiny pass.
    if a.len() < PARALLEL_ELEMENTWISE_MIN || rayon::current_num_threads() < 2 {
        return f(a);
    }
    a.par_chunks_mut(a.len().div_ceil(rayon::current_num_threads()))
        .for_each(&f);
}

/// `f(piece, offset of the piece in a)` over consecutive pieces of `a`, one per thread when
/// `a` is large.
pub fn for_each_piece_at<T: Send>(a: &mut [T], f: impl Fn(&mut [T], usize) + Sync) {
    use rayon::prelude::*;
    if a.len() < PARALLEL_ELEMENTWISE_MIN || rayon::current_num_threads() < 2 {
        return f(a, 0);
    }
    let piece = a.len().div_ceil(rayon::current_num_threads());
    a.par_chunks_mut(piece)
        .enumerate()
        .for_each(|(i, x)| f(x, i * piece));
}

/// `f(piece of a, matching piece of b)` over consecutive pieces of two equal-length slices,
/// one per thread when they are large.
pub fn for_each_piece_with<T: Send, U: Sync>(
    a: &mut [T],
    b: &[U],
    f: impl Fn(&mut [T], &[U]) + Sync,
) {
    use rayon::prelude::*;
    debug_assert_eq!(a.len(), b.len());
    if a.len() < PARALLEL_ELEMENTWISE_MIN || rayon::current_num_threads() < 2 {
        return f(a, b);
    }
    let piece = a.len().div_ceil(rayon::current_num_threads());
    a.par_chunks_mut(piece)
        .zip(b.par_chunks(piece))
        .for_each(|(x, y)| f(x, y));
}

/// Elementwise f(a, b) over equal shapes.
pub fn zip_with<T: Element, U: Element>(
    a: &Array<T>,
    b: &Array<T>,
    f: impl Fn(T, T) -> U,
) -> Result<Array<U>, AllocError> {
    debug_assert_eq!(a.shape(), b.shape());
    let data = alloc::collect(
        a.data()
            .iter()
            .zip(b.data())
            .map(|(x, y)| f(x.clone(), y.clone())),
    )?;
    Ok(Array::from_parts(a.shape().clone(), data))
}

/// Elementwise f(a) for copyable elements (the loop the compiler vectorises).
pub fn map_copy<T: Float>(a: &Array<T>, f: impl Fn(T) -> T) -> Result<Array<T>, AllocError> {
    let data = alloc::collect(a.data().iter().map(|&x| f(x)))?;
    Ok(Array::from_parts(a.shape().clone(), data))
}

/// Elementwise f(a, b) for copyable elements.
pub fn zip_copy<T: Float>(
    a: &Array<T>,
    b: &Array<T>,
    f: impl Fn(T, T) -> T,
) -> Result<Array<T>, AllocError> {
    debug_assert_eq!(a.shape(), b.shape());
    let data = alloc::collect(a.data().iter().zip(b.data()).map(|(&x, &y)| f(x, y)))?;
    Ok(Array::from_parts(a.shape().clone(), data))
}

/// Merges adjacent dimensions that both stride vectors traverse as one run (and drops unit
/// dimensions), so the innermost loop is as long as possible: dims i and i + 1 merge when
/// s[i] = s[i + 1] · dims[i + 1] for both stride vectors. Never empty.
fn coalesce(dims: &[usize], sa: &[usize], sb: &[usize]) -> (Strides, Strides, Strides) {
    let (mut d, mut a, mut b) = (Strides::new(), Strides::new(), Strides::new());
    for i in 0..dims.len() {
        if dims[i] == 1 {
            continue;
        }
        if let (Some(ld), Some(la), Some(lb)) = (d.last_mut(), a.last_mut(), b.last_mut()) {
            if *la == sa[i] * dims[i] && *lb == sb[i] * dims[i] {
                *ld *= dims[i];
                *la = sa[i];
                *lb = sb[i];
                continue;
            }
        }
        d.push(dims[i]);
        a.push(sa[i]);
        b.push(sb[i]);
    }
    if d.is_empty() {
        // A single element: any stride reads it; 1 keeps both walks' runs contiguous.
        let one: Strides = smallvec::smallvec![1];
        return (one.clone(), one.clone(), one);
    }
    (d, a, b)
}

/// Visits the rows (all but the last, innermost dimension) of `dims` in row-major order,
/// passing the two offsets of each row's start under two stride vectors. `dims` is not empty.
fn for_each_row(dims: &[usize], sa: &[usize], sb: &[usize], mut f: impl FnMut(usize, usize)) {
    let outer = dims.len() - 1;
    let mut idx: Strides = smallvec::smallvec![0; outer];
    let (mut oa, mut ob) = (0usize, 0usize);
    loop {
        f(oa, ob);
        // Odometer step over the outer dimensions.
        let mut d = outer;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < dims[d] {
                break;
            }
            oa -= sa[d] * dims[d];
            ob -= sb[d] * dims[d];
            idx[d] = 0;
        }
    }
}

/// Row offsets under strides `sa` of `count` consecutive rows (all but the innermost
/// dimension of `dims`) from row `first` on, in row-major order.
fn for_rows(dims: &[usize], sa: &[usize], first: usize, count: usize, mut f: impl FnMut(usize)) {
    if count == 0 {
        return;
    }
    let outer = dims.len() - 1;
    let mut idx: Strides = smallvec::smallvec![0; outer];
    let (mut o, mut r) = (0usize, first);
    for d in (0..outer).rev() {
        idx[d] = r % dims[d];
        r /= dims[d];
        o += idx[d] * sa[d];
    }
    for _ in 0..count {
        f(o);
        // Odometer step; past the last row it wraps, unread.
        for d in (0..outer).rev() {
            idx[d] += 1;
            o += sa[d];
            if idx[d] < dims[d] {
                break;
            }
            o -= sa[d] * dims[d];
            idx[d] = 0;
        }
    }
}

/// Copies `src` into a new array of shape `dims`, reading element `sum_i idx_i * strides[i]`
/// (a stride of 0 repeats: broadcasting; permuted strides transpose). Large results are copied
/// in pieces, one per thread.
pub fn strided_copy<T: Element>(
    src: &[T],
    dims: &[usize],
    strides: &[usize],
) -> Result<Vec<T>, AllocError> {
    use rayon::prelude::*;
    let n: usize = dims.iter().product();
    let mut out = alloc::with_capacity(n)?;
    if n == 0 {
        return Ok(out);
    }
    let unit = row_major(dims);
    let (d, s, _) = coalesce(dims, strides, &unit);
    let (inner, step) = (d[d.len() - 1], s[s.len() - 1]);
    // Elements from `first` on into `piece`, which they fill; a piece may start and end
    // inside a row.
    let copy = |piece: &mut [MaybeUninit<T>], first: usize| {
        let (mut at, mut col) = (0, first % inner);
        let rows = (col + piece.len()).div_ceil(inner);
        for_rows(&d, &s, first / inner, rows, |o| {
            let len = (inner - col).min(piece.len() - at);
            let run = &mut piece[at..at + len];
            let o = o + col * step;
            match step {
                0 => run.iter_mut().for_each(|x| {
                    x.write(src[o].clone());
                }),
                1 => run.iter_mut().zip(&src[o..o + len]).for_each(|(x, v)| {
                    x.write(v.clone());
                }),
                _ => run.iter_mut().enumerate().for_each(|(i, x)| {
                    x.write(src[o + i * step].clone());
                }),
            }
            (at, col) = (at + len, 0);
        });
    };
    let spare = &mut out.spare_capacity_mut()[..n];
    if n < PARALLEL_ELEMENTWISE_MIN || rayon::current_num_threads() < 2 {
        copy(spare, 0);
    } else {
        let piece = n.div_ceil(rayon::current_num_threads());
        spare
            .par_chunks_mut(piece)
            .enumerate()
            .for_each(|(i, p)| copy(p, i * piece));
    }
    // SAFETY: the pieces cover all n elements and every element of each is written above.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// Axis permutation: result dim i is operand dim `perm[i]`.
pub fn permute<T: Element>(a: &Array<T>, perm: &[usize]) -> Result<Array<T>, AllocError> {
    let src_strides = a.shape().strides();
    let dims: Vec<usize> = perm.iter().map(|&p| a.dims()[p]).collect();
    let strides: Strides = perm.iter().map(|&p| src_strides[p]).collect();
    let data = strided_copy(a.data(), &dims, &strides)?;
    Ok(Array::from_parts(Shape::new(dims), data))
}

/// broadcast_in_dim: operand dim i goes to result dim `dims[i]` (sizes equal or 1).
pub fn broadcast<T: Element>(
    a: &Array<T>,
    shape: &Shape,
    dims_map: &[usize],
) -> Result<Array<T>, AllocError> {
    let src_strides = a.shape().strides();
    let mut strides: Strides = smallvec::smallvec![0; shape.rank()];
    for (i, &d) in dims_map.iter().enumerate() {
        if a.dims()[i] != 1 {
            strides[d] = src_strides[i];
        }
    }
    let data = strided_copy(a.data(), shape.dims(), &strides)?;
    Ok(Array::from_parts(shape.clone(), data))
}

/// Sum over the given (sorted, distinct) axes, which are removed from the shape.
pub fn sum_axes<T: Element>(a: &Array<T>, axes: &[usize]) -> Result<Array<T>, AllocError> {
    let dims = a.dims();
    let out_shape = Shape(
        (0..dims.len())
            .filter(|i| !axes.contains(i))
            .map(|i| dims[i])
            .collect(),
    );
    let out_strides = out_shape.strides();
    // Stride of each input dim in the output (0 on reduced axes).
    let mut strides: Strides = smallvec::smallvec![0; dims.len()];
    let mut k = 0;
    for (i, s) in strides.iter_mut().enumerate() {
        if !axes.contains(&i) {
            *s = out_strides[k];
            k += 1;
        }
    }
    let mut out = alloc::filled(out_shape.numel(), T::zero())?;
    let unit = a.shape().strides();
    let src = a.data();
    // After coalescing, each row is a contiguous input run that either sums into one output
    // (a reduced innermost axis, see `sum_run`) or adds onto a contiguous output run.
    let (d, so, si) = coalesce(dims, &strides, &unit);
    let (inner, step) = (d[d.len() - 1], so[so.len() - 1]);
    debug_assert!(step <= 1 && si[si.len() - 1] == 1);
    for_each_row(&d, &so, &si, |o, i| {
        let run = &src[i..i + inner];
        if step == 0 {
            out[o] = sum_run(out[o].clone(), run);
        } else {
            for (y, v) in out[o..o + inner].iter_mut().zip(run) {
                *y = y.clone() + v.clone();
            }
        }
    });
    Ok(Array::from_parts(out_shape, out))
}

/// init + Σ run. Runs of 16 or more go through 8 interleaved partial sums combined pairwise:
/// the additions are independent, so they pipeline (and vectorise for floats), and the
/// rounding error bound grows with n/8 + 3 instead of n. Shorter runs add in order.
fn sum_run<T: Element>(init: T, run: &[T]) -> T {
    const LANES: usize = 8;
    if run.len() < 2 * LANES {
        return run.iter().fold(init, |acc, v| acc + v.clone());
    }
    let mut lanes: [T; LANES] = std::array::from_fn(|_| T::zero());
    let chunks = run.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, v) in lanes.iter_mut().zip(chunk) {
            *a = a.clone() + v.clone();
        }
    }
    let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
    let total = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));
    tail.iter().fold(init + total, |acc, v| acc + v.clone())
}

/// Splits `dims` around `axis` into (outer, axis length, inner) element counts.
pub fn split_at_axis(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = dims[..axis].iter().product();
    let inner = dims[axis + 1..].iter().product();
    (outer, dims[axis], inner)
}

/// Maximal runs of consecutive indices, as (position in `indices`, first index, length): the
/// slices a gather copies (or a scatter adds) as one block of length × inner elements.
fn runs(indices: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize)> = Vec::new();
    for (j, &i) in indices.iter().enumerate() {
        match out.last_mut() {
            Some((_, first, n)) if *first + *n == i => *n += 1,
            _ => out.push((j, i, 1)),
        }
    }
    out
}

/// Selects `indices` along `axis` (repeats allowed).
pub fn gather<T: Element>(
    a: &Array<T>,
    axis: usize,
    indices: &[usize],
) -> Result<Array<T>, AllocError> {
    let (outer, len, inner) = split_at_axis(a.dims(), axis);
    let mut out = alloc::with_capacity(outer * indices.len() * inner)?;
    let src = a.data();
    let runs = runs(indices);
    for o in 0..outer {
        for &(_, i, n) in &runs {
            let start = (o * len + i) * inner;
            out.extend_from_slice(&src[start..start + n * inner]);
        }
    }
    let mut dims = a.dims().to_vec();
    dims[axis] = indices.len();
    Ok(Array::from_parts(Shape::new(dims), out))
}

/// The transpose of `gather`: `out[.., k, ..]` = sum over j with `indices[j] = k` of `a[.., j, ..]`.
pub fn scatter_add<T: Element>(
    a: &Array<T>,
    axis: usize,
    indices: &[usize],
    size: usize,
) -> Result<Array<T>, AllocError> {
    let (outer, len, inner) = split_at_axis(a.dims(), axis);
    debug_assert_eq!(len, indices.len());
    let mut out = alloc::filled(outer * size * inner, T::zero())?;
    let src = a.data();
    let runs = runs(indices);
    for o in 0..outer {
        for &(j, k, n) in &runs {
            let s = (o * len + j) * inner;
            let d = (o * size + k) * inner;
            for (t, v) in out[d..d + n * inner].iter_mut().zip(&src[s..s + n * inner]) {
                *t = t.clone() + v.clone();
            }
        }
    }
    let mut dims = a.dims().to_vec();
    dims[axis] = size;
    Ok(Array::from_parts(Shape::new(dims), out))
}

/// Concatenation along `axis`.
pub fn concat<T: Element>(parts: &[&Array<T>], axis: usize) -> Result<Array<T>, AllocError> {
    let mut dims = parts[0].dims().to_vec();
    dims[axis] = parts.iter().map(|p| p.dims()[axis]).sum();
    let (outer, _, _) = split_at_axis(&dims, axis);
    let mut out = alloc::with_capacity(dims.iter().product())?;
    for o in 0..outer {
        for p in parts {
            let (_, len, inner) = split_at_axis(p.dims(), axis);
            let chunk = len * inner;
            out.extend_from_slice(&p.data()[o * chunk..(o + 1) * chunk]);
        }
    }
    Ok(Array::from_parts(Shape::new(dims), out))
}

/// A matrix operand: a buffer read as (rows, cols), possibly transposed in place.
#[derive(Clone, Copy)]
pub struct MatRef<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    pub transposed: bool,
}

impl<'a, T> MatRef<'a, T> {
    /// A row-major (r, c) buffer.
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            transposed: false,
        }
    }

    /// The transpose of a row-major (r, c) buffer, read as (c, r) without copying.
    pub fn transpose_of(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows: cols,
            cols: rows,
            transposed: true,
        }
    }

    /// (row stride, column stride) of the logical matrix in its buffer.
    fn strides(&self) -> (isize, isize) {
        if self.transposed {
            (1, self.rows as isize)
        } else {
            (self.cols as isize, 1)
        }
    }

    fn at(&self, i: usize, j: usize) -> usize {
        let (rs, cs) = self.strides();
        i * rs as usize + j * cs as usize
    }
}

/// Below this many multiply-adds, a second thread costs more than it saves.
const PARALLEL_GEMM_MIN: usize = 1 << 18;

/// Nor does it help when a dimension is this thin: a (256, 10) x (10, 512) product took twice
/// as long on two threads as on one.
const PARALLEL_GEMM_MIN_DIM: usize = 32;

/// At or below this many multiply-adds a plain loop beats the `gemm` crate's dispatch and
/// packing.
const DIRECT_GEMM_MAX: usize = 256;

/// C = A B (+ C if `accumulate`), by the `gemm` crate, for row-major C of shape (m, n).
pub fn gemm_into<T: Float>(c: &mut [T], a: MatRef<'_, T>, b: MatRef<'_, T>, accumulate: bool) {
    debug_assert_eq!(c.len(), a.rows * b.cols);
    let parallel = a.rows * b.cols * a.cols >= PARALLEL_GEMM_MIN;
    // SAFETY: `c` is an initialised buffer of m * n elements.
    unsafe { gemm_raw(c.as_mut_ptr(), a, b, accumulate, parallel, None) }
}

/// [`gemm_into`] for a kernel writing its node's whole result: when evaluation asks for the
/// result's non-finite count (`tensor::checked`), C's pieces are counted as they are written.
pub fn gemm_into_result<T: Float>(
    c: &mut [T],
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accumulate: bool,
) {
    match super::checked::asked() {
        Some(request) => request.counted(gemm_into_counted(c, a, b, accumulate)),
        None => gemm_into(c, a, b, accumulate),
    }
}

/// [`gemm()`] for a kernel whose node's whole result is C, counted as [`gemm_into_result`]
/// counts it.
pub fn gemm_result<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<Vec<T>, AllocError> {
    let Some(request) = super::checked::asked() else {
        return gemm(a, b);
    };
    let counter = AtomicUsize::new(0);
    let c = gemm_new(a, b, Some(&counter))?;
    request.counted(counter.into_inner());
    Ok(c)
}

/// [`gemm_into`], returning how many elements of C are NaN or infinite: each piece of C is
/// counted by the thread that wrote it, while it is still in cache, instead of in a pass of
/// its own.
fn gemm_into_counted<T: Float>(
    c: &mut [T],
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accumulate: bool,
) -> usize {
    debug_assert_eq!(c.len(), a.rows * b.cols);
    let parallel = a.rows * b.cols * a.cols >= PARALLEL_GEMM_MIN;
    let counter = AtomicUsize::new(0);
    // SAFETY: `c` is an initialised buffer of m * n elements.
    unsafe { gemm_raw(c.as_mut_ptr(), a, b, accumulate, parallel, Some(&counter)) };
    counter.into_inner()
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
    unsafe { gemm_raw(c.as_mut_ptr(), a, b, accumulate, false, None) }
}

/// `count` products C_i = A_i B_i of equal shape (m, n), stacked in a new buffer and then
/// handed to `then(i, C_i)`; the products run one per task over the thread pool when there is
/// enough work, each on one thread. The buffer is written by the products, never zeroed first.
pub fn gemm_batched<'a, T: Float>(
    count: usize,
    (m, n): (usize, usize),
    operands: impl Fn(usize) -> (MatRef<'a, T>, MatRef<'a, T>) + Sync,
    then: impl Fn(usize, &mut [T]) + Sync,
) -> Result<Vec<T>, AllocError> {
    use rayon::prelude::*;
    let block = m * n;
    let mut out: Vec<T> = alloc::with_capacity(count * block)?;
    let c = SendPtr(out.as_mut_ptr());
    let product = |i: usize, parallel: bool| {
        let (a, b) = operands(i);
        debug_assert_eq!((a.rows, b.cols), (m, n));
        // SAFETY: block i lies inside the buffer's capacity and no other product writes it;
        // without `accumulate` every element is written before `then` reads it.
        unsafe {
            let ci = c.get().add(i * block);
            gemm_raw(ci, a, b, false, parallel, None);
            then(i, std::slice::from_raw_parts_mut(ci, block));
        }
    };
    let k = if count > 0 { operands(0).0.cols } else { 0 };
    if count > 1 && count * block * k >= PARALLEL_GEMM_MIN {
        (0..count).into_par_iter().for_each(|i| product(i, false));
    } else {
        (0..count).for_each(|i| product(i, block * k >= PARALLEL_GEMM_MIN));
    }
    // SAFETY: every block was written above.
    unsafe { out.set_len(count * block) };
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

/// A matrix by its first element and strides, for the `gemm` crate.
#[derive(Clone, Copy)]
struct Strided<T> {
    ptr: *const T,
    rs: isize,
    cs: isize,
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
/// `c` points to m * n writable elements, initialised if `accumulate`.
unsafe fn gemm_raw<T: Float>(
    c: *mut T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accumulate: bool,
    parallel: bool,
    counter: Option<&AtomicUsize>,
) {
    use rayon::prelude::*;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    debug_assert_eq!(b.rows, k);
    if m * n * k <= DIRECT_GEMM_MAX {
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::zero();
                for t in 0..k {
                    acc = acc + a.data[a.at(i, t)] * b.data[b.at(t, j)];
                }
                let dst = c.add(i * n + j);
                dst.write(if accumulate { *dst + acc } else { acc });
            }
        }
        count_into(counter, c, n, m, n);
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
        gemm_block(c, n, sa, sb, (m, k, n), accumulate);
        count_into(counter, c, n, m, n);
        return;
    }
    // Rows of A and C when m >= n, else columns of B and C: piece p starts at `at` and
    // spans `len`; C keeps its row stride n.
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
                gemm_block(c.get().add(at * n), n, ap, sb, (len, k, n), accumulate);
                count_into(counter, c.get().add(at * n), n, len, n);
            } else {
                let bp = Strided {
                    ptr: sb.ptr.offset(at as isize * sb.cs),
                    ..sb
                };
                gemm_block(c.get().add(at), n, sa, bp, (m, k, len), accumulate);
                count_into(counter, c.get().add(at), n, m, len);
            }
        }
    });
}

/// One product on the calling thread, C of row stride `ldc`.
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
    // SAFETY: as the caller promises. Without `accumulate` the crate writes C without reading
    // it.
    gemm::gemm(
        m,
        n,
        k,
        c,
        1,
        ldc as isize,
        accumulate,
        a.ptr,
        a.cs,
        a.rs,
        b.ptr,
        b.cs,
        b.rs,
        T::one(),
        T::one(),
        false,
        false,
        false,
        gemm::Parallelism::None,
    );
}

/// C = A B for floats.
pub fn gemm<T: Float>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<Vec<T>, AllocError> {
    gemm_new(a, b, None)
}

/// C = A B in a new buffer, counting C's non-finite elements into `counter` if given.
fn gemm_new<T: Float>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    counter: Option<&AtomicUsize>,
) -> Result<Vec<T>, AllocError> {
    let len = a.rows * b.cols;
    let mut c = alloc::with_capacity(len)?;
    let parallel = a.rows * b.cols * a.cols >= PARALLEL_GEMM_MIN;
    // SAFETY: the buffer has room for m * n elements, and without `accumulate` every one of
    // them is written and none is read.
    unsafe {
        gemm_raw(c.as_mut_ptr(), a, b, false, parallel, counter);
        c.set_len(len);
    }
    Ok(c)
}

/// How many elements of `d` are NaN or infinite (a vectorised test first: almost every call
/// finds none).
pub fn count_non_finite<T: Float>(d: &[T]) -> usize {
    if T::any_non_finite(d) {
        d.iter().filter(|x| !x.is_finite()).count()
    } else {
        0
    }
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
) -> Result<Vec<T>, AllocError> {
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

    fn arr(dims: &[usize], data: &[f64]) -> Array<f64> {
        Array::new(dims.to_vec(), data.to_vec()).unwrap()
    }

    #[test]
    fn permute_transposes() {
        let a = arr(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let t = permute(&a, &[1, 0]).unwrap();
        assert_eq!(t.dims(), &[3, 2]);
        assert_eq!(t.data(), &[1., 4., 2., 5., 3., 6.]);
    }

    #[test]
    fn large_copies_in_pieces_match_element_loops() {
        // Past the parallel threshold, cut into three pieces that start and end inside rows.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let dims = [3, 129, 5, 32];
        let n: usize = dims.iter().product();
        let a = Array::new(dims.to_vec(), (0..n).map(|x| x as f64).collect()).unwrap();
        let p = pool.install(|| permute(&a, &[0, 2, 1, 3])).unwrap();
        for (i, v) in p.data().iter().enumerate() {
            let (b, h, t, j) = (i / (5 * 129 * 32), i / (129 * 32) % 5, i / 32 % 129, i % 32);
            assert_eq!(
                *v,
                (((b * 129 + t) * 5 + h) * 32 + j) as f64,
                "permute, element {i}"
            );
        }
        let row = arr(
            &[3, 1, 1, 7],
            &(1..=21).map(|x| x as f64).collect::<Vec<_>>(),
        );
        let shape = Shape::new(vec![3, 65, 29, 7]);
        let wide = pool
            .install(|| broadcast(&row, &shape, &[0, 1, 2, 3]))
            .unwrap();
        for (i, v) in wide.data().iter().enumerate() {
            assert_eq!(
                *v,
                row.data()[i / (65 * 29 * 7) * 7 + i % 7],
                "broadcast, element {i}"
            );
        }
        let one = arr(&[], &[2.5]);
        let filled = pool.install(|| broadcast(&one, &shape, &[])).unwrap();
        assert!(filled.data().iter().all(|&v| v == 2.5));
        assert_eq!(filled.len(), shape.numel());
    }

    #[test]
    fn broadcast_in_dim_repeats_rows() {
        let a = arr(&[3], &[1., 2., 3.]);
        let b = broadcast(&a, &Shape::new(vec![2, 3]), &[1]).unwrap();
        assert_eq!(b.data(), &[1., 2., 3., 1., 2., 3.]);
        let c = broadcast(&arr(&[2, 1], &[1., 2.]), &Shape::new(vec![2, 2]), &[0, 1]).unwrap();
        assert_eq!(c.data(), &[1., 1., 2., 2.]);
    }

    #[test]
    fn sum_over_axes() {
        let a = arr(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(sum_axes(&a, &[0]).unwrap().data(), &[5., 7., 9.]);
        assert_eq!(sum_axes(&a, &[1]).unwrap().data(), &[6., 15.]);
        assert_eq!(sum_axes(&a, &[0, 1]).unwrap().data(), &[21.]);
    }

    #[test]
    fn sums_and_copies_over_mixed_axes_match_element_loops() {
        let a = arr(
            &[2, 3, 1, 4],
            &(0..24).map(|x| x as f64).collect::<Vec<_>>(),
        );
        let at = |i: usize, j: usize, l: usize| a.data()[(i * 3 + j) * 4 + l];
        let s = sum_axes(&a, &[0, 3]).unwrap();
        let expected: Vec<f64> = (0..3)
            .map(|j| {
                (0..2)
                    .flat_map(|i| (0..4).map(move |l| (i, l)))
                    .map(|(i, l)| at(i, j, l))
                    .sum()
            })
            .collect();
        assert_eq!(s.dims(), &[3, 1]);
        assert_eq!(s.data(), &expected[..]);
        assert_eq!(
            sum_axes(&a, &[1]).unwrap().data()[..4],
            [12., 15., 18., 21.]
        );
        let p = permute(&a, &[3, 0, 2, 1]).unwrap();
        for l in 0..4 {
            for i in 0..2 {
                for j in 0..3 {
                    assert_eq!(p.data()[(l * 2 + i) * 3 + j], at(i, j, l));
                }
            }
        }
        let b = broadcast(&arr(&[], &[7.]), &Shape::new(vec![2, 3]), &[]).unwrap();
        assert_eq!(b.data(), &[7.; 6]);
    }

    #[test]
    fn long_runs_sum_every_element_once() {
        // 8 lanes, a tail of 3, and an initial value: Σ_{i<1003} i = 502503.
        let a = arr(&[1003], &(0..1003).map(|x| x as f64).collect::<Vec<_>>());
        assert_eq!(sum_axes(&a, &[0]).unwrap().data(), &[502503.]);
        let b = arr(&[2, 20], &(0..40).map(|x| x as f64).collect::<Vec<_>>());
        assert_eq!(sum_axes(&b, &[1]).unwrap().data(), &[190., 590.]);
    }

    #[test]
    fn gather_and_scatter_are_transposes() {
        let a = arr(&[3], &[1., 2., 3.]);
        assert_eq!(gather(&a, 0, &[2, 0, 2]).unwrap().data(), &[3., 1., 3.]);
        let u = arr(&[3], &[10., 20., 30.]);
        assert_eq!(
            scatter_add(&u, 0, &[2, 0, 2], 3).unwrap().data(),
            &[20., 0., 40.]
        );
    }

    #[test]
    fn concat_along_axis_one() {
        let a = arr(&[2, 1], &[1., 2.]);
        let b = arr(&[2, 2], &[3., 4., 5., 6.]);
        assert_eq!(
            concat(&[&a, &b], 1).unwrap().data(),
            &[1., 3., 4., 2., 5., 6.]
        );
    }

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
                assert_eq!(gemm_into_counted(&mut acc, ma, mb, true), want);
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

    #[test]
    fn sums_over_leading_middle_and_trailing_axes_agree_with_a_direct_loop() {
        let data: Vec<f64> = (0..24).map(|x| (x as f64) * 0.25 - 2.0).collect();
        let a = arr(&[2, 3, 4], &data);
        let at = |i: usize, j: usize, k: usize| data[(i * 3 + j) * 4 + k];
        let middle: Vec<f64> = (0..2)
            .flat_map(|i| (0..4).map(move |k| (i, k)))
            .map(|(i, k)| (0..3).map(|j| at(i, j, k)).sum())
            .collect();
        assert_eq!(sum_axes(&a, &[1]).unwrap().data(), &middle[..]);
        let leading: Vec<f64> = (0..4)
            .map(|k| {
                (0..2)
                    .flat_map(|i| (0..3).map(move |j| (i, j)))
                    .map(|(i, j)| at(i, j, k))
                    .sum()
            })
            .collect();
        assert_eq!(sum_axes(&a, &[0, 1]).unwrap().data(), &leading[..]);
        let trailing: Vec<f64> = (0..2)
            .map(|i| {
                (0..3)
                    .flat_map(|j| (0..4).map(move |k| (j, k)))
                    .map(|(j, k)| at(i, j, k))
                    .sum()
            })
            .collect();
        assert_eq!(sum_axes(&a, &[1, 2]).unwrap().data(), &trailing[..]);
        assert_eq!(sum_axes(&a, &[]).unwrap().data(), &data[..]);
    }
}
