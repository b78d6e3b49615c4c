//! A value's elements while a kernel writes them and an array holds them: a vector whose memory
//! is its own, from the global allocator, or a part of a [`Slab`] that an executable shares
//! between values living at different times (`docs/memory.md`, "Executables").
//!
//! ```
//! use catml_core::tensor::alloc;
//!
//! let mut v = alloc::with_capacity::<f32>(3).unwrap();
//! v.extend([1.0, 2.0, 3.0]);
//! assert_eq!(&v[..], &[1.0, 2.0, 3.0]);
//! assert_eq!(v.into_vec(), vec![1.0, 2.0, 3.0]);
//! ```

use std::alloc::Layout;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use allocator_api2::alloc::{AllocError, Allocator, Global};

/// A vector of elements, with its memory's [`Placement`]. It is used as a vector (`push`,
/// `extend`, `spare_capacity_mut`, `set_len`, and slice methods).
pub struct Elems<T>(allocator_api2::vec::Vec<T, Placement>);

/// Where a vector's memory comes from and goes back to: the global allocator, or a slab, for
/// memory inside it.
#[derive(Clone, Default)]
pub struct Placement(Option<Arc<Slab>>);

impl<T> Elems<T> {
    /// An empty vector with no memory.
    pub fn new() -> Elems<T> {
        Elems(allocator_api2::vec::Vec::new_in(Placement::default()))
    }

    /// An empty vector over the global allocator's memory at `ptr`, with room for `capacity`.
    ///
    /// # Safety
    /// `ptr` was allocated by the global allocator with `Layout::array::<T>(capacity)`, holds
    /// no elements, and is owned by nobody else.
    pub(crate) unsafe fn from_heap(ptr: NonNull<T>, capacity: usize) -> Elems<T> {
        Elems(allocator_api2::vec::Vec::from_raw_parts_in(
            ptr.as_ptr(),
            0,
            capacity,
            Placement::default(),
        ))
    }

    /// An empty vector with room for `capacity` elements in `slab` at `ptr`.
    ///
    /// # Safety
    /// `ptr` is `slab`'s memory, aligned for `T`, claimed for this vector
    /// ([`Slab::claim`]) with room for `capacity` elements.
    pub(crate) unsafe fn in_slab(ptr: NonNull<T>, capacity: usize, slab: Arc<Slab>) -> Elems<T> {
        Elems(allocator_api2::vec::Vec::from_raw_parts_in(
            ptr.as_ptr(),
            0,
            capacity,
            Placement(Some(slab)),
        ))
    }

    /// Whether the elements live in a slab.
    pub(crate) fn in_a_slab(&self) -> bool {
        let Placement(slab) = self.0.allocator();
        slab.as_ref()
            .is_some_and(|s| s.holds(self.0.as_ptr().cast::<u8>()))
    }

    /// The memory and capacity of a vector whose memory is the global allocator's, which the
    /// vector gives up; the vector itself when its memory is a slab's, or none.
    pub(crate) fn into_heap(self) -> Result<(NonNull<T>, usize), Elems<T>> {
        if self.0.capacity() == 0 || std::mem::size_of::<T>() == 0 || self.in_a_slab() {
            return Err(self);
        }
        let (ptr, _, capacity, _) = self.0.into_raw_parts_with_alloc();
        // SAFETY: a vector's memory with capacity is non-null.
        Ok((unsafe { NonNull::new_unchecked(ptr) }, capacity))
    }

    /// Appends `items`. An iterator that knows its length is written through spare capacity,
    /// as the standard vector does (the allocator-generic vector pushes one at a time).
    pub fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        let items = items.into_iter();
        let (lower, upper) = items.size_hint();
        if upper != Some(lower) {
            items.for_each(|x| self.0.push(x));
            return;
        }
        self.0.reserve(lower);
        let len = self.0.len();
        let mut written = 0;
        let spare = &mut self.0.spare_capacity_mut()[..lower];
        spare.iter_mut().zip(items).for_each(|(o, x)| {
            o.write(x);
            written += 1;
        });
        // SAFETY: the first `written` elements of the spare capacity were written.
        unsafe { self.0.set_len(len + written) };
    }
}

impl<T: Copy> Elems<T> {
    /// Appends `items`, copied as memory: [`extend_from_slice`](Self::extend_from_slice) for
    /// plain elements, without a loop of clones.
    pub fn extend_copied(&mut self, items: &[T]) {
        self.0.reserve(items.len());
        let len = self.0.len();
        let spare = &mut self.0.spare_capacity_mut()[..items.len()];
        // SAFETY: `MaybeUninit<T>` has `T`'s layout.
        spare.copy_from_slice(unsafe { &*(items as *const [T] as *const [MaybeUninit<T>]) });
        // SAFETY: the next `items.len()` elements were written.
        unsafe { self.0.set_len(len + items.len()) };
    }
}

impl<T: Clone> Elems<T> {
    /// Appends clones of `items` (for plain elements, a loop the compiler makes a copy).
    pub fn extend_from_slice(&mut self, items: &[T]) {
        self.extend(items.iter().cloned());
    }

    /// The elements as a standard vector: the same memory when it is the global allocator's,
    /// else copied.
    pub fn into_vec(self) -> Vec<T> {
        if self.in_a_slab() {
            return self.0.to_vec();
        }
        let (ptr, len, capacity, _) = self.0.into_raw_parts_with_alloc();
        // SAFETY: outside a slab the memory came from the global allocator (`Placement`) with
        // the layout of `capacity` elements, as a standard vector's does.
        unsafe { Vec::from_raw_parts(ptr, len, capacity) }
    }
}

impl<T> Default for Elems<T> {
    fn default() -> Self {
        Elems::new()
    }
}

impl<T> From<Vec<T>> for Elems<T> {
    /// The vector's memory, unchanged.
    fn from(v: Vec<T>) -> Elems<T> {
        let mut v = ManuallyDrop::new(v);
        let (ptr, len, capacity) = (v.as_mut_ptr(), v.len(), v.capacity());
        // SAFETY: a standard vector's memory is the global allocator's, with the layout of its
        // capacity, which `Placement` frees there.
        Elems(unsafe {
            allocator_api2::vec::Vec::from_raw_parts_in(ptr, len, capacity, Placement::default())
        })
    }
}

impl<T> Deref for Elems<T> {
    type Target = allocator_api2::vec::Vec<T, Placement>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<T> DerefMut for Elems<T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<'a, T> IntoIterator for &'a Elems<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<T: PartialEq, U: AsRef<[T]> + ?Sized> PartialEq<U> for Elems<T> {
    fn eq(&self, other: &U) -> bool {
        self.0[..] == *other.as_ref()
    }
}

impl<T: PartialEq> PartialEq<Elems<T>> for Vec<T> {
    fn eq(&self, other: &Elems<T>) -> bool {
        self[..] == other.0[..]
    }
}

impl<T> AsRef<[T]> for Elems<T> {
    fn as_ref(&self) -> &[T] {
        &self.0
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Elems<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Memory shared by values that live at different times: each value claims a range of it while
/// it lives. A claim overlapping a range out now is refused, so values never share memory at
/// once, whatever order a call makes them in.
pub struct Slab {
    base: NonNull<u8>,
    layout: Layout,
    /// The ranges claimed and not yet given back, as (first byte, end).
    out: Mutex<Vec<(usize, usize)>>,
}

// SAFETY: a slab's memory is reached only through the ranges it hands out, one owner each at a
// time; its list of them is behind a lock.
unsafe impl Send for Slab {}
unsafe impl Sync for Slab {}

/// Every slab's alignment: a cache line, enough for every element type.
pub(crate) const SLAB_ALIGN: usize = 64;

impl Slab {
    /// A slab of `bytes` (at least one), or `None` when it cannot be allocated.
    pub(crate) fn new(bytes: usize) -> Option<Arc<Slab>> {
        let layout = Layout::from_size_align(bytes.max(1), SLAB_ALIGN).ok()?;
        let base = Global.allocate(layout).ok()?.cast::<u8>();
        Some(Arc::new(Slab {
            base,
            layout,
            out: Mutex::new(Vec::new()),
        }))
    }

    /// The slab's bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.layout.size()
    }

    /// The memory at `offset` for `size` bytes, claimed until it is given back, unless that
    /// range is outside the slab or overlaps one out now.
    pub(crate) fn claim(&self, offset: usize, size: usize) -> Option<NonNull<u8>> {
        let end = offset.checked_add(size)?;
        if end > self.layout.size() || size == 0 {
            return None;
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if out.iter().any(|&(s, e)| s < end && offset < e) {
            return None;
        }
        out.push((offset, end));
        // SAFETY: `offset` is inside the slab's allocation.
        Some(unsafe { self.base.add(offset) })
    }

    /// Whether `ptr` points into the slab.
    fn holds(&self, ptr: *const u8) -> bool {
        let base = self.base.as_ptr() as usize;
        (base..base + self.layout.size()).contains(&(ptr as usize))
    }

    /// Gives back the range claimed at `ptr`.
    fn give_back(&self, ptr: *const u8) {
        let offset = ptr as usize - self.base.as_ptr() as usize;
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = out.iter().position(|&(s, _)| s == offset) {
            out.swap_remove(k);
        }
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; every vector in it holds the slab
        // alive, so none is left.
        unsafe { Global.deallocate(self.base, self.layout) }
    }
}

impl std::fmt::Debug for Slab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slab")
            .field("bytes", &self.bytes())
            .finish()
    }
}

// SAFETY: memory is the global allocator's, except a slab's claimed ranges, which go back to
// the slab; a clone holds the same slab, so frees what the original allocated.
unsafe impl Allocator for Placement {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        Global.allocate(layout)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        match &self.0 {
            Some(slab) if slab.holds(ptr.as_ptr()) => slab.give_back(ptr.as_ptr()),
            // SAFETY: memory outside a slab came from `allocate`, the global allocator.
            _ => unsafe { Global.deallocate(ptr, layout) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slab_hands_out_a_range_to_one_vector_at_a_time() {
        let slab = Slab::new(256).unwrap();
        let at = slab.claim(0, 80).unwrap();
        assert!(slab.claim(64, 16).is_none(), "overlaps the range out");
        assert!(slab.claim(250, 16).is_none(), "past the end");
        // SAFETY: claimed for 10 f64s at the slab's alignment.
        let mut v = unsafe { Elems::<f64>::in_slab(at.cast(), 10, Arc::clone(&slab)) };
        v.extend((0..10).map(f64::from));
        assert!(v.in_a_slab());
        assert_eq!(v.iter().sum::<f64>(), 45.0);
        let copy = v.into_vec(); // copied out; the range goes back
        assert_eq!(copy.len(), 10);
        assert_eq!(
            slab.claim(64, 16).map(|p| p.as_ptr()),
            Some(unsafe { at.add(64).as_ptr() })
        );
    }

    #[test]
    fn a_slab_vector_grown_past_its_room_moves_to_the_heap_and_gives_its_range_back() {
        let slab = Slab::new(64).unwrap();
        let at = slab.claim(0, 16).unwrap();
        // SAFETY: claimed for 4 f32s.
        let mut v = unsafe { Elems::<f32>::in_slab(at.cast(), 4, Arc::clone(&slab)) };
        v.extend([1.0; 4]);
        v.push(2.0);
        assert!(!v.in_a_slab());
        assert!(slab.claim(0, 16).is_some(), "given back when it moved");
        assert_eq!(v.into_vec(), [1.0, 1.0, 1.0, 1.0, 2.0]);
    }

    #[test]
    fn a_standard_vector_keeps_its_memory_both_ways() {
        let v = vec![1u8, 2, 3];
        let at = v.as_ptr();
        let e = Elems::from(v);
        assert_eq!(e.as_ptr(), at);
        let back = e.into_vec();
        assert_eq!((back.as_ptr(), &back[..]), (at, &[1u8, 2, 3][..]));
    }
}
