//! Kernels, generic over the element type where the operation is a ring or index operation, so
//! f32, f64, i64 and exact rationals share one implementation; matrix products are in `gemm.rs`.

use std::mem::MaybeUninit;

mod counted;
mod gemm;

pub use counted::{
    add_found, counting, for_each_result_piece, for_each_result_piece_at,
    for_each_result_piece_with, map_copy, tally, zip_copy, COUNTED_MIN,
};
pub use gemm::{
    gemm, gemm_batched, gemm_batched_permuted, gemm_batched_result, gemm_into, gemm_into_result,
    gemm_into_serial, gemm_result, matmul_generic, MatRef, MatStack,
};

use super::alloc::{self, AllocError};
use super::shape::{row_major, Strides};
use super::{Array, Element, Float, Shape};

/// Elementwise passes over at least this many elements are split across the thread pool (the
/// one the GEMM threads come from); below it the hand-off costs more than it saves.
const PARALLEL_ELEMENTWISE_MIN: usize = 1 << 15;

/// Whether a kernel writing `elements` values with `flops` of work may cut it across the
/// thread pool: the elementwise passes' threshold, or the products' (two flops per
/// multiply-add).
pub fn may_use_threads(elements: usize, flops: u64) -> bool {
    elements >= PARALLEL_ELEMENTWISE_MIN || flops >= 2 * gemm::PARALLEL_GEMM_MIN as u64
}

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
) -> Result<alloc::Elems<T>, AllocError> {
    let n: usize = dims.iter().product();
    let mut out = alloc::with_capacity(n)?;
    strided_copy_into(src, dims, strides, &mut out.spare_capacity_mut()[..n]);
    // SAFETY: `strided_copy_into` wrote all n elements.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// [`strided_copy`] into `out`, which it fills (`dims`' element count).
fn strided_copy_into<T: Element>(
    src: &[T],
    dims: &[usize],
    strides: &[usize],
    out: &mut [MaybeUninit<T>],
) {
    use rayon::prelude::*;
    let n = out.len();
    if n == 0 {
        return;
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
    if n < PARALLEL_ELEMENTWISE_MIN || rayon::current_num_threads() < 2 {
        copy(out, 0);
    } else {
        let piece = n.div_ceil(rayon::current_num_threads());
        out.par_chunks_mut(piece)
            .enumerate()
            .for_each(|(i, p)| copy(p, i * piece));
    }
}

/// The dims of an array of shape `dims` permuted by `perm`, and the strides its elements are
/// read at.
fn permuted(dims: &[usize], perm: &[usize]) -> (Strides, Strides) {
    let unit = row_major(dims);
    let moved = perm.iter().map(|&p| dims[p]).collect();
    (moved, perm.iter().map(|&p| unit[p]).collect())
}

/// Axis permutation: result dim i is operand dim `perm[i]`.
pub fn permute<T: Element>(a: &Array<T>, perm: &[usize]) -> Result<Array<T>, AllocError> {
    let (dims, strides) = permuted(a.dims(), perm);
    let data = strided_copy(a.data(), &dims, &strides)?;
    Ok(Array::from_parts(Shape::new(dims.to_vec()), data))
}

/// [`permute`] of `src` (of shape `dims`) into `out`: the same elements, moved, so the same
/// values.
pub fn permute_into<T: Element>(src: &[T], dims: &[usize], perm: &[usize], out: &mut [T]) {
    let (moved, strides) = permuted(dims, perm);
    // SAFETY: `strided_copy_into` writes initialised values only.
    strided_copy_into(src, &moved, &strides, unsafe { alloc::rewritable(out) });
}

/// broadcast_in_dim: operand dim i goes to result dim `dims[i]` (sizes equal or 1).
pub fn broadcast<T: Element>(
    a: &Array<T>,
    shape: &Shape,
    dims_map: &[usize],
) -> Result<Array<T>, AllocError> {
    let (r, k, n) = (shape.rank(), a.dims().len(), shape.numel());
    // One element (a loss's seed broadcast back): a fill.
    if let [value] = a.data() {
        return Ok(Array::from_parts(
            shape.clone(),
            alloc::filled(n, value.clone())?,
        ));
    }
    // A small operand filling the trailing axes (a bias broadcast over rows): copies of it,
    // one after another, without the general strided walk's bookkeeping.
    let trailing = k <= r && dims_map.iter().enumerate().all(|(i, &d)| d + k == r + i);
    if trailing && a.dims() == &shape.dims()[r - k..] && n < PARALLEL_ELEMENTWISE_MIN {
        let mut data = alloc::with_capacity(n)?;
        for _ in 0..n / a.len() {
            data.extend_from_slice(a.data());
        }
        return Ok(Array::from_parts(shape.clone(), data));
    }
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
    let mut out = alloc::filled(out_shape.numel(), T::zero())?;
    sum_axes_onto(a.data(), dims, axes, &mut out);
    Ok(Array::from_parts(out_shape, out))
}

/// out += the sum of `src` (of shape `dims`) over the given (sorted, distinct) axes; `out`
/// has the remaining axes. [`sum_axes`] with `out` zeroed.
pub fn sum_axes_onto<T: Element>(src: &[T], dims: &[usize], axes: &[usize], out: &mut [T]) {
    // Leading axes summed away (a bias gradient): each input row adds onto the whole result,
    // row after row, as the general walk below adds them, without its bookkeeping.
    // (A single sum per row is `sum_run`'s, below.)
    let lead = axes.len();
    let inner: usize = dims.get(lead..).map_or(0, |d| d.iter().product());
    if inner > 1 && (0..lead).all(|i| axes.contains(&i)) {
        for row in src.chunks_exact(inner) {
            for (y, v) in out.iter_mut().zip(row) {
                *y = y.clone() + v.clone();
            }
        }
        return;
    }
    let kept: Shape = Shape(
        (0..dims.len())
            .filter(|i| !axes.contains(i))
            .map(|i| dims[i])
            .collect(),
    );
    let out_strides = kept.strides();
    // Stride of each input dim in the output (0 on reduced axes).
    let mut strides: Strides = smallvec::smallvec![0; dims.len()];
    let mut k = 0;
    for (i, s) in strides.iter_mut().enumerate() {
        if !axes.contains(&i) {
            *s = out_strides[k];
            k += 1;
        }
    }
    let unit = Shape::from(dims).strides();
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

/// How many elements of `d` are NaN or infinite (a vectorised test first: almost every call
/// finds none).
pub fn count_non_finite<T: Float>(d: &[T]) -> usize {
    // A short slice is counted in place: the call into the vectorised test costs more.
    if d.len() < 16 {
        return d.iter().filter(|x| !x.is_finite()).count();
    }
    if T::any_non_finite(d) {
        d.iter().filter(|x| !x.is_finite()).count()
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(dims: &[usize], data: &[f64]) -> Array<f64> {
        Array::new(dims.to_vec(), data.to_vec()).unwrap()
    }

    #[test]
    fn permute_into_moves_the_elements_as_permute_does() {
        let a = arr(&[2, 1, 3, 4], &(0..24).map(f64::from).collect::<Vec<_>>());
        for perm in [
            [0, 1, 2, 3],
            [3, 2, 1, 0],
            [2, 0, 3, 1],
            [1, 3, 0, 2],
            [0, 2, 1, 3],
        ] {
            let mut out = vec![-1.0; 24];
            permute_into(a.data(), a.dims(), &perm, &mut out);
            assert_eq!(out, permute(&a, &perm).unwrap().data(), "{perm:?}");
        }
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
    fn a_sum_over_leading_axes_adds_in_the_general_walk_s_order() {
        // Magnitudes far apart make the order of addition visible; the unit axis in front
        // sends the same sum through the general walk.
        let sign = |i: usize| if i % 2 == 0 { 1.0 } else { -1.0 };
        let size = |i: usize| {
            if i % 7 == 0 {
                1e16
            } else {
                i as f64 * 0.3 - 1.0
            }
        };
        let data: Vec<f64> = (0..120).map(|i| sign(i) * size(i)).collect();
        let fast = sum_axes(&arr(&[40, 3], &data), &[0]).unwrap();
        let general = sum_axes(&arr(&[1, 40, 3], &data), &[1]).unwrap();
        assert_eq!(fast.dims(), &[3]);
        assert_eq!(general.dims(), &[1, 3]);
        let bits = |a: &Array<f64>| a.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&fast), bits(&general));
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
