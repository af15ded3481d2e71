//! The store's `lock` file (one broker per store directory) and `abort` file (unclean exit).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive lock on a store directory, held while the store is open.
pub struct StoreLock {
    _file: File,
    path: PathBuf,
}

impl StoreLock {
    /// Takes the lock, or fails at once if another process (or another store in this process)
    /// holds it.
    pub fn acquire(path: &Path) -> io::Result<Self> {
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("{} is locked: another broker is using this store", path.display()),
                ));
            }
            return Err(err);
        }
        file.set_len(0)?;
        file.write_all(b"lock")?;
        Ok(StoreLock { _file: file, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
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
