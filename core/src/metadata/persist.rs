//! Atomic, durable config files with a `.bak` of the last good content, and the per-table
//! bookkeeping (one writer at a time, a dirty flag) built on them.
//!
//! Write: `<f>.tmp` is written and fsynced; the current `<f>` (if known good) is copied to
//! `<f>.bak` through `<f>.bak.tmp`; `<f>.tmp` is renamed over `<f>`; the directory is fsynced.
//! `<f>` therefore always exists and is always a whole document: a crash leaves either the
//! old or the new content, and a failed write leaves the old file untouched. Copying (rather
//! than renaming `<f>` to `<f>.bak`, as RocketMQ's develop branch does) keeps `<f>` readable by
//! tools during the write, and a copy (unlike a hard link) survives a Java broker later
//! rewriting `<f>` in place.
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
        ConfigFile { path, main_is_good: false }
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

        let swapped =
            if self.main_is_good && self.path.exists() { self.backup() } else { Ok(()) }.and_then(|()| {
                fs::rename(&tmp, &self.path)
                    .map_err(|e| MetadataError::io(&tmp, "rename over the config file", e))
            });
        if let Err(e) = swapped {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.main_is_good = true;
        sync_dir(&dir)
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

    #[test]
    fn store_then_load_keeps_previous_as_bak() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join("x.json");
        let mut f = ConfigFile::new(path.clone());
        f.store(b"1").unwrap();
        assert!(!f.bak_path().exists(), "nothing to back up on first write");
        f.store(b"2").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "2");
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "1");
        assert!(!sibling(&path, ".tmp").exists());
        assert_eq!(load(&path).unwrap(), Some(2));
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let mut f = ConfigFile::new(path.clone());
        f.store(b"1").unwrap();
        // A directory that is not empty where `.bak` goes: the copy is made, its rename fails.
        fs::create_dir(f.bak_path()).unwrap();
        fs::write(f.bak_path().join("in-the-way"), "x").unwrap();
        let err = f.store(b"2").unwrap_err().to_string();
        assert!(err.contains("x.json.bak.tmp"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "1");
        assert!(!sibling(&path, ".bak.tmp").exists(), "the failed copy was left behind");
        assert!(!sibling(&path, ".tmp").exists(), "the new content was left behind");
        fs::remove_dir_all(f.bak_path()).unwrap();
        f.store(b"3").unwrap();
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "1");
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
