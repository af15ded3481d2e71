//! A store, or a broker, used in a process forked from the one that opened it.
//!
//! A child made by `fork()` (Python's `os.fork`, `multiprocessing` with the fork start method,
//! a C host's `fork`) keeps the parent's memory, including the store's files mapped
//! `MAP_SHARED`, but none of its threads. A put in the child appended at the child's copy of
//! the write position, over records the parent had appended and acknowledged since, in the
//! same file pages the parent uses; and dropping the broker at the child's exit joined threads
//! that do not exist there (the process aborted), after writing the parent's checkpoint and
//! removing its `abort` file. So every part that owns threads or writes files records the fork
//! generation it was made in, and in a later generation refuses writes and shuts down without
//! touching anything: the parent still owns it all.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped in the child after every `fork()`. Read by every put: on a cache line of its own,
/// so that no static written by another thread shares it.
static GENERATION: crossbeam_utils::CachePadded<AtomicU64> =
    crossbeam_utils::CachePadded::new(AtomicU64::new(0));
static INSTALL: Once = Once::new();

extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Where a part was made: its fork generation and process id.
#[derive(Clone, Copy, Debug)]
pub struct ForkGuard {
    generation: u64,
    pid: u32,
}

impl ForkGuard {
    /// A guard for a part made now (installs the fork handler on first use).
    pub fn new() -> Self {
        INSTALL.call_once(|| {
            // SAFETY: `in_child` only does an atomic add, which is async-signal-safe, as a
            // handler run in the child of a multithreaded process must be.
            unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        });
        ForkGuard { generation: GENERATION.load(Ordering::Relaxed), pid: std::process::id() }
    }

    /// Whether this process is a fork of the one that made the part. One relaxed load.
    pub fn forked(&self) -> bool {
        GENERATION.load(Ordering::Relaxed) != self.generation
    }

    /// Why a forked child may not write.
    pub fn reason(&self) -> String {
        format!(
            "this process (pid {}) is a fork of the process that opened the store (pid {}): it shares the \
             store's mapped files but none of its threads, and a write would land on records the parent \
             owns. Open the store after forking, in one process only",
            std::process::id(),
            self.pid
        )
    }
}

impl Default for ForkGuard {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_sees_the_fork_and_the_parent_does_not() {
        let guard = ForkGuard::new();
        assert!(!guard.forked());
        // SAFETY: the child only reads an atomic and calls _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = if guard.forked() && !ForkGuard::new().forked() { 0 } else { 1 };
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
        assert!(!guard.forked());
    }
}
