//! What the plain-`main` benches (harness = false) measure a run with: the peak heap growth,
//! through a counting global allocator, and this thread's CPU time. One copy, so every bench
//! reports the same figure the same way. Also the seeded generator benches and test fixtures
//! draw their corpora from ([`Rng`]), so a seed means the same corpus everywhere.
//!
//! A bench installs the allocator itself (a global allocator belongs to the binary):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: bench_support::Counting = bench_support::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Forwards to `System` and counts the live bytes, and their peak, around each call.
pub struct Counting;

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE.fetch_sub(by, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are updated around it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

/// Bytes live now (zero unless [`Counting`] is the global allocator).
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes live at once since the last [`restart_peak`].
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from what is live now, and returns that: a run's own growth is then
/// `peak() - baseline`, the input built before it left out.
pub fn restart_peak() -> usize {
    let baseline = live();
    PEAK.store(baseline, Ordering::Relaxed);
    baseline
}

/// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, nanosecond resolution). Not
/// `/proc/thread-self/schedstat`: that figure is only brought up to date at scheduler ticks, so
/// a reading taken by the running thread lags by up to a tick (a 3 ms busy loop read as 0.1 to
/// 2.2 ms). On a 25 ms pass that is noise of over 10%, and a minimum over runs then picks the
/// most understated one.
pub fn thread_cpu() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// xorshift64*: deterministic fixtures without a rand dependency. Seed with a non-zero value
/// (zero stays zero).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Zipf-like in `0..n`: small ranks much more often (a word list's shape).
    pub fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((n as f64).powf(u) - 1.0) as usize % n
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}
