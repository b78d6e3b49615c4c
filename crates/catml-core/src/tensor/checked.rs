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
//! A request may also name a value the kernel reads, by its buffer's address, for the kernel
//! to count as it reads it ([`asking_watching`], [`Request::watches`]): evaluation defers the
//! check of a value made just before to the elementwise pass that reads it next, and often
//! writes over it, while each block is in cache (`docs/memory.md`, "Values checked by their
//! reader").
//! A kernel that does not answer for the watched value leaves evaluation to check it.
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
    /// The open request's number and watched address, until a kernel takes it.
    static ASKED: Cell<Option<(u64, Option<usize>)>> = const { Cell::new(None) };
    /// The last answer, with its request's number.
    static COUNTED: Cell<Option<(u64, usize, Option<Watched>)>> = const { Cell::new(None) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
}

/// A request taken by a kernel, answered by [`Request::counted`] or
/// [`Request::counted_watching`].
#[derive(Debug)]
pub struct Request {
    id: u64,
    watched: Option<usize>,
}

/// The non-finite elements a kernel found in the value it was asked to watch: how many, and
/// the index of the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    /// How many elements are NaN or infinite.
    pub count: usize,
    /// The index of the first of them (0 when there is none).
    pub first: usize,
}

impl Request {
    /// Reports the count of the node's whole result.
    pub fn counted(self, n: usize) {
        self.counted_watching(n, None);
    }

    /// Reports the count of the node's whole result, and what the kernel found in the watched
    /// value, having read every element of it.
    pub fn counted_watching(self, n: usize, watched: Option<Watched>) {
        COUNTED.set(Some((self.id, n, watched)));
    }

    /// Whether the buffer starting at `data` holds the value the kernel is asked to watch.
    pub fn watches<T>(&self, data: *const T) -> bool {
        self.watched == Some(data as usize)
    }
}

/// Runs a node's kernel `f`, asking it to count its result's non-finite elements; the count,
/// when the kernel made one.
pub fn asking<R>(f: impl FnOnce() -> R) -> (R, Option<usize>) {
    let (r, count, _) = asking_watching(None, f);
    (r, count)
}

/// [`asking`], and asking the kernel to count, as it reads them, the elements of the value
/// whose buffer starts at address `watched`; what it found there, when it watched.
pub fn asking_watching<R>(
    watched: Option<usize>,
    f: impl FnOnce() -> R,
) -> (R, Option<usize>, Option<Watched>) {
    /// Withdraws the request however `f` ends, so that no later kernel answers it.
    struct Withdraw;
    impl Drop for Withdraw {
        fn drop(&mut self) {
            ASKED.set(None);
        }
    }
    let id = NEXT.get();
    NEXT.set(id.wrapping_add(1));
    ASKED.set(Some((id, watched)));
    let withdraw = Withdraw;
    let r = f();
    drop(withdraw);
    match COUNTED.get() {
        Some((answered, n, w)) if answered == id => (r, Some(n), w.filter(|_| watched.is_some())),
        _ => (r, None, None),
    }
}

/// For a kernel about to write its node's whole result: the request to count the result's
/// non-finite elements, if there is one. It is taken, so kernels called inside for parts of
/// the work are not asked.
pub fn asked() -> Option<Request> {
    ASKED.take().map(|(id, watched)| Request { id, watched })
}

/// Withdraws the open request, if any: an evaluation starting inside a kernel does so, so
/// that the outer node's result is scanned rather than answered for by an inner kernel.
pub fn withdraw() {
    ASKED.set(None);
}
