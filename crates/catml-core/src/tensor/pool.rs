//! Recycled buffers: while a [`BufferPool`] is active on a thread, a value buffer dropped there
//! goes into the pool instead of back to the allocator, and [`alloc`](super::alloc) takes a
//! buffer of the size asked for from the pool before asking the allocator; a pool that shares
//! memory gives a request the range of its slab it learnt from a traced call instead
//! (`shared_buffers.rs`). An [`Executable`](crate::interp::Executable) keeps one pool across
//! its calls, so that a program evaluated again with the same shapes finds every buffer it
//! needs already made (`docs/memory.md`).
//!
//! ```
//! use catml_core::tensor::{alloc, BufferPool, Tensor};
//!
//! let mut pool = BufferPool::new(1 << 20);
//! let first = pool.activate(|| {
//!     let t = Tensor::f64([1000], alloc::filled(1000, 1.0).unwrap().into_vec()).unwrap();
//!     let at = t.as_f64().unwrap().data().as_ptr();
//!     drop(t); // its buffer goes into the pool, not back to the allocator
//!     at
//! });
//! assert_eq!(pool.held_bytes(), 8000);
//! let again = pool.activate(|| alloc::filled(1000, 0.0f64).unwrap().as_ptr());
//! assert_eq!(first, again, "the same memory, handed out again");
//! ```

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Arc;

use super::elems::{Elems, Slab};
use super::shared_buffers::{SharedBuffers, Trace};

/// A free buffer: memory the global allocator gave out with `layout`, holding no elements.
struct Free {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for Free {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated by the global allocator with exactly `layout` (a
        // vector's buffer of that capacity), and nothing else owns it.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// The shared block of a vector held by an array (`Arc<Elems<T>>`, its counts and the vector
/// and its placement) whose vector was taken out: kept so that the next array made in the pool
/// needs no allocation for it. The block's layout is the same for every element type.
struct Shell(NonNull<Elems<u8>>);

impl Shell {
    /// The block holding `v`, reusable for any element type.
    fn new<T>(v: Arc<Elems<T>>) -> Option<Shell> {
        if !same_block::<T>() {
            return None;
        }
        // SAFETY: `into_raw` gives a non-null pointer to the vector inside the block.
        Some(Shell(unsafe {
            NonNull::new_unchecked(Arc::into_raw(v).cast_mut().cast())
        }))
    }

    /// The block, now holding `v`.
    fn fill<T>(self, v: Elems<T>) -> Arc<Elems<T>> {
        let at = self.0;
        std::mem::forget(self);
        // SAFETY: the shell owned the block, and gives it up here.
        unsafe { refill(at, v) }
    }
}

/// The shared block at `at` holding `v`.
///
/// # Safety
/// `at` came from `Arc<Elems<X>>::into_raw`, with `Elems<X>` of the same size and alignment as
/// `Elems<T>` (`same_block`); it is the block's only reference, and the vector there is empty
/// with no capacity, so overwriting it leaks nothing.
unsafe fn refill<T>(at: NonNull<Elems<u8>>, v: Elems<T>) -> Arc<Elems<T>> {
    let at = at.as_ptr().cast::<Elems<T>>();
    at.write(v);
    Arc::from_raw(at)
}

impl Drop for Shell {
    fn drop(&mut self) {
        // SAFETY: the shell owns the block; the `Arc` made here frees it.
        drop(unsafe { refill(self.0, Elems::<u8>::new()) });
    }
}

/// Whether `Arc<Elems<T>>`'s block has the layout of `Arc<Elems<u8>>`'s (so for every sized `T`).
fn same_block<T>() -> bool {
    use std::mem::{align_of, size_of};
    size_of::<Elems<T>>() == size_of::<Elems<u8>>()
        && align_of::<Elems<T>>() == align_of::<Elems<u8>>()
}

/// At most this many shells are kept (a program's node count is typically far below it).
const MAX_SHELLS: usize = 1 << 12;

/// Free buffers kept for reuse, holding at most a set number of bytes.
pub struct BufferPool {
    free: Vec<Free>,
    held: usize,
    limit: usize,
    shells: Vec<Shell>,
    sharing: Sharing,
}

/// How a pool chooses buffer sizes: as asked, or by what it learnt from a call. (Boxed, so
/// that a pool stays small: it is moved in and out of its thread's slot on every call.)
#[derive(Debug)]
enum Sharing {
    /// Every buffer is of the size asked for.
    Off,
    /// A call is traced; the pool keeps nothing meanwhile, so that the call holds its live
    /// values only.
    Tracing(Box<Trace>),
    /// Each request of the call gets the range of the slab the traced call's
    /// [`SharedBuffers`] give it, or a small one a free buffer of its size; only buffers of
    /// those sizes are kept.
    Following(Box<Following>),
}

/// The places learnt, the slab made for them (while the pool has room for it), how many
/// requests the call has made so far, whether the slab could not be had in this call, and the
/// buffers out that serve requests whose range was held (by address).
#[derive(Debug)]
struct Following {
    buffers: SharedBuffers,
    slab: Option<Arc<Slab>>,
    next: usize,
    no_slab: bool,
    stand_ins: Vec<usize>,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("buffers", &self.free.len())
            .field("held", &self.held)
            .field("limit", &self.limit)
            .field("shells", &self.shells.len())
            .field("sharing", &self.sharing)
            .finish()
    }
}

// SAFETY: a pool owns its free buffers and shells outright; they hold no elements and no other
// thread sees them while the pool is inactive.
unsafe impl Send for BufferPool {}

thread_local! {
    static ACTIVE: RefCell<Option<BufferPool>> = const { RefCell::new(None) };
}

impl BufferPool {
    /// An empty pool that will hold at most `limit` bytes of free buffers (a buffer that would
    /// take it past the limit goes back to the allocator).
    pub fn new(limit: usize) -> BufferPool {
        BufferPool {
            free: Vec::new(),
            held: 0,
            limit,
            shells: Vec::new(),
            sharing: Sharing::Off,
        }
    }

    /// An empty pool that learns from a call which values can share memory
    /// ([`begin_call`](Self::begin_call), [`end_call`](Self::end_call)): later calls that ask
    /// for the same buffers in the same order get ranges of one slab, shared by values whose
    /// lifetimes do not overlap, whatever their sizes, so that they need little more than their
    /// peak of live bytes (`docs/memory.md`, "Executables").
    pub fn sharing(limit: usize) -> BufferPool {
        BufferPool {
            sharing: Sharing::Tracing(Box::default()),
            ..BufferPool::new(limit)
        }
    }

    /// A call starts: a pool learning traces it afresh, one that has learnt counts its requests
    /// from the first.
    pub fn begin_call(&mut self) {
        match &mut self.sharing {
            Sharing::Off => {}
            Sharing::Tracing(trace) => **trace = Trace::default(),
            Sharing::Following(following) => {
                following.next = 0;
                following.no_slab = false;
            }
        }
    }

    /// The call begun last ended; when `learn`, a pool tracing it learns from it which values
    /// can share buffers.
    pub fn end_call(&mut self, learn: bool) {
        if let (Sharing::Tracing(trace), true) = (&self.sharing, learn) {
            let buffers = trace.shared();
            self.sharing = Sharing::Following(Box::new(Following {
                buffers,
                slab: None,
                no_slab: false,
                next: 0,
                stand_ins: Vec::new(),
            }));
        }
    }

    /// The bytes a pool that has learnt from a call holds for one: its slab, and free buffers
    /// for as many small values as live at once.
    pub fn shared_bytes(&self) -> Option<usize> {
        match &self.sharing {
            Sharing::Following(following) => Some(following.buffers.total()),
            _ => None,
        }
    }

    /// Bytes of free buffers held, and of the slab shared by values that live at other times.
    pub fn held_bytes(&self) -> usize {
        self.held + self.slab_bytes()
    }

    fn slab_bytes(&self) -> usize {
        match &self.sharing {
            Sharing::Following(f) => f.slab.as_ref().map_or(0, |s| s.bytes()),
            _ => 0,
        }
    }

    /// Holds at most `limit` bytes from now on, giving buffers back to the allocator until it
    /// holds no more; a slab goes first when the buffers learnt do not fit together.
    pub fn limit_to(&mut self, limit: usize) {
        self.limit = limit;
        if let Sharing::Following(f) = &mut self.sharing {
            if f.buffers.total() > limit {
                f.slab = None;
            }
        }
        let limit = limit.saturating_sub(self.slab_bytes());
        while self.held > limit {
            let Some(free) = self.free.pop() else { break };
            self.held -= free.layout.size();
        }
    }

    /// Runs `f` with this pool active on the calling thread, and takes it back afterwards
    /// (also when `f` unwinds). A pool already active there is set aside meanwhile.
    pub fn activate<R>(&mut self, f: impl FnOnce() -> R) -> R {
        struct Restore<'a> {
            pool: &'a mut BufferPool,
            previous: Option<BufferPool>,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                let previous = self.previous.take();
                if let Some(mine) = ACTIVE.with(|a| a.replace(previous)) {
                    *self.pool = mine;
                }
            }
        }
        let mine = std::mem::replace(self, BufferPool::new(self.limit));
        let previous = ACTIVE.with(|a| a.replace(Some(mine)));
        let _restore = Restore {
            pool: self,
            previous,
        };
        f()
    }

    /// A vector with room for `n` elements of `T`: a free buffer, or the slab's part for
    /// this request; `None` when one must be allocated.
    fn take_for<T>(&mut self, layout: Layout, n: usize) -> Option<Elems<T>> {
        let mut held = false;
        match &mut self.sharing {
            Sharing::Off => {}
            // Traced buffers are made here, so that their addresses are known.
            Sharing::Tracing(trace) => {
                let ptr = allocate(layout)?;
                trace.made(layout, ptr.as_ptr() as usize);
                // SAFETY: just allocated with the layout of `n` elements of `T`.
                return Some(unsafe { Elems::from_heap(ptr.cast(), n) });
            }
            // A request placed in the slab gets its part, when no value still out holds any of
            // it; a pool without room for all the buffers learnt makes no slab, and a call
            // that could not have it asks once.
            Sharing::Following(following) => {
                let Following {
                    buffers,
                    slab,
                    next,
                    no_slab,
                    ..
                } = &mut **following;
                let offset = buffers.offset_for(*next, layout);
                *next += 1;
                if let Some(offset) = offset {
                    if slab.is_none() && !*no_slab && buffers.total() <= self.limit {
                        *slab = Slab::new(buffers.slab());
                        *no_slab = slab.is_none();
                    }
                    if let Some(slab) = slab {
                        if let Some(ptr) = slab.claim(offset, layout.size()) {
                            // SAFETY: claimed for this vector, at an offset aligned for every
                            // element type, with room for `n` elements.
                            return Some(unsafe {
                                Elems::in_slab(ptr.cast(), n, Arc::clone(slab))
                            });
                        }
                        held = true;
                    }
                }
            }
        }
        let ptr = match (self.take(layout), held) {
            (Some(ptr), _) => ptr,
            (None, true) => allocate(layout)?,
            (None, false) => return None,
        };
        // A value still out lies in the request's range (the caller's input, say, a result of
        // the last call): a stand-in, kept when it comes back, for the next time. A stand-in
        // dropped elsewhere never comes back, so only as many as the call's requests are
        // remembered, the oldest forgotten first.
        if let (Sharing::Following(following), true) = (&mut self.sharing, held) {
            if following.stand_ins.len() >= following.buffers.requests() {
                following.stand_ins.remove(0);
            }
            following.stand_ins.push(ptr.as_ptr() as usize);
        }
        // SAFETY: a free buffer the global allocator gave out, or one just made, with the
        // layout of `n` elements of `T`, holding no elements, owned by nobody else now.
        Some(unsafe { Elems::from_heap(ptr.cast(), n) })
    }

    fn take(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        let at = self.free.iter().rposition(|b| b.layout == layout)?;
        let free = self.free.swap_remove(at);
        self.held -= layout.size();
        let ptr = free.ptr;
        std::mem::forget(free);
        Some(ptr)
    }

    /// Keeps `free`, or deallocates it when it would take the pool past its limit, or is
    /// not of a size the pool makes when it shares buffers.
    fn give(&mut self, free: Free) {
        let size = free.layout.size();
        let kept = match &mut self.sharing {
            Sharing::Off => true,
            Sharing::Tracing(trace) => {
                trace.returned(free.ptr.as_ptr() as usize);
                false
            }
            Sharing::Following(following) => {
                let at = free.ptr.as_ptr() as usize;
                match following.stand_ins.iter().position(|&s| s == at) {
                    Some(k) => {
                        following.stand_ins.swap_remove(k);
                        true
                    }
                    None => following.buffers.serves(free.layout),
                }
            }
        };
        if kept && self.held + self.slab_bytes() + size <= self.limit {
            self.held += size;
            self.free.push(free);
        }
    }
}

/// Memory for `layout` from the global allocator, made here so that the pool knows its
/// address; `layout`'s size is not zero (`take`).
fn allocate(layout: Layout) -> Option<NonNull<u8>> {
    // SAFETY: the layout's size is not zero.
    NonNull::new(unsafe { std::alloc::alloc(layout) })
}

/// An empty vector with room for `n` elements from the active pool, if it holds a buffer or
/// a part of its slab for them.
pub(crate) fn take<T>(n: usize) -> Option<Elems<T>> {
    let layout = Layout::array::<T>(n).ok().filter(|l| l.size() > 0)?;
    ACTIVE
        .try_with(
            |a| match a.try_borrow_mut().ok().as_mut().and_then(|s| s.as_mut()) {
                Some(pool) => pool.take_for::<T>(layout, n),
                None => None,
            },
        )
        .ok()
        .flatten()
}

impl BufferPool {
    /// Keeps `v`'s buffer, emptied, when its elements need no drop; otherwise `v` is dropped.
    /// A vector in a slab gives its part back to the slab as it drops.
    fn keep<T>(&mut self, mut v: Elems<T>) {
        if std::mem::needs_drop::<T>() {
            return;
        }
        // The elements need no drop, so the buffer is handed over empty.
        v.clear();
        let Ok((ptr, capacity)) = v.into_heap() else {
            return;
        };
        let Ok(layout) = Layout::array::<T>(capacity) else {
            return;
        };
        self.give(Free {
            ptr: ptr.cast(),
            layout,
        });
    }
}

/// `v` shared from a block the active pool kept (`Arc::new(v)` when it has none).
pub(crate) fn shared<T>(v: Elems<T>) -> Arc<Elems<T>> {
    let shell = ACTIVE
        .try_with(|a| a.try_borrow_mut().ok()?.as_mut()?.shells.pop())
        .ok()
        .flatten();
    match shell {
        Some(shell) => shell.fill(v),
        None => Arc::new(v),
    }
}

/// Releases an array's vector: when `v` is its last owner, the vector's buffer goes to the
/// active pool (`give`) and so does the block, if there is a pool.
pub(crate) fn release<T>(mut v: Arc<Elems<T>>) {
    let Some(mine) = Arc::get_mut(&mut v) else {
        return;
    };
    let vector = std::mem::take(mine);
    // One visit to the pool for both; outside an active pool (or while it is borrowed) both
    // are dropped as usual at the end.
    let _ = ACTIVE.try_with(|a| {
        let Ok(mut slot) = a.try_borrow_mut() else {
            return;
        };
        let Some(pool) = slot.as_mut() else {
            return;
        };
        pool.keep(vector);
        if pool.shells.len() < MAX_SHELLS {
            pool.shells.extend(Shell::new(v));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::alloc;

    /// Gives a vector's buffer to the active pool, as [`release`] gives an array's; outside
    /// an active pool `v` is dropped as usual.
    fn give<T>(v: impl Into<Elems<T>>) {
        let v = v.into();
        let _ = ACTIVE.try_with(|a| {
            if let Some(pool) = a.try_borrow_mut().ok().as_mut().and_then(|s| s.as_mut()) {
                pool.keep(v);
            }
        });
    }

    #[test]
    fn a_dropped_buffer_is_reused_only_for_the_same_size() {
        let mut pool = BufferPool::new(1 << 20);
        pool.activate(|| {
            let a = alloc::filled(100, 0.0f32).unwrap();
            let at = a.as_ptr();
            give(a);
            let b = alloc::with_capacity::<f32>(99).unwrap();
            assert_ne!(b.as_ptr(), at, "another size is a fresh buffer");
            let c = alloc::with_capacity::<u32>(100).unwrap();
            assert_eq!(c.as_ptr().cast::<f32>(), at, "the same layout is reused");
            assert_eq!(c.len(), 0);
        });
        assert_eq!(pool.held_bytes(), 0, "the one buffer given was taken again");
    }

    #[test]
    fn only_the_last_owner_of_a_tensor_gives_its_buffer() {
        use crate::tensor::Tensor;
        let mut pool = BufferPool::new(1 << 20);
        let kept = pool.activate(|| {
            let t = Tensor::f64([4], vec![1.0; 4]).unwrap();
            let copy = t.clone();
            drop(t); // shared: nothing is pooled
            copy
        });
        assert_eq!(pool.held_bytes(), 0);
        assert_eq!(kept.to_f64_vec(), [1.0; 4]);
        pool.activate(|| drop(kept));
        assert_eq!(pool.held_bytes(), 32);
    }

    #[test]
    fn a_lower_limit_gives_buffers_back_until_the_pool_holds_no_more() {
        let mut pool = BufferPool::new(1 << 20);
        pool.activate(|| {
            give(alloc::filled(100, 0u8).unwrap());
            give(alloc::filled(300, 0u8).unwrap());
        });
        assert_eq!(pool.held_bytes(), 400);
        pool.limit_to(350);
        assert_eq!(pool.held_bytes(), 100, "the last buffer given went back");
        pool.activate(|| give(alloc::filled(300, 0u8).unwrap()));
        assert_eq!(pool.held_bytes(), 100, "over the new limit, not kept");
    }

    #[test]
    fn the_limit_bounds_what_is_held_and_inactive_pools_take_nothing() {
        let mut pool = BufferPool::new(900);
        pool.activate(|| {
            give(alloc::filled(200, 0u8).unwrap());
            give(alloc::filled(100, 0.0f64).unwrap()); // 800 bytes: over the limit with 200
        });
        assert_eq!(pool.held_bytes(), 200);
        give(alloc::filled(50, 0u8).unwrap());
        assert_eq!(pool.held_bytes(), 200);
    }

    #[test]
    fn an_array_s_shared_block_is_kept_and_reused_for_any_element_type() {
        use crate::tensor::Tensor;
        let mut pool = BufferPool::new(1 << 20);
        pool.activate(|| {
            let a = Tensor::f64([4], vec![1.0; 4]).unwrap();
            let b = Tensor::f64([2], vec![2.0; 2]).unwrap();
            drop((a, b));
        });
        assert_eq!(pool.shells.len(), 2);
        let kept = pool.activate(|| {
            let t = Tensor::f32([3], vec![0.5, 1.5, 2.5]).unwrap();
            let strings = shared(vec![String::from("x")].into());
            assert_eq!(strings[0], "x");
            release(strings); // the strings are dropped, the block kept
            t
        });
        assert_eq!(pool.shells.len(), 1, "two blocks taken, one given back");
        assert_eq!(kept.to_f64_vec(), [0.5, 1.5, 2.5]);
        drop(pool); // frees the blocks it keeps
    }

    #[test]
    fn a_sharing_pool_learns_from_a_call_to_place_values_living_at_other_times_together() {
        let call = |pool: &mut BufferPool| {
            pool.begin_call();
            let ptrs = pool.activate(|| {
                let a = alloc::filled(1000, 0.0f64).unwrap();
                let at = a.as_ptr();
                give(a); // a dies before b and c are made
                let b = alloc::filled(600, 1.0f64).unwrap();
                let c = alloc::filled(1100, 1.0f32).unwrap();
                let (b_at, c_at) = (b.as_ptr(), c.as_ptr());
                let in_slab = b.in_a_slab() && c.in_a_slab();
                give(b);
                give(c);
                (at, b_at, c_at.cast::<f64>(), in_slab)
            });
            pool.end_call(true);
            ptrs
        };
        let mut pool = BufferPool::sharing(1 << 20);
        let (.., in_slab) = call(&mut pool);
        assert!(!in_slab, "the traced call gets buffers of its own");
        assert_eq!(pool.held_bytes(), 0, "and keeps nothing");
        // a's 8000 bytes; b's 4800 where a was, and c's 4400 after them.
        assert_eq!(
            pool.shared_bytes(),
            Some(4800 + 4416),
            "b and c take a's place"
        );
        let (a, b, c, in_slab) = call(&mut pool);
        assert!(in_slab);
        assert_eq!(b, a, "b starts where a did");
        assert_eq!(c as usize - a as usize, 4800, "c follows b");
        assert_eq!(pool.held_bytes(), 9216, "the slab, and no buffer besides");
        pool.limit_to(9215);
        assert_eq!(pool.held_bytes(), 0, "no room for the slab");
        let (.., in_slab) = call(&mut pool);
        assert!(!in_slab, "with no room for the slab, buffers of their own");
    }

    #[test]
    fn a_sharing_pool_never_hands_out_a_part_still_in_use() {
        let mut pool = BufferPool::sharing(1 << 20);
        let call = |pool: &mut BufferPool, keep_a: bool| {
            pool.begin_call();
            let (kept, b_in_slab) = pool.activate(|| {
                let a = alloc::filled(1000, 0.0f64).unwrap();
                let kept = if keep_a {
                    Some(a)
                } else {
                    give(a);
                    None
                };
                let b = alloc::filled(1000, 1.0f64).unwrap();
                let in_slab = b.in_a_slab();
                give(b);
                (kept, in_slab)
            });
            pool.end_call(true);
            (kept, b_in_slab)
        };
        call(&mut pool, false);
        // a, held past its time, keeps its part: b, placed there, gets a buffer of its own.
        let (kept, b_in_slab) = call(&mut pool, true);
        assert!(kept.as_ref().unwrap().in_a_slab() && !b_in_slab);
        drop(kept);
        assert!(call(&mut pool, false).1, "the part is free again");
    }

    #[test]
    fn a_sharing_pool_keeps_free_buffers_for_small_values() {
        let mut pool = BufferPool::sharing(1 << 20);
        let call = |pool: &mut BufferPool| {
            pool.begin_call();
            let at = pool.activate(|| {
                let a = alloc::filled(10, 0.0f64).unwrap();
                let at = a.as_ptr();
                give(a);
                at
            });
            pool.end_call(true);
            at
        };
        call(&mut pool);
        let first = call(&mut pool);
        assert_eq!(pool.held_bytes(), 80, "kept for the next call");
        assert_eq!(call(&mut pool), first);
    }

    #[test]
    fn elements_that_need_drop_are_never_pooled() {
        let mut pool = BufferPool::new(1 << 20);
        pool.activate(|| give(vec![String::from("x")]));
        assert_eq!(pool.held_bytes(), 0);
    }
}
