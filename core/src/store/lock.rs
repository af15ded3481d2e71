//! The store's `lock` file (one broker per store directory) and `abort` file (unclean exit).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive lock on a store directory, held while the store is open.
///
/// Across processes it is a POSIX record lock (`fcntl(F_SETLK)`), which a forked child does
/// not inherit: with `flock`, a child forked while the store was open (Python's
/// multiprocessing, a shell-out) would keep the store locked after the broker closed. Within
/// this process, where record locks do not conflict, a registry of held lock files refuses a
/// second open. It knows them by device and inode, not by path: two paths to one directory
/// (a symlink, a bind mount) meet the same entry.
pub struct StoreLock {
    /// Taken (closed) by `Drop` under the registry's mutex.
    file: Option<File>,
    path: PathBuf,
    key: (u64, u64),
}

fn held() -> &'static std::sync::Mutex<std::collections::BTreeSet<(u64, u64)>> {
    static HELD: std::sync::OnceLock<std::sync::Mutex<std::collections::BTreeSet<(u64, u64)>>> =
        std::sync::OnceLock::new();
    HELD.get_or_init(Default::default)
}

fn file_key(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// The lock held elsewhere: `holder` is the process holding it, if known (`F_GETLK`).
fn locked(path: &Path, holder: Option<i32>) -> io::Error {
    let who = match holder {
        Some(pid) if pid == std::process::id() as i32 => "another broker in this process".to_string(),
        Some(pid) => format!("another broker (pid {pid})"),
        None => "another broker".to_string(),
    };
    io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("{} is locked: {who} is using this store", path.display()),
    )
}

/// The process holding a conflicting lock on `file`, as `F_GETLK` reports it.
fn lock_holder(file: &File) -> Option<i32> {
    // SAFETY: a zeroed flock struct describes the whole file; fcntl on a descriptor we own,
    // writing only into that struct.
    unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_WRLCK as _;
        fl.l_whence = libc::SEEK_SET as _;
        (libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) == 0 && i32::from(fl.l_type) != libc::F_UNLCK)
            .then_some(fl.l_pid)
    }
}

impl StoreLock {
    /// Takes the lock, or fails at once if another process (or another store in this process)
    /// holds it.
    pub fn acquire(path: &Path) -> io::Result<Self> {
        // The registry is checked before the file is opened: closing any descriptor of the
        // file would release this process's record lock, which the holder relies on. A file
        // that does not exist yet is held by no one here (the registry's mutex keeps another
        // thread from making it meanwhile).
        let mut registry = held().lock().unwrap_or_else(|e| e.into_inner());
        match std::fs::metadata(path) {
            Ok(meta) if registry.contains(&file_key(&meta)) => {
                return Err(locked(path, Some(std::process::id() as i32)));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let key = file_key(&file.metadata()?);
        // SAFETY: a zeroed flock struct describes the whole file; fcntl on a descriptor we own.
        let rc = unsafe {
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = libc::F_WRLCK as _;
            fl.l_whence = libc::SEEK_SET as _;
            libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &fl)
        };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if matches!(err.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) {
                return Err(locked(path, lock_holder(&file)));
            }
            return Err(err);
        }
        file.set_len(0)?;
        file.write_all(b"lock")?;
        registry.insert(key);
        Ok(StoreLock { file: Some(file), path: path.to_path_buf(), key })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // The descriptor is closed before the entry goes, under the registry's mutex: closed
        // after, it released the record lock that a store opened in that window had just
        // taken (the process already held it, so its fcntl succeeded), leaving it unlocked.
        let mut registry = held().lock().unwrap_or_else(|e| e.into_inner());
        drop(self.file.take());
        registry.remove(&self.key);
        drop(registry);
        #[cfg(test)]
        tests::after_drop();
    }
}

/// The lock of the CommitLog directory, or `None` where no lock file can be made beside it.
///
/// The root's `lock` cannot keep two brokers with different `storePathRootDir` from appending
/// to the same CommitLog files: one whose `storePathCommitLog` names the other's directory, or
/// two that name the same one. The lock file cannot go *into* the directory (RocketMQ's loader
/// refuses any file there that is not a CommitLog file), and a record lock needs a regular
/// file, so it is a dot file beside the directory, named after it: `<parent>/.<name>.lock`
/// (`<root>/.commitlog.lock` by default), for the directory's canonical path, so that a
/// symlink meets the same lock.
pub fn lock_commit_log_dir(dir: &Path) -> io::Result<Option<StoreLock>> {
    std::fs::create_dir_all(dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        tracing::warn!(
            "CommitLog directory {} has no parent to hold its lock file; not locked",
            dir.display()
        );
        return Ok(None);
    };
    let path = parent.join(format!(".{}.lock", name.to_string_lossy()));
    match StoreLock::acquire(&path) {
        Ok(lock) => Ok(Some(lock)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "the CommitLog directory {} is locked ({}): another broker uses it (check storePathCommitLog)",
                dir.display(),
                path.display()
            ),
        )),
        Err(e) => {
            tracing::warn!(
                "cannot create the lock file {} of the CommitLog directory {}: {e}; not locked",
                path.display(),
                dir.display()
            );
            Ok(None)
        }
    }
}

/// Whether the last run ended cleanly (no `abort` file left behind).
pub fn last_exit_ok(abort: &Path) -> bool {
    !abort.exists()
}

/// Creates the abort file with our pid, as RocketMQ 5.x does, and makes it durable.
pub fn create_abort_file(abort: &Path) -> io::Result<()> {
    let mut f = File::create(abort)?;
    write!(f, "{}", std::process::id())?;
    f.sync_all()?;
    if let Some(dir) = abort.parent() {
        super::mapped_file::sync_dir(dir)?;
    }
    Ok(())
}

/// Removes the abort file after a clean shutdown.
pub fn remove_abort_file(abort: &Path) -> io::Result<()> {
    match std::fs::remove_file(abort) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => {
            if let Some(dir) = abort.parent() {
                super::mapped_file::sync_dir(dir)?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// Run once at the end of the next `StoreLock::drop` on this thread, after its registry
        /// entry is gone (the file was once closed only after this point, with the fields).
        static AFTER_DROP: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
    }

    pub(super) fn after_drop() {
        if let Some(h) = AFTER_DROP.try_with(|h| h.borrow_mut().take()).ok().flatten() {
            h()
        }
    }

    /// Whether another process would be refused the lock: an open file description lock (on
    /// `probe`, a descriptor of the lock file) conflicts with this process's own record locks
    /// as another process's would. The caller keeps `probe` open while it matters: closing
    /// any descriptor of the file releases the process's record locks.
    #[cfg(target_os = "linux")]
    fn locked_against_others(probe: &File) -> bool {
        // SAFETY: a zeroed flock struct describes the whole file; fcntl on a descriptor we own.
        unsafe {
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = libc::F_WRLCK as _;
            fl.l_whence = libc::SEEK_SET as _;
            assert_eq!(libc::fcntl(probe.as_raw_fd(), libc::F_OFD_GETLK, &mut fl), 0);
            i32::from(fl.l_type) != libc::F_UNLCK
        }
    }

    /// Two paths to one lock file (here a hard link; a bind mount of the store directory
    /// does the same, and a symlink too): the registry knew held locks by canonical path,
    /// and record locks never conflict within a process, so a second store opened on the
    /// same files through the other path.
    #[test]
    fn another_path_to_a_held_lock_file_is_refused() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir_in(std::env::temp_dir()).unwrap());
        let first = StoreLock::acquire(&a.path().join("lock")).unwrap();
        let other = b.path().join("lock");
        std::fs::hard_link(a.path().join("lock"), &other).unwrap();
        let err = StoreLock::acquire(&other).map(|_| ()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
        drop(first);
        StoreLock::acquire(&other).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_second_holder_stays_locked_when_the_first_lock_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = StoreLock::acquire(&path).unwrap();
        let probe = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        assert!(locked_against_others(&probe));
        assert!(StoreLock::acquire(&path).is_err(), "the registry refuses a second holder");
        // A store opening on another thread right after the entry is gone.
        let second = std::rc::Rc::new(RefCell::new(None));
        let s = second.clone();
        AFTER_DROP.with(|h| {
            *h.borrow_mut() =
                Some(Box::new(move || *s.borrow_mut() = Some(StoreLock::acquire(&path).unwrap())))
        });
        drop(first);
        assert!(second.borrow().is_some(), "the hook ran");
        assert!(locked_against_others(&probe), "the second holder's lock was released by the first's close");
        drop(second.borrow_mut().take());
        assert!(!locked_against_others(&probe));
    }
}
