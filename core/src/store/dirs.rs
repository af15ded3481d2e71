//! The directories of one log's files: RocketMQ's multi-directory CommitLog
//! (`storePathCommitLog` with `;`-separated directories, `readOnlyCommitLogStorePaths`; spec
//! 1.7, RocketMQ's `MultiPathMappedFileQueue`). Every directory is read at load; a new file
//! goes to one of the writable directories, chosen by the file's index, so consecutive files
//! take turns across disks. A single directory is the common case and costs nothing more.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a log's files live and where its new files go.
#[derive(Debug)]
pub struct LogDirs {
    /// Directories new files go to, sorted by their names as RocketMQ sorts them (as strings),
    /// with whether the last disk reading found each one's file system above
    /// `diskSpaceCleanForciblyRatio`.
    write: Vec<(PathBuf, AtomicBool)>,
    /// Directories whose files are read (and deleted by retention) but never get a new file.
    read_only: Vec<PathBuf>,
}

impl LogDirs {
    /// One directory (a ConsumeQueue, or a CommitLog in one place).
    pub fn single(dir: &Path) -> Self {
        LogDirs { write: vec![(dir.to_path_buf(), AtomicBool::new(false))], read_only: Vec::new() }
    }

    /// `write` directories (at least one) and `read_only` ones; a directory named twice counts
    /// once, and one named in both lists is read-only.
    pub fn new(write: &[PathBuf], read_only: &[PathBuf]) -> io::Result<Self> {
        let mut ro: Vec<PathBuf> = Vec::new();
        for d in read_only {
            if !ro.contains(d) {
                ro.push(d.clone());
            }
        }
        let mut w: Vec<PathBuf> = Vec::new();
        for d in write {
            if !ro.contains(d) && !w.contains(d) {
                w.push(d.clone());
            }
        }
        if w.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no directory to write new CommitLog files to: every storePathCommitLog entry is read-only",
            ));
        }
        w.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
        Ok(LogDirs { write: w.into_iter().map(|d| (d, AtomicBool::new(false))).collect(), read_only: ro })
    }

    /// The first writable directory (the only one of a single-directory log).
    pub fn primary(&self) -> &Path {
        &self.write[0].0
    }

    /// Whether the log spans more than one directory.
    pub fn is_multi(&self) -> bool {
        self.write.len() + self.read_only.len() > 1
    }

    /// Every directory, writable ones first.
    pub fn all(&self) -> impl Iterator<Item = &Path> {
        self.write.iter().map(|(d, _)| d.as_path()).chain(self.read_only.iter().map(PathBuf::as_path))
    }

    /// The directories new files go to.
    pub fn writable(&self) -> impl Iterator<Item = &Path> {
        self.write.iter().map(|(d, _)| d.as_path())
    }

    /// Whether `dir` is one of the read-only directories.
    pub fn is_read_only(&self, dir: &Path) -> bool {
        self.read_only.iter().any(|d| d == dir)
    }

    /// Records whether the file system of writable directory `dir` is above
    /// `diskSpaceCleanForciblyRatio` (new files avoid it while another has room).
    pub fn set_full(&self, dir: &Path, full: bool) {
        if let Some((_, f)) = self.write.iter().find(|(d, _)| d == dir) {
            f.store(full, Ordering::Relaxed);
        }
    }

    /// The directory for a new file starting at `start`, as RocketMQ places it: the writable
    /// directories not marked full (all writable ones if every one is), sorted, taken in
    /// turn by the file's index (`start / file_size`).
    pub fn for_file(&self, start: u64, file_size: usize) -> &Path {
        if self.write.len() == 1 {
            return &self.write[0].0;
        }
        let idx = start / file_size as u64;
        let open = self.write.iter().filter(|(_, full)| !full.load(Ordering::Relaxed)).count();
        let pick = |n: usize, with_full: bool| {
            self.write
                .iter()
                .filter(|(_, full)| with_full || !full.load(Ordering::Relaxed))
                .nth((idx % n as u64) as usize)
                .map(|(d, _)| d.as_path())
        };
        let chosen = if open > 0 { pick(open, false) } else { None };
        chosen.or_else(|| pick(self.write.len(), true)).unwrap_or(&self.write[0].0)
    }

    /// The other writable directories to try, in order after `tried`, when creating a file
    /// in `tried` failed for lack of space.
    pub fn others(&self, tried: &Path) -> Vec<PathBuf> {
        let at = self.write.iter().position(|(d, _)| d == tried).unwrap_or(0);
        (1..self.write.len()).map(|i| self.write[(at + i) % self.write.len()].0.clone()).collect()
    }

    /// The directories for messages: `a` or `a, b (read-only: c)`.
    pub fn describe(&self) -> String {
        let w: Vec<String> = self.writable().map(|d| d.display().to_string()).collect();
        let mut s = w.join(", ");
        if !self.read_only.is_empty() {
            let r: Vec<String> = self.read_only.iter().map(|d| d.display().to_string()).collect();
            s.push_str(&format!(" (read-only: {})", r.join(", ")));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(w: &[&str], r: &[&str]) -> LogDirs {
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        LogDirs::new(&p(w), &p(r)).unwrap()
    }

    /// RocketMQ's `MultiPathMappedFileQueueTest`: files go round the sorted directories by
    /// their index, skip a full one, and use all of them again when all are full.
    #[test]
    fn files_take_turns_across_sorted_directories_and_skip_full_ones() {
        let d = dirs(&["/s/c", "/s/a", "/s/b"], &[]);
        let at = |i: u64| d.for_file(i * 100, 100).to_path_buf();
        assert_eq!((0..4).map(at).collect::<Vec<_>>(), ["/s/a", "/s/b", "/s/c", "/s/a"].map(PathBuf::from));
        d.set_full(Path::new("/s/b"), true);
        // Two left: the index picks among them.
        assert_eq!(at(3), PathBuf::from("/s/c"));
        assert_eq!(at(4), PathBuf::from("/s/a"));
        for x in ["/s/a", "/s/c"] {
            d.set_full(Path::new(x), true);
        }
        assert_eq!(at(1), PathBuf::from("/s/b"), "every one full: all of them again");
        assert_eq!(d.others(Path::new("/s/b")), ["/s/c", "/s/a"].map(PathBuf::from));
    }

    /// Sorted as strings, as RocketMQ sorts them: "/a-b" before "/a/b".
    #[test]
    fn directories_sort_by_their_names_as_strings() {
        let d = dirs(&["/a/b", "/a-b"], &[]);
        assert_eq!(d.primary(), Path::new("/a-b"));
    }

    #[test]
    fn read_only_directories_are_read_and_never_written() {
        let d = dirs(&["/x", "/y"], &["/y", "/old"]);
        assert_eq!(d.writable().collect::<Vec<_>>(), [Path::new("/x")]);
        assert_eq!(d.all().collect::<Vec<_>>(), [Path::new("/x"), Path::new("/y"), Path::new("/old")]);
        assert!((0..5).all(|i| d.for_file(i * 10, 10) == Path::new("/x")));
        assert!(d.is_multi() && d.is_read_only(Path::new("/old")));
        assert_eq!(d.describe(), "/x (read-only: /y, /old)");
        let err = LogDirs::new(&[PathBuf::from("/y")], &[PathBuf::from("/y")]).unwrap_err();
        assert!(err.to_string().contains("read-only"), "{err}");
        assert!(!LogDirs::single(Path::new("/z")).is_multi());
    }
}
