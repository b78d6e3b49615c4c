//! Buffers shared by values of different sizes. A [`Trace`] records one call's buffers: the
//! size of each asked for, in order, and when each came back. From it, [`SharedBuffers`] gives
//! every request a buffer size such that requests whose lifetimes do not overlap share one
//! buffer, the largest of theirs: later calls, asking in the same order, then need only those
//! buffers (`docs/memory.md`, "Executables").

use std::alloc::Layout;
use std::collections::HashMap;

/// One buffer asked for: its layout and element size, and the clock when it was made and when
/// it came back (`None`: it outlived the call).
#[derive(Debug, Clone, Copy)]
struct Request {
    layout: Layout,
    elem: usize,
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
    /// A buffer of `layout`, for elements of `elem` bytes, was made at `at`. A buffer the trace
    /// made there before went back to the allocator unseen (a vector dropped outside the
    /// pool), since the allocator hands out only free memory: it died by now.
    pub(crate) fn made(&mut self, layout: Layout, elem: usize, at: usize) {
        self.clock += 1;
        let born = self.clock;
        if let Some(earlier) = self.out.insert(at, self.requests.len()) {
            self.requests[earlier].died = Some(born);
        }
        self.requests.push(Request {
            layout,
            elem,
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

    /// The buffers that serve these requests when each is placed, largest first, in the first
    /// buffer of its element size whose requests all live at other times, or in a new one of
    /// its own size ("greedy by size").
    pub(crate) fn shared(&self) -> SharedBuffers {
        let mut order: Vec<usize> = (0..self.requests.len()).collect();
        order.sort_by_key(|&r| std::cmp::Reverse(self.requests[r].layout.size()));
        let mut places: Vec<Place> = Vec::new();
        let mut size = vec![0; self.requests.len()];
        for r in order {
            let q = self.requests[r];
            let life = (q.born, q.died.unwrap_or(u64::MAX));
            let place = match places.iter_mut().position(|b| b.serves(&q, life)) {
                Some(k) => &mut places[k],
                None => {
                    places.push(Place {
                        layout: q.layout,
                        elem: q.elem,
                        lives: Vec::new(),
                    });
                    places.last_mut().expect("just pushed")
                }
            };
            place.lives.push(life);
            size[r] = place.layout.size();
        }
        let mut layouts: Vec<Layout> = places.iter().map(|b| b.layout).collect();
        let total = layouts.iter().map(|l| l.size()).sum();
        layouts.sort_by_key(|l| (l.size(), l.align()));
        layouts.dedup();
        let requests = self.requests.iter().zip(size);
        // A place's size is a multiple of its element size, with the request's alignment.
        let given = |q: &Request, s: usize| Layout::from_size_align(s, q.layout.align()).ok();
        SharedBuffers {
            requests: requests
                .map(|(q, s)| (q.layout, q.elem, given(q, s).unwrap_or(q.layout)))
                .collect(),
            layouts,
            total,
        }
    }
}

/// One shared buffer: its layout, its element size, and the lifetimes of the requests it
/// serves.
struct Place {
    layout: Layout,
    elem: usize,
    lives: Vec<(u64, u64)>,
}

impl Place {
    /// Whether request `q`, living over `life`, can take this buffer (placed largest first,
    /// it is no larger than the buffer).
    fn serves(&self, q: &Request, life: (u64, u64)) -> bool {
        let apart = |&(born, died): &(u64, u64)| died <= life.0 || life.1 <= born;
        self.layout.align() == q.layout.align()
            && self.elem == q.elem
            && self.lives.iter().all(apart)
    }
}

/// For each request of a call, in order, the size of the buffer made for it; and the layouts
/// and total bytes of all those buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedBuffers {
    /// The layout asked for, the element size, and the layout of the buffer that serves it.
    requests: Vec<(Layout, usize, Layout)>,
    /// Every buffer's layout, once each.
    layouts: Vec<Layout>,
    total: usize,
}

impl SharedBuffers {
    /// The layout of the buffer for request `k`, when it asks for `layout` with elements of
    /// `elem` bytes as the traced call did; `None` for a request that call did not make.
    pub(crate) fn layout_for(&self, k: usize, layout: Layout, elem: usize) -> Option<Layout> {
        let &(asked, e, given) = self.requests.get(k)?;
        (asked == layout && e == elem).then_some(given)
    }

    /// Whether some buffer has this layout (a short list, searched in order: this runs for
    /// every buffer a call gives back).
    pub(crate) fn serves(&self, layout: Layout) -> bool {
        self.layouts.contains(&layout)
    }

    /// The bytes of all the buffers together.
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
    fn values_living_at_other_times_share_the_largest_one_s_buffer() {
        let mut t = Trace::default();
        t.made(f64s(100), 8, 1); // a
        t.made(f64s(50), 8, 2); // b, while a lives
        t.returned(1); // a goes
        t.made(f64s(80), 8, 3); // c fits in a's buffer
        t.made(Layout::array::<f32>(10).unwrap(), 4, 4); // another element size: its own
        t.returned(2);
        t.returned(3);
        let s = t.shared();
        assert_eq!(s.layout_for(0, f64s(100), 8), Some(f64s(100)));
        assert_eq!(s.layout_for(1, f64s(50), 8), Some(f64s(50)));
        assert_eq!(
            s.layout_for(2, f64s(80), 8),
            Some(f64s(100)),
            "c takes a's buffer"
        );
        assert_eq!(
            s.layout_for(3, Layout::array::<f32>(10).unwrap(), 4),
            Some(Layout::array::<f32>(10).unwrap())
        );
        assert_eq!(s.total(), 800 + 400 + 40);
        assert_eq!(
            s.layout_for(2, f64s(81), 8),
            None,
            "another size than traced"
        );
        assert_eq!(
            s.layout_for(4, f64s(1), 8),
            None,
            "more requests than traced"
        );
        assert!(s.serves(f64s(100)) && !s.serves(f64s(80)));
    }

    #[test]
    fn a_buffer_freed_unseen_died_when_its_memory_is_made_again() {
        let mut t = Trace::default();
        t.made(f64s(10), 8, 1); // dropped as a plain vector, never returned
        t.made(f64s(10), 8, 1); // the allocator gave the same memory again
        t.returned(1);
        assert_eq!(t.shared().total(), 80, "one buffer serves both");
    }

    #[test]
    fn a_value_outliving_the_call_keeps_its_buffer() {
        let mut t = Trace::default();
        t.made(f64s(10), 8, 1); // a result, never returned
        t.made(f64s(10), 8, 2);
        t.returned(2);
        t.made(f64s(10), 8, 3);
        t.returned(3);
        let s = t.shared();
        assert_eq!(
            s.total(),
            160,
            "the result's buffer and one for the two others"
        );
    }
}
