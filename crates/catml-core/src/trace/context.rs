//! The trace stack: one recording context per active [`trace`](super::trace) on this thread.
//!
//! A primitive call looks at the innermost context. With none, it evaluates eagerly; with one,
//! it records a node in that context's builder. Contexts nest (a trace started inside a traced
//! function records separately), and each has an id so that a value recorded in one trace is
//! refused by another instead of being misread as one of its own variables.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::TraceError;
use crate::ir::Builder;
use crate::tensor::Params;

/// Identifies one trace for the lifetime of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TraceId(u64);

impl TraceId {
    fn fresh() -> TraceId {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        TraceId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// One active trace: the program being recorded, the parameters' initial values, and the
/// first error raised inside it (in program order).
#[derive(Debug)]
pub(crate) struct Recording {
    pub(crate) id: TraceId,
    pub(crate) builder: Builder,
    pub(crate) params: Params,
    pub(crate) first_error: Option<TraceError>,
    /// Values declared so far, for the `v<n>` names of nodes (the listing numbers values v0, v1).
    pub(crate) n_values: usize,
}

impl Recording {
    /// Keeps the first error: later ones are usually its consequences.
    pub(crate) fn record_error(&mut self, e: &TraceError) {
        if self.first_error.is_none() {
            self.first_error = Some(e.clone());
        }
    }

    /// The name of the next value: `v<n>`, or `v<n>.k` if the user took that name.
    pub(crate) fn next_name(&mut self) -> String {
        let name = self.builder.fresh_name(&format!("v{}", self.n_values));
        self.n_values += 1;
        name
    }
}

thread_local! {
    static STACK: RefCell<Vec<Recording>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the innermost recording, or on `None` outside any trace.
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&mut Recording>) -> R) -> R {
    STACK.with(|s| f(s.borrow_mut().last_mut()))
}

/// Starts a recording; dropping the guard ends it (also when the traced function panics).
pub(crate) fn begin() -> (TraceId, RecordingGuard) {
    let id = TraceId::fresh();
    STACK.with(|s| {
        s.borrow_mut().push(Recording {
            id,
            builder: Builder::new(),
            params: Params::new(),
            first_error: None,
            n_values: 0,
        })
    });
    (id, RecordingGuard { id })
}

/// Ends its recording when dropped.
pub(crate) struct RecordingGuard {
    id: TraceId,
}

impl RecordingGuard {
    /// Ends the recording and hands it back.
    pub(crate) fn end(self) -> Recording {
        let r = STACK.with(|s| pop(&mut s.borrow_mut(), self.id));
        std::mem::forget(self);
        r.expect("a guard's recording is on the stack until the guard ends")
    }
}

impl Drop for RecordingGuard {
    fn drop(&mut self) {
        // `try_with`: during thread teardown the stack may already be gone.
        let _ = STACK.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                pop(&mut s, self.id);
            }
        });
    }
}

/// Removes the recording `id` and any inner ones left by a panic that was caught.
fn pop(stack: &mut Vec<Recording>, id: TraceId) -> Option<Recording> {
    let at = stack.iter().rposition(|r| r.id == id)?;
    stack.truncate(at + 1);
    stack.pop()
}

/// The tag given to nodes recorded while `f` runs (as the tiny MLP's `lin1`). Inner tags replace
/// outer ones for their extent. Outside a trace, tags mean nothing and `f` just runs.
pub fn with_tag<R>(tag: &str, f: impl FnOnce() -> R) -> R {
    let _scope = tag_scope(tag);
    f()
}

/// Tags the nodes recorded until the returned guard drops, then restores the previous tag.
/// Unlike [`with_tag`] it needs no closure, so `#[track_caller]` layer functions keep
/// reporting their caller's site.
pub fn tag_scope(tag: &str) -> TagScope {
    let saved = with_current(|r| r.map(|r| (r.id, r.builder.set_tag(Some(tag.to_string())))));
    TagScope { saved }
}

/// The extent of a tag; see [`tag_scope`].
#[must_use = "the tag applies only while the scope is alive"]
pub struct TagScope {
    saved: Option<(TraceId, Option<String>)>,
}

impl Drop for TagScope {
    fn drop(&mut self) {
        let Some((id, previous)) = self.saved.take() else {
            return;
        };
        let _ = STACK.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if let Some(r) = s.iter_mut().rev().find(|r| r.id == id) {
                    r.builder.set_tag(previous);
                }
            }
        });
    }
}

/// Whether a trace is recording on this thread.
pub fn is_tracing() -> bool {
    with_current(|r| r.is_some())
}
