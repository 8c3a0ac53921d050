//! The CPU priority of the worker's socket threads.
//!
//! A socket thread does the CPU work of its request before the main thread sees it:
//! reading and parsing the frame, the snapshot's digest, the examples' vetting. For a
//! role that sees a wide catalog that is tens to hundreds of milliseconds per ask, on the
//! same cores as every other role's asks (issue 31: three asks over 7 MB snapshots took
//! about a third of both cores while a plain ask waited). So a socket thread whose request
//! frame declares more than [`LARGE_FRAME`] bytes lowers its own priority to
//! [`LARGE_NICE`] before it reads the payload: under contention a small ask's threads
//! run first, and with idle cores nothing changes. Linux's CFS gives a runnable thread a
//! share of the CPU by weight, so a lowered thread is slowed, never starved.
//!
//! The priority is the thread's own (`setpriority(PRIO_PROCESS, tid)` names one thread on
//! Linux), and an unprivileged thread may lower its priority but not raise it back: the
//! thread stays lowered until its connection ends, and the thread with it. That is one
//! backend's connection, whose later asks are, as a rule, over the same catalog.

/// Frames above this many bytes are large: about 150 relations of 20 columns. The
/// snapshots of the demo's roles and of Spider's databases are a few kilobytes.
pub const LARGE_FRAME: usize = 1 << 20;

/// The nice value of a thread serving a large frame: a weight of 110 against 1024 at 0,
/// so about a tenth of a core when it competes with a thread at 0.
pub const LARGE_NICE: libc::c_int = 10;

/// The calling thread's priority, lowered once for the frames it reads.
#[derive(Debug, Default)]
pub struct SocketPriority {
    lowered: bool,
}

impl SocketPriority {
    /// Seen a frame that declares `len` bytes: lowers this thread's priority, once, if the
    /// frame is large. A failure leaves the priority as it was (the ask is served all the
    /// same).
    pub fn saw_frame(&mut self, len: usize) {
        if self.lowered || len <= LARGE_FRAME {
            return;
        }
        self.lowered = true;
        lower_this_thread(LARGE_NICE);
    }

    #[cfg(test)]
    fn is_lowered(&self) -> bool {
        self.lowered
    }
}

/// Raises the calling thread's nice value to `nice`, never lowering it (see the module;
/// a worker started as root could otherwise raise a thread's priority).
fn lower_this_thread(nice: libc::c_int) {
    match this_thread_nice() {
        Some(current) if current < nice => {}
        _ => return,
    }
    // SAFETY: gettid and setpriority take no pointers; on Linux a thread id names exactly
    // one thread for PRIO_PROCESS.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice);
    }
}

/// The calling thread's nice value, `None` if it cannot be read.
pub fn this_thread_nice() -> Option<libc::c_int> {
    // SAFETY: errno is this thread's; getpriority takes no pointers. It may return -1 as
    // a value, so errno, cleared first, tells a failure.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t);
        (nice != -1 || *libc::__errno_location() == 0).then_some(nice)
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn a_large_frame_lowers_only_its_own_thread() {
        let before = this_thread_nice();
        let lowered = std::thread::spawn(|| {
            let mut p = SocketPriority::default();
            p.saw_frame(LARGE_FRAME);
            let small = (p.is_lowered(), this_thread_nice());
            p.saw_frame(LARGE_FRAME + 1);
            p.saw_frame(LARGE_FRAME + 1);
            (small, p.is_lowered(), this_thread_nice())
        })
        .join()
        .expect("the thread ran");
        let ((small_lowered, small_nice), large_lowered, large_nice) = lowered;
        assert!(!small_lowered);
        assert_eq!(small_nice, before);
        assert!(large_lowered);
        assert_eq!(large_nice, before.map(|b| b.max(LARGE_NICE)));
        assert_eq!(
            this_thread_nice(),
            before,
            "the spawning thread is untouched"
        );
    }
}
