//! An oversized frame is refused without allocating its length: a counting allocator
//! records the largest single allocation while the codec reads the header.

use std::sync::atomic::Ordering;

use efr_sandbox_wire::frame::{self, FrameDecoder, MAX_FRAME};

/// The counting allocator (the only `unsafe` of this test).
mod sys {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub struct Counting;

    pub static LARGEST: AtomicUsize = AtomicUsize::new(0);

    // SAFETY: every call forwards to the system allocator with the same layout and pointer;
    // the counter has no effect on the memory handed out.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
            // SAFETY: the caller's layout contract is passed on unchanged.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `System.alloc` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            LARGEST.fetch_max(new_size, Ordering::Relaxed);
            // SAFETY: `ptr` came from `System` with this layout; the caller checked new_size.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

use sys::{Counting, LARGEST};

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn refused_lengths_are_never_allocated() {
    let mut d = FrameDecoder::new();
    LARGEST.store(0, Ordering::Relaxed);
    for len in [MAX_FRAME as u32 + 1, 1 << 30, u32::MAX] {
        let mut input = std::io::Cursor::new(len.to_be_bytes().to_vec());
        assert!(frame::read_frame(&mut input).is_err());
        d.push(&len.to_be_bytes());
        assert!(matches!(d.next_frame(), Some(Err(_))));
        // Start the next case from a fresh decoder (the old one skips the announced body).
        d = FrameDecoder::new();
    }
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest < 1 << 20,
        "the codec allocated {largest} bytes for a refused frame"
    );
}
