//! Memory shared by values that live at different times. A [`Trace`] records one call's
//! buffers: the size of each asked for, in order, and when each came back. From it,
//! [`SharedBuffers`] gives every request an offset in one slab such that requests living at the
//! same time never overlap: later calls, asking in the same order, then need only the slab
//! (`docs/memory.md`, "Executables").

use std::alloc::Layout;
use std::collections::HashMap;

use super::elems::SLAB_ALIGN;

/// The smallest request placed in the slab. A claim there costs a few atomic operations, more
/// than taking a free buffer; below a page, a free buffer of the size asked is cheaper, and its
/// bytes are few.
pub(crate) const SLAB_MIN: usize = 4096;

/// One buffer asked for: its layout, and the clock when it was made and when
/// it came back (`None`: it outlived the call).
#[derive(Debug, Clone, Copy)]
struct Request {
    layout: Layout,
    born: u64,
    died: Option<u64>,
}

/// The buffers one call asked for, in order, and their lifetimes.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    requests: Vec<Request>,
    /// The request each buffer out now was made for, by address.
    out: HashMap<usize, usize>,
    clock: u64,
}

impl Trace {
    /// A buffer of `layout` was made at `at`. A buffer the trace
    /// made there before went back to the allocator unseen (a vector dropped outside the
    /// pool), since the allocator hands out only free memory: it died by now.
    pub(crate) fn made(&mut self, layout: Layout, at: usize) {
        self.clock += 1;
        let born = self.clock;
        if let Some(earlier) = self.out.insert(at, self.requests.len()) {
            self.requests[earlier].died = Some(born);
        }
        self.requests.push(Request {
            layout,
            born,
            died: None,
        });
    }

    /// The buffer at `at` came back (if this trace made it).
    pub(crate) fn returned(&mut self, at: usize) {
        self.clock += 1;
        if let Some(r) = self.out.remove(&at) {
            self.requests[r].died = Some(self.clock);
        }
    }

    /// Where each request lives in one slab: placed largest first, at the lowest offset
    /// where it overlaps no request placed before it that lives at the same time ("greedy by
    /// size"). A request that outlived the call (a result) lives to its end. A request under
    /// [`SLAB_MIN`] bytes is not placed: free buffers of its size serve it, as many as of its
    /// size live at once.
    pub(crate) fn shared(&self) -> SharedBuffers {
        let life_of = |q: &Request| (q.born, q.died.unwrap_or(u64::MAX));
        let mut order: Vec<usize> = (0..self.requests.len())
            .filter(|&r| self.requests[r].layout.size() >= SLAB_MIN)
            .collect();
        order.sort_by_key(|&r| (std::cmp::Reverse(self.requests[r].layout.size()), r));
        let mut offsets = vec![None; self.requests.len()];
        // Each placed request's bytes and lifetime.
        let mut placed: Vec<((usize, usize), (u64, u64))> = Vec::with_capacity(order.len());
        let mut busy: Vec<(usize, usize)> = Vec::new();
        for r in order {
            let q = self.requests[r];
            let life = life_of(&q);
            let size = q.layout.size().next_multiple_of(SLAB_ALIGN);
            busy.clear();
            busy.extend(
                (placed.iter())
                    .filter(|(_, (born, died))| *born < life.1 && life.0 < *died)
                    .map(|&(bytes, _)| bytes),
            );
            busy.sort_unstable();
            let mut offset = 0;
            for &(start, end) in &busy {
                if offset + size <= start {
                    break;
                }
                offset = offset.max(end);
            }
            placed.push(((offset, offset + size), life));
            offsets[r] = Some(offset);
        }
        // The small requests' buffers: of each layout, the most that live at once.
        let mut events: Vec<(u64, bool, Layout)> = Vec::new();
        for q in self.requests.iter().filter(|q| q.layout.size() < SLAB_MIN) {
            let (born, died) = life_of(q);
            events.extend([(born, true, q.layout), (died, false, q.layout)]);
        }
        events.sort_unstable_by_key(|&(at, born, _)| (at, born));
        let mut live: Vec<(Layout, usize, usize)> = Vec::new();
        for (_, born, layout) in events {
            let k = match live.iter().position(|&(l, ..)| l == layout) {
                Some(k) => k,
                None => {
                    live.push((layout, 0, 0));
                    live.len() - 1
                }
            };
            let (_, now, most) = &mut live[k];
            *now = if born { *now + 1 } else { *now - 1 };
            *most = (*most).max(*now);
        }
        let slab = placed.iter().map(|&((_, end), _)| end).max().unwrap_or(0);
        let own: usize = live.iter().map(|&(l, _, most)| l.size() * most).sum();
        SharedBuffers {
            requests: (self.requests.iter().zip(offsets))
                .map(|(q, o)| (q.layout, o))
                .collect(),
            layouts: live.iter().map(|&(l, ..)| l).collect(),
            slab,
            total: slab + own,
        }
    }
}

/// For each request of a call, in order, its offset in one slab (none for a small one); the
/// layouts of the small ones; and the slab's bytes, and the bytes of the slab and of the most
/// small buffers live at once together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedBuffers {
    /// The layout asked for, and the offset in the slab.
    requests: Vec<(Layout, Option<usize>)>,
    layouts: Vec<Layout>,
    slab: usize,
    total: usize,
}

impl SharedBuffers {
    /// Request `k`'s offset in the slab, when it asks for `layout` as the traced call did and
    /// was placed; `None` for a small request or one the traced call did not make.
    pub(crate) fn offset_for(&self, k: usize, layout: Layout) -> Option<usize> {
        let &(asked, offset) = self.requests.get(k)?;
        (asked == layout).then_some(offset)?
    }

    /// Whether free buffers of this layout serve small requests (a short list, searched in
    /// order: this runs for every buffer a call gives back but the slab's).
    pub(crate) fn serves(&self, layout: Layout) -> bool {
        self.layouts.contains(&layout)
    }

    /// How many requests the traced call made.
    pub(crate) fn requests(&self) -> usize {
        self.requests.len()
    }

    /// The slab's bytes.
    pub(crate) fn slab(&self) -> usize {
        self.slab
    }

    /// The bytes of the slab and of the small requests' buffers together.
    pub(crate) fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(n: usize) -> Layout {
        Layout::array::<f64>(n).unwrap()
    }

    #[test]
    fn values_living_at_other_times_share_the_slab() {
        let f32s = Layout::array::<f32>(1100).unwrap();
        let mut t = Trace::default();
        t.made(f64s(2000), 1); // a
        t.made(f64s(600), 2); // b, while a lives
        t.returned(1); // a goes
        t.made(f64s(1000), 3); // c takes a's place
        t.made(f32s, 4); // d, another element type, beside c in a's place
        t.made(f64s(10), 5); // e, small
        for at in 2..=5 {
            t.returned(at);
        }
        let s = t.shared();
        // a's 16000 bytes at 0 and b's 4800 after them; c's 8000 and d's 4400 (4416 rounded
        // to a cache line) in a's place.
        assert_eq!(s.offset_for(0, f64s(2000)), Some(0));
        assert_eq!(s.offset_for(1, f64s(600)), Some(16000));
        assert_eq!(s.offset_for(2, f64s(1000)), Some(0), "c takes a's place");
        assert_eq!(s.offset_for(3, f32s), Some(8000), "d follows c");
        assert_eq!(s.offset_for(4, f64s(10)), None, "e is small");
        assert!(s.serves(f64s(10)) && !s.serves(f64s(1000)));
        assert_eq!((s.slab(), s.total()), (16000 + 4800, 16000 + 4800 + 80));
        assert_eq!(
            s.offset_for(2, f64s(1001)),
            None,
            "another size than traced"
        );
        assert_eq!(
            s.offset_for(5, f64s(1000)),
            None,
            "more requests than traced"
        );
    }

    #[test]
    fn small_values_need_as_many_buffers_as_live_at_once() {
        let mut t = Trace::default();
        t.made(f64s(10), 1);
        t.made(f64s(10), 2);
        t.returned(1);
        t.made(f64s(10), 3);
        t.returned(2);
        t.returned(3);
        assert_eq!(t.shared().total(), 160, "two live at once, never three");
    }

    #[test]
    fn a_buffer_freed_unseen_died_when_its_memory_is_made_again() {
        let mut t = Trace::default();
        t.made(f64s(1000), 1); // dropped as a plain vector, never returned
        t.made(f64s(1000), 1); // the allocator gave the same memory again
        t.returned(1);
        assert_eq!(t.shared().slab(), 8000, "one part serves both");
    }

    #[test]
    fn a_value_outliving_the_call_lives_to_its_end() {
        let mut t = Trace::default();
        t.made(f64s(1000), 1); // a result, never returned
        t.made(f64s(1000), 2);
        t.returned(2);
        t.made(f64s(1000), 3);
        t.returned(3);
        let s = t.shared();
        assert_eq!(s.offset_for(0, f64s(1000)), Some(0));
        assert_eq!(s.offset_for(1, f64s(1000)), Some(8000), "beside the result");
        assert_eq!(
            s.offset_for(2, f64s(1000)),
            Some(8000),
            "where the other was"
        );
        assert_eq!(s.slab(), 16000);
    }
}
