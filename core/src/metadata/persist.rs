//! Atomic, durable config files with a `.bak` of the last good content, and the per-table
//! bookkeeping (one writer at a time, a dirty flag) built on them.
//!
//! Write: `<f>.tmp` is written and fsynced; if the current `<f>` is known good, `<f>.tmp` and
//! `<f>` trade places in one atomic `renameat2(RENAME_EXCHANGE)` and the old content, now at
//! `<f>.tmp`, is renamed to `<f>.bak`; else `<f>.tmp` is renamed over `<f>`; the directory is
//! fsynced. `<f>` therefore always exists and is always a whole document: a crash leaves either
//! the old or the new content, and a failed write leaves the old file in place (unless the
//! exchange can neither be completed nor undone: then `<f>` holds the new content, whole). The old content
//! becomes the backup without being copied: a copy and its fsync doubled the I/O of every
//! write (a table is rewritten whole for each change; see `named_table`). Unlike renaming `<f>`
//! to `<f>.bak` first (RocketMQ's develop branch), `<f>` stays readable by tools throughout;
//! unlike a hard link, `<f>` and `<f>.bak` never share an inode, so a Java broker that later
//! rewrites either in place (5.x up to 5.3 does) cannot change the other. Where the file system
//! cannot exchange (`EINVAL` on some network and FUSE file systems, or no `renameat2`), the old
//! content is copied to `<f>.bak` through `<f>.bak.tmp` and fsynced, as before. A `<f>` this
//! process did not write (loaded at start) is fsynced once before it becomes the backup, since
//! its writer may not have.
//!
//! Load: `<f>` if it parses, else `<f>.bak` with a warning; both absent or empty is a fresh
//! table; anything else is an error naming both files. A UTF-8 byte order mark at the start of
//! a file is skipped, as fastjson does (an editor may have added one). A `<f>` that exists but
//! cannot be read (EACCES, EIO, ...) is an error naming it and the OS error, not a reason to
//! fall back to the older `.bak`: its content may be fine. A `<f>` that is read but does not
//! parse (corrupt JSON, invalid UTF-8) while `.bak` loads is renamed to
//! `<f>.corrupt-<unix millis>`, with a warning naming both, before anything can overwrite it:
//! it may hold changes newer than the `.bak`, for the operator to recover. An empty or
//! whitespace-only `<f>` holds nothing worth keeping and is left to be overwritten.
//!
//! A failed fsync does not poison the table: every persist rewrites the whole document into a
//! fresh file and fsyncs that, so no page lost by an earlier failure can hide behind a later
//! success. The table stays dirty and the next persist retries.

use super::MetadataError;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// One config file on disk and its siblings.
#[derive(Debug)]
pub(crate) struct ConfigFile {
    path: PathBuf,
    /// Whether `path` holds a document we trust. After loading from `.bak` it does not, and
    /// copying it over the good `.bak` would destroy the only good copy.
    main_is_good: bool,
    /// Whether `path`'s content is known to be on disk (this process wrote and fsynced it).
    main_is_synced: bool,
    /// The file system refused to exchange two names: copy to `.bak` instead from now on.
    exchange_unsupported: bool,
    /// Tests: the errors (OS error numbers) the next exchanges return; `None` makes the call.
    #[cfg(test)]
    exchange_results: std::collections::VecDeque<Option<i32>>,
}

/// What was found at one of the two paths.
enum Found<T> {
    Absent,
    Empty,
    /// The file exists but the OS would not hand over its bytes (EACCES, EIO, EISDIR, ...).
    Unreadable(io::Error),
    /// The bytes were read but are not a document: corrupt.
    Bad(String),
    Good(T),
}

impl ConfigFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        ConfigFile {
            path,
            main_is_good: false,
            main_is_synced: false,
            exchange_unsupported: false,
            #[cfg(test)]
            exchange_results: Default::default(),
        }
    }

    pub(crate) fn bak_path(&self) -> PathBuf {
        sibling(&self.path, ".bak")
    }

    fn tmp_path(&self) -> PathBuf {
        sibling(&self.path, ".tmp")
    }

    /// Loads the file, falling back to `.bak`. `Ok(None)`: neither holds anything, start empty.
    /// `parse` gets the text and an origin string for its errors.
    pub(crate) fn load<T>(
        &mut self,
        parse: impl Fn(&str, &str) -> Result<T, MetadataError>,
    ) -> Result<Option<(T, String)>, MetadataError> {
        let main = match read_and_parse(&self.path, &parse) {
            Found::Good(v) => {
                self.main_is_good = true;
                return Ok(Some(v));
            }
            // Its content may well be fine, and newer than the .bak: falling back would
            // silently roll the table back (and the next write would replace the file).
            Found::Unreadable(e) => return Err(MetadataError::io(&self.path, "read", e)),
            other => other,
        };
        self.main_is_good = false;
        let bak_path = self.bak_path();
        let bak = read_and_parse(&bak_path, &parse);
        match (main, bak) {
            (Found::Bad(reason), Found::Good(v)) => {
                // The next write would rename over the corrupt file, and whatever it holds
                // beyond the .bak would be gone: move it aside for the operator first.
                let kept = self.preserve_corrupt()?;
                tracing::warn!(
                    file = %self.path.display(),
                    %reason,
                    "config file corrupt: moved it to {} and loaded its backup {}",
                    kept.display(),
                    bak_path.display()
                );
                Ok(Some(v))
            }
            (main, Found::Good(v)) => {
                tracing::warn!(
                    file = %self.path.display(),
                    reason = %describe(&main),
                    "config file unusable, loaded its backup {}",
                    bak_path.display()
                );
                Ok(Some(v))
            }
            (Found::Absent, Found::Absent) => Ok(None),
            (main @ (Found::Absent | Found::Empty), bak @ (Found::Absent | Found::Empty)) => {
                tracing::warn!(
                    file = %self.path.display(),
                    main = %describe(&main),
                    bak = %describe(&bak),
                    "config file and its backup hold nothing, starting with an empty table"
                );
                Ok(None)
            }
            (main, bak) => Err(MetadataError::Unloadable {
                path: self.path.clone(),
                reason: describe(&main),
                bak_path,
                bak_reason: describe(&bak),
            }),
        }
    }

    /// Renames the (corrupt) file to `<f>.corrupt-<unix millis>`, a later millisecond if that
    /// name is taken, and makes the rename durable. Returns the new name.
    fn preserve_corrupt(&self) -> Result<PathBuf, MetadataError> {
        let mut stamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let target = loop {
            let candidate = sibling(&self.path, &format!(".corrupt-{stamp}"));
            if fs::symlink_metadata(&candidate).is_err() {
                break candidate;
            }
            stamp += 1;
        };
        fs::rename(&self.path, &target)
            .map_err(|e| MetadataError::io(&target, "rename the corrupt config file to", e))?;
        sync_dir(&parent_dir(&self.path))?;
        Ok(target)
    }

    /// Replaces the file's content atomically and durably, keeping the previous good content
    /// as `.bak`.
    pub(crate) fn store(&mut self, contents: &[u8]) -> Result<(), MetadataError> {
        let dir = parent_dir(&self.path);
        fs::create_dir_all(&dir).map_err(|e| MetadataError::io(&dir, "create directory", e))?;

        let tmp = self.tmp_path();
        if let Err(e) = write_synced(&tmp, contents) {
            // Leave no half-written tmp behind to confuse an operator; the old file is intact.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }

        if self.main_is_good && self.path.exists() {
            self.replace_keeping_backup(&tmp)?;
        } else if let Err(e) = fs::rename(&tmp, &self.path) {
            let _ = fs::remove_file(&tmp);
            return Err(MetadataError::io(&tmp, "rename over the config file", e));
        }
        self.main_is_good = true;
        self.main_is_synced = true;
        sync_dir(&dir)
    }

    /// Puts `tmp` (the new content) in place of the (good) file, whose content becomes `.bak`.
    /// On an error the file is as it was and `tmp` is removed, except where an exchange cannot
    /// be undone (see [`Self::finish_exchange`]).
    fn replace_keeping_backup(&mut self, tmp: &Path) -> Result<(), MetadataError> {
        let discard = |e: MetadataError| {
            let _ = fs::remove_file(tmp);
            e
        };
        if !self.main_is_synced {
            File::open(&self.path)
                .and_then(|f| f.sync_all())
                .map_err(|e| discard(MetadataError::io(&self.path, "fsync", e)))?;
            self.main_is_synced = true;
        }
        if !self.exchange_unsupported {
            match self.exchange(tmp) {
                Ok(()) => return self.finish_exchange(tmp),
                // Nothing moved: a file system without the exchange (some network and FUSE
                // ones), a kernel without renameat2, or a seccomp filter refusing it.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EPERM)
                    ) || e.kind() == io::ErrorKind::Unsupported =>
                {
                    tracing::info!(
                        file = %self.path.display(),
                        "the file system cannot exchange two names ({e}): the previous content is copied to .bak instead"
                    );
                    self.exchange_unsupported = true;
                }
                Err(e) => return Err(discard(MetadataError::io(tmp, "exchange with the config file", e))),
            }
        }
        self.backup()
            .and_then(|()| {
                fs::rename(tmp, &self.path)
                    .map_err(|e| MetadataError::io(tmp, "rename over the config file", e))
            })
            .map_err(discard)
    }

    /// After the exchange `tmp` holds the old content: renames it to `.bak`. If that fails,
    /// exchanges back and removes the new content; if even that fails, the file holds the
    /// new content, `tmp` keeps the old one until the next write, and the log says so.
    fn finish_exchange(&mut self, tmp: &Path) -> Result<(), MetadataError> {
        let bak = self.bak_path();
        let Err(e) = fs::rename(tmp, &bak) else {
            return Ok(());
        };
        let err = MetadataError::io(&bak, "rename the previous config file to", e);
        match self.exchange(tmp) {
            Ok(()) => {
                let _ = fs::remove_file(tmp);
                Err(err)
            }
            Err(undo) => {
                tracing::error!(
                    file = %self.path.display(),
                    previous = %tmp.display(),
                    "config file written, but its previous content could not be renamed to .bak ({err}) \
                     nor put back ({undo}): it is kept at the previous= path"
                );
                Err(err)
            }
        }
    }

    /// Atomically swaps the names `tmp` and the file.
    fn exchange(&mut self, tmp: &Path) -> io::Result<()> {
        #[cfg(test)]
        if let Some(Some(errno)) = self.exchange_results.pop_front() {
            return Err(io::Error::from_raw_os_error(errno));
        }
        exchange_names(tmp, &self.path)
    }

    /// Copies the current file to `.bak` through `.bak.tmp`, so `.bak` is never half-written.
    /// A copy that fails is removed, as the `.tmp` of a failed write is.
    fn backup(&self) -> Result<(), MetadataError> {
        let bak = self.bak_path();
        let bak_tmp = sibling(&self.path, ".bak.tmp");
        let copied = fs::copy(&self.path, &bak_tmp)
            .map_err(|e| MetadataError::io(&bak_tmp, "copy the config file to", e))
            .and_then(|_| {
                File::open(&bak_tmp)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| MetadataError::io(&bak_tmp, "fsync", e))
            })
            .and_then(|()| {
                fs::rename(&bak_tmp, &bak).map_err(|e| MetadataError::io(&bak_tmp, "rename to .bak", e))
            });
        if copied.is_err() {
            let _ = fs::remove_file(&bak_tmp);
        }
        copied
    }
}

fn read_and_parse<T>(
    path: &Path,
    parse: &impl Fn(&str, &str) -> Result<T, MetadataError>,
) -> Found<(T, String)> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Found::Absent,
        Err(e) => return Found::Unreadable(e),
    };
    let mut text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return Found::Bad(format!("invalid UTF-8: {}", e.utf8_error())),
    };
    // A byte order mark, as an editor or a Windows tool may write: fastjson skips it.
    if text.starts_with(BOM) {
        text.drain(..BOM.len_utf8());
    }
    if text.trim().is_empty() {
        return Found::Empty;
    }
    match parse(&text, &path.display().to_string()) {
        Ok(v) => Found::Good((v, text)),
        Err(e) => Found::Bad(e.to_string()),
    }
}

/// U+FEFF, the UTF-8 byte order mark (EF BB BF).
const BOM: char = '\u{feff}';

fn describe<T>(found: &Found<T>) -> String {
    match found {
        Found::Absent => "missing".to_string(),
        Found::Empty => "empty".to_string(),
        Found::Unreadable(e) => format!("cannot read: {e}"),
        Found::Bad(reason) => reason.clone(),
        Found::Good(_) => "ok".to_string(),
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(target_os = "linux")]
fn exchange_names(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: two NUL-terminated paths that outlive the call; AT_FDCWD resolves them as `open`
    // would. The call only renames.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn exchange_names(_a: &Path, _b: &Path) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

fn write_synced(path: &Path, contents: &[u8]) -> Result<(), MetadataError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| MetadataError::io(path, "create", e))?;
    f.write_all(contents).map_err(|e| MetadataError::io(path, "write", e))?;
    f.sync_all().map_err(|e| MetadataError::io(path, "fsync", e))
}

/// Makes the renames durable. Without it a crash can bring back the old directory entry.
fn sync_dir(dir: &Path) -> Result<(), MetadataError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| MetadataError::io(dir, "fsync directory", e))
}

/// Persistence bookkeeping shared by the four tables: the file (one writer at a time) and
/// whether memory holds changes the file does not.
#[derive(Debug)]
pub(crate) struct Store {
    /// Kept outside the lock so asking for the path never waits for an fsync.
    path: PathBuf,
    file: Mutex<ConfigFile>,
    dirty: AtomicBool,
}

impl Store {
    /// Opens `path`, loading it with `parse` (see [`ConfigFile::load`]).
    pub(crate) fn open<T>(
        path: PathBuf,
        parse: impl Fn(&str, &str) -> Result<T, MetadataError>,
    ) -> Result<(Self, Option<(T, String)>), MetadataError> {
        let mut file = ConfigFile::new(path.clone());
        let loaded = file.load(parse)?;
        Ok((Store { path, file: Mutex::new(file), dirty: AtomicBool::new(false) }, loaded))
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.path.clone()
    }

    pub(crate) fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Writes what `snapshot` returns. The snapshot is taken while holding the file lock, so
    /// of two racing persists the later write carries the later state; the dirty flag is
    /// cleared before the snapshot, so a change racing with it leaves the table dirty.
    pub(crate) fn persist(
        &self,
        snapshot: impl FnOnce() -> Result<String, MetadataError>,
    ) -> Result<(), MetadataError> {
        let mut file = self.lock();
        self.write_locked(&mut file, snapshot)
    }

    /// Waits for any persist in progress, then writes what `snapshot` returns if the table is
    /// dirty; returns whether it wrote.
    ///
    /// This is what a call that changed nothing must do before it answers "done": the change
    /// it asked for may be in memory only (an earlier write failed), or on its way to disk in
    /// another thread's persist that can still fail. Waiting on the file lock settles the
    /// latter (a failure leaves the table dirty again); a dirty table is then written here.
    /// The caller must not hold the state lock: [`persist`](Self::persist) takes the file lock
    /// first and the state lock inside `snapshot`.
    pub(crate) fn persist_if_dirty(
        &self,
        snapshot: impl FnOnce() -> Result<String, MetadataError>,
    ) -> Result<bool, MetadataError> {
        let mut file = self.lock();
        if !self.is_dirty() {
            return Ok(false);
        }
        self.write_locked(&mut file, snapshot).map(|()| true)
    }

    fn write_locked(
        &self,
        file: &mut ConfigFile,
        snapshot: impl FnOnce() -> Result<String, MetadataError>,
    ) -> Result<(), MetadataError> {
        self.dirty.store(false, Ordering::Release);
        let result = snapshot().and_then(|text| file.store(text.as_bytes()));
        if result.is_err() {
            self.mark_dirty();
        }
        result
    }

    fn lock(&self) -> MutexGuard<'_, ConfigFile> {
        // A panic while holding this lock cannot leave the ConfigFile inconsistent (the disk
        // is, by design, always consistent), so a poisoned lock is still usable.
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_num(text: &str, origin: &str) -> Result<i64, MetadataError> {
        text.trim().parse().map_err(|e| MetadataError::Json {
            origin: origin.to_string(),
            line: 1,
            column: 1,
            reason: format!("{e}"),
        })
    }

    fn load(path: &Path) -> Result<Option<i64>, MetadataError> {
        ConfigFile::new(path.to_path_buf()).load(parse_num).map(|o| o.map(|(v, _)| v))
    }

    /// Both ways of keeping the backup: exchanging names, and copying where the file system
    /// cannot exchange.
    fn config_file(path: &Path, exchange: bool) -> ConfigFile {
        ConfigFile { exchange_unsupported: !exchange, ..ConfigFile::new(path.to_path_buf()) }
    }

    #[test]
    fn store_then_load_keeps_previous_as_bak() {
        for exchange in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("config").join("x.json");
            let mut f = config_file(&path, exchange);
            f.store(b"1").unwrap();
            assert!(!f.bak_path().exists(), "nothing to back up on first write");
            f.store(b"2").unwrap();
            assert_eq!(fs::read_to_string(&path).unwrap(), "2");
            assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "1");
            f.store(b"3").unwrap();
            assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "2");
            assert!(!sibling(&path, ".tmp").exists() && !sibling(&path, ".bak.tmp").exists());
            assert_eq!(load(&path).unwrap(), Some(3));
        }
    }

    /// The old content becomes the backup as it is, without a copy (the copy and its fsync
    /// doubled the I/O of every write), and the two names never share an inode.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_previous_file_itself_becomes_the_backup() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        fs::write(&path, "1").unwrap();
        let mut f = ConfigFile::new(path.clone());
        assert_eq!(f.load(parse_num).unwrap().unwrap().0, 1);
        let first = fs::metadata(&path).unwrap().ino();
        f.store(b"2").unwrap();
        let (main, bak) = (fs::metadata(&path).unwrap(), fs::metadata(f.bak_path()).unwrap());
        assert_eq!(bak.ino(), first, "the backup is a copy, not the previous file");
        assert_ne!(main.ino(), bak.ino());
        assert_eq!(main.nlink(), 1);
        assert_eq!(bak.nlink(), 1);
    }

    #[test]
    fn missing_both_is_empty_table() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(&dir.path().join("x.json")).unwrap(), None);
    }

    #[test]
    fn corrupt_or_empty_main_falls_back_to_bak() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        fs::write(sibling(&path, ".bak"), "7").unwrap();
        for main in ["garbage", "", "  \n"] {
            fs::write(&path, main).unwrap();
            assert_eq!(load(&path).unwrap(), Some(7), "main {main:?}");
        }
        fs::remove_file(&path).unwrap();
        assert_eq!(load(&path).unwrap(), Some(7));
    }

    #[test]
    fn both_corrupt_names_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        fs::write(&path, "garbage").unwrap();
        fs::write(sibling(&path, ".bak"), "junk").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("x.json (") && err.contains("x.json.bak ("), "{err}");
        // A corrupt main with no backup is also refused rather than silently emptied.
        fs::remove_file(sibling(&path, ".bak")).unwrap();
        assert!(matches!(load(&path), Err(MetadataError::Unloadable { .. })));
    }

    #[test]
    fn loaded_from_bak_does_not_back_up_the_bad_main() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        fs::write(&path, "garbage").unwrap();
        fs::write(sibling(&path, ".bak"), "7").unwrap();
        let mut f = ConfigFile::new(path.clone());
        assert_eq!(f.load(parse_num).unwrap().unwrap().0, 7);
        f.store(b"8").unwrap();
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "7");
        f.store(b"9").unwrap();
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "8");
    }

    #[test]
    fn failed_write_leaves_the_old_file_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let mut f = ConfigFile::new(path.clone());
        f.store(b"1").unwrap();
        // A directory where the tmp file should go makes the write fail before any rename.
        fs::create_dir(sibling(&path, ".tmp")).unwrap();
        let err = f.store(b"2").unwrap_err();
        assert!(matches!(err, MetadataError::Io { .. }), "{err:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "1");
        fs::remove_dir(sibling(&path, ".tmp")).unwrap();
        f.store(b"3").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "3");
    }

    #[test]
    fn failed_backup_leaves_no_copy_behind() {
        for exchange in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("x.json");
            let mut f = config_file(&path, exchange);
            f.store(b"1").unwrap();
            // A directory that is not empty where `.bak` goes: the old content (exchanged or
            // copied) cannot be renamed there.
            fs::create_dir(f.bak_path()).unwrap();
            fs::write(f.bak_path().join("in-the-way"), "x").unwrap();
            let err = f.store(b"2").unwrap_err().to_string();
            assert!(err.contains("x.json.bak"), "{err}");
            assert_eq!(fs::read_to_string(&path).unwrap(), "1", "exchange {exchange}");
            assert!(!sibling(&path, ".bak.tmp").exists(), "the failed copy was left behind");
            assert!(!sibling(&path, ".tmp").exists(), "the new content was left behind");
            fs::remove_dir_all(f.bak_path()).unwrap();
            f.store(b"3").unwrap();
            assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "1");
            assert_eq!(fs::read_to_string(&path).unwrap(), "3");
        }
    }

    /// An exchange refused as unsupported falls back to the copy for good; any other error
    /// fails the write and leaves everything as it was.
    #[test]
    fn an_unsupported_exchange_copies_and_a_failed_one_fails_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let mut f = ConfigFile::new(path.clone());
        f.store(b"1").unwrap();
        f.exchange_results.push_back(Some(libc::EIO));
        let err = f.store(b"2").unwrap_err().to_string();
        assert!(err.contains("x.json.tmp") && err.contains("exchange"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "1");
        assert!(!f.bak_path().exists() && !sibling(&path, ".tmp").exists());
        assert!(!f.exchange_unsupported);

        f.exchange_results.push_back(Some(libc::EINVAL));
        f.store(b"3").unwrap();
        assert!(f.exchange_unsupported);
        assert_eq!(fs::read_to_string(&path).unwrap(), "3");
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "1");
        // No exchange is tried again (an error queued for it would fail the write).
        f.exchange_results.push_back(Some(libc::EIO));
        f.store(b"4").unwrap();
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "3");
    }

    /// The rename to `.bak` fails and so does the exchange back: the file holds the new
    /// content, whole, and the old one is not deleted.
    #[test]
    fn an_exchange_that_cannot_be_undone_keeps_the_previous_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let mut f = ConfigFile::new(path.clone());
        f.store(b"1").unwrap();
        fs::create_dir(f.bak_path()).unwrap();
        fs::write(f.bak_path().join("in-the-way"), "x").unwrap();
        f.exchange_results.extend([None, Some(libc::EIO)]);
        assert!(f.store(b"2").is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), "2");
        assert_eq!(fs::read_to_string(sibling(&path, ".tmp")).unwrap(), "1");
    }

    /// A crash between the exchange and the rename to `.bak` leaves the old content at
    /// `.tmp`: the load takes the file, never the `.tmp`, and the next write goes on.
    #[test]
    fn a_crash_after_the_exchange_loads_the_new_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        fs::write(&path, "2").unwrap();
        fs::write(sibling(&path, ".tmp"), "1").unwrap();
        fs::write(sibling(&path, ".bak"), "0").unwrap();
        let mut f = ConfigFile::new(path.clone());
        assert_eq!(f.load(parse_num).unwrap().unwrap().0, 2);
        f.store(b"3").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "3");
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "2");
        assert!(!sibling(&path, ".tmp").exists());
    }

    #[test]
    fn store_failure_keeps_the_table_dirty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let (store, loaded) = Store::open(path.clone(), parse_num).unwrap();
        assert!(loaded.is_none());
        store.mark_dirty();
        fs::create_dir(sibling(&path, ".tmp")).unwrap();
        assert!(store.persist(|| Ok("1".into())).is_err());
        assert!(store.is_dirty());
        fs::remove_dir(sibling(&path, ".tmp")).unwrap();
        store.persist(|| Ok("1".into())).unwrap();
        assert!(!store.is_dirty());
    }
}
