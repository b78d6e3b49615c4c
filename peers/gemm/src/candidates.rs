//! The GEMM candidates, each computing C = A B for a [`Product`] with transposed operands read
//! through strides (OpenBLAS through its transpose flags).

use crate::products::Product;

/// f32 or f64, with what each candidate needs to be called on it.
pub trait Element:
    Copy + PartialEq + std::fmt::Debug + faer::traits::ComplexField + Send + Sync + 'static
{
    fn zero() -> Self;
    fn one() -> Self;
    /// A deterministic value in [-0.5, 0.5) from an index.
    fn from_index(i: usize, salt: usize) -> Self;
    /// Panics naming the candidate unless `b` agrees with `a` to within the rounding of sums
    /// of `k` terms.
    fn assert_close(a: &[Self], b: &[Self], k: usize, who: &str);
    fn gemm_crate(p: &Product, a: &[Self], b: &[Self], c: &mut [Self]);
    fn matrixmultiply(p: &Product, a: &[Self], b: &[Self], c: &mut [Self]);
    #[cfg(feature = "openblas")]
    fn openblas(p: &Product, a: &[Self], b: &[Self], c: &mut [Self]);
}

/// Row and column strides of A (m, k) and B (k, n) as stored.
fn strides(p: &Product) -> ((isize, isize), (isize, isize)) {
    let a = if p.a_t {
        (1, p.m as isize)
    } else {
        (p.k as isize, 1)
    };
    let b = if p.b_t {
        (1, p.k as isize)
    } else {
        (p.n as isize, 1)
    };
    (a, b)
}

/// The `gemm` crate on one thread when a dimension is under 32, as CatML calls it.
fn gemm_parallelism(p: &Product) -> gemm::Parallelism {
    if p.m.min(p.n).min(p.k) >= 32 {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    }
}

macro_rules! element {
    ($t:ty, $mm:ident, $blas:ident) => {
        impl Element for $t {
            fn zero() -> Self {
                0.0
            }
            fn one() -> Self {
                1.0
            }
            fn from_index(i: usize, salt: usize) -> Self {
                ((i * salt + i / 3) % 1009) as $t / 1009.0 - 0.5
            }
            fn assert_close(a: &[Self], b: &[Self], k: usize, who: &str) {
                let tol = <$t>::EPSILON * k as $t * 2.0;
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    let scale = x.abs().max(1.0);
                    assert!(
                        (x - y).abs() <= tol * scale,
                        "{who} differs at element {i}: {x} against {y}"
                    );
                }
            }
            fn gemm_crate(p: &Product, a: &[Self], b: &[Self], c: &mut [Self]) {
                let ((ars, acs), (brs, bcs)) = strides(p);
                // SAFETY: A, B and C hold m k, k n and m n elements, laid out by the strides.
                unsafe {
                    gemm::gemm(
                        p.m,
                        p.n,
                        p.k,
                        c.as_mut_ptr(),
                        1,
                        p.n as isize,
                        false,
                        a.as_ptr(),
                        acs,
                        ars,
                        b.as_ptr(),
                        bcs,
                        brs,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm_parallelism(p),
                    )
                }
            }
            fn matrixmultiply(p: &Product, a: &[Self], b: &[Self], c: &mut [Self]) {
                let ((ars, acs), (brs, bcs)) = strides(p);
                // SAFETY: as above.
                unsafe {
                    matrixmultiply::$mm(
                        p.m,
                        p.k,
                        p.n,
                        1.0,
                        a.as_ptr(),
                        ars,
                        acs,
                        b.as_ptr(),
                        brs,
                        bcs,
                        0.0,
                        c.as_mut_ptr(),
                        p.n as isize,
                        1,
                    )
                }
            }
            #[cfg(feature = "openblas")]
            fn openblas(p: &Product, a: &[Self], b: &[Self], c: &mut [Self]) {
                use cblas_sys::*;
                let trans = |t: bool| if t { CblasTrans } else { CblasNoTrans };
                // The leading dimension is the stored row length.
                let lda = if p.a_t { p.m } else { p.k };
                let ldb = if p.b_t { p.k } else { p.n };
                // SAFETY: as above; the dimensions fit in an i32.
                unsafe {
                    $blas(
                        CblasRowMajor,
                        trans(p.a_t),
                        trans(p.b_t),
                        p.m as i32,
                        p.n as i32,
                        p.k as i32,
                        1.0,
                        a.as_ptr(),
                        lda as i32,
                        b.as_ptr(),
                        ldb as i32,
                        0.0,
                        c.as_mut_ptr(),
                        p.n as i32,
                    )
                }
            }
        }
    };
}

element!(f32, sgemm, cblas_sgemm);
element!(f64, dgemm, cblas_dgemm);

fn faer_matmul<T: Element>(p: &Product, a: &[T], b: &[T], c: &mut [T]) {
    use faer::{Accum, MatMut, MatRef, Par};
    let lhs = if p.a_t {
        MatRef::from_row_major_slice(a, p.k, p.m).transpose()
    } else {
        MatRef::from_row_major_slice(a, p.m, p.k)
    };
    let rhs = if p.b_t {
        MatRef::from_row_major_slice(b, p.n, p.k).transpose()
    } else {
        MatRef::from_row_major_slice(b, p.k, p.n)
    };
    let dst = MatMut::from_row_major_slice_mut(c, p.m, p.n);
    faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, T::one(), Par::rayon(0));
}

/// Runs every candidate on `n` threads: the rayon pool (`gemm`, `faer`), matrixmultiply's
/// own pool (read from `MATMUL_NUM_THREADS` at its first call) and OpenBLAS's.
pub fn set_threads(n: usize) {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
        .expect("the rayon pool is set before any product runs");
    std::env::set_var("MATMUL_NUM_THREADS", n.to_string());
    #[cfg(feature = "openblas")]
    {
        extern "C" {
            fn openblas_set_num_threads(n: i32);
        }
        // SAFETY: OpenBLAS's documented setter, called before any product.
        unsafe { openblas_set_num_threads(n as i32) };
    }
}

/// A GEMM library under test.
#[derive(Debug, Clone, Copy)]
pub enum Candidate {
    GemmCrate,
    Faer,
    MatrixMultiply,
    #[cfg(feature = "openblas")]
    OpenBlas,
}

impl Candidate {
    pub fn all() -> &'static [Candidate] {
        &[
            Candidate::GemmCrate,
            Candidate::Faer,
            Candidate::MatrixMultiply,
            #[cfg(feature = "openblas")]
            Candidate::OpenBlas,
        ]
    }

    pub fn name(&self) -> &'static str {
        match self {
            Candidate::GemmCrate => "gemm 0.19",
            Candidate::Faer => "faer 0.24",
            Candidate::MatrixMultiply => "matrixmultiply 0.3",
            #[cfg(feature = "openblas")]
            Candidate::OpenBlas => "OpenBLAS (Debian)",
        }
    }

    pub fn run<T: Element>(&self, p: &Product, a: &[T], b: &[T], c: &mut [T]) {
        match self {
            Candidate::GemmCrate => T::gemm_crate(p, a, b, c),
            Candidate::Faer => faer_matmul(p, a, b, c),
            Candidate::MatrixMultiply => T::matrixmultiply(p, a, b, c),
            #[cfg(feature = "openblas")]
            Candidate::OpenBlas => T::openblas(p, a, b, c),
        }
    }
}
