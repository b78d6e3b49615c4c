//! The non-finite check of a node's result, made by the kernel that writes it. Evaluation
//! checks every result for NaN and infinity (`interp::EvalOptions::check_non_finite`); a pass
//! of its own re-reads the result from memory. A kernel that writes its whole result in
//! pieces, such as a GEMM cut across threads, can count each piece while it is still in
//! cache. Evaluation asks for that count around the kernel of a primitive that says it counts
//! ([`asking`]; `Primitive::counts_non_finite`: the products and stacked products, the
//! elementwise rows, `tanh_pullback`, `attention_probs`, `softmax_pullback` and the
//! broadcasts); the kernel takes the request ([`asked`], or `kernels::counting`) and reports
//! the count ([`Request::counted`]); without a count, evaluation scans the result itself. A
//! kernel of any other primitive that calls such a kernel for a part of its work finds no
//! request. The protocol is per thread: the kernel is called on the evaluating thread, and
//! gathers its pieces' counts from the pool threads.
//!
//! Requests nest: a kernel that evaluates a program of its own (a scan's body, say) starts an
//! evaluation, which first withdraws the open request ([`withdraw`]), so that no inner kernel
//! answers it with a count of a value of its own; inner requests are answered to themselves.
//!
//! ```
//! use catml_core::tensor::checked;
//!
//! let (sum, count) = checked::asking(|| {
//!     if let Some(request) = checked::asked() {
//!         request.counted(1); // the kernel found one non-finite element
//!     }
//!     2 + 2
//! });
//! assert_eq!((sum, count), (4, Some(1)));
//! assert_eq!(checked::asking(|| ()).1, None, "a kernel that does not count reports nothing");
//! ```

use std::cell::Cell;

thread_local! {
    /// The open request's number, until a kernel takes it.
    static ASKED: Cell<Option<u64>> = const { Cell::new(None) };
    /// The last count reported, with its request's number.
    static COUNTED: Cell<Option<(u64, usize)>> = const { Cell::new(None) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
}

/// A request taken by a kernel, answered by [`Request::counted`].
#[derive(Debug)]
pub struct Request(u64);

impl Request {
    /// Reports the count of the node's whole result.
    pub fn counted(self, n: usize) {
        COUNTED.set(Some((self.0, n)));
    }
}

/// Runs a node's kernel `f`, asking it to count its result's non-finite elements; the count,
/// when the kernel made one.
pub fn asking<R>(f: impl FnOnce() -> R) -> (R, Option<usize>) {
    /// Withdraws the request however `f` ends, so that no later kernel answers it.
    struct Withdraw;
    impl Drop for Withdraw {
        fn drop(&mut self) {
            ASKED.set(None);
        }
    }
    let id = NEXT.get();
    NEXT.set(id.wrapping_add(1));
    ASKED.set(Some(id));
    let withdraw = Withdraw;
    let r = f();
    drop(withdraw);
    let count = match COUNTED.get() {
        Some((answered, n)) if answered == id => Some(n),
        _ => None,
    };
    (r, count)
}

/// For a kernel about to write its node's whole result: the request to count the result's
/// non-finite elements, if there is one. It is taken, so kernels called inside for parts of
/// the work are not asked.
pub fn asked() -> Option<Request> {
    ASKED.take().map(Request)
}

/// Withdraws the open request, if any: an evaluation starting inside a kernel does so, so
/// that the outer node's result is scanned rather than answered for by an inner kernel.
pub fn withdraw() {
    ASKED.set(None);
}
