//! The 4096-byte `checkpoint` file (spec 3.3): big-endian i64 fields at 0, 8, 16, 24, 32.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Size of the checkpoint file.
pub const CHECKPOINT_FILE_SIZE: usize = 4096;

/// The checkpoint's fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointData {
    /// Store timestamp of the last flushed CommitLog data (on a slave: last dispatched).
    pub physic_msg_timestamp: i64,
    /// Store timestamp of the last message dispatched into a ConsumeQueue and flushed.
    pub logics_msg_timestamp: i64,
    /// End timestamp of the last full, flushed index file.
    pub index_msg_timestamp: i64,
    /// 5.x: the master's flushed offset.
    pub master_flushed_offset: i64,
    /// 5.x: the confirm offset (what dispatch may consume).
    pub confirm_phy_offset: i64,
}

impl CheckpointData {
    pub fn encode(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        for (i, v) in [
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ]
        .iter()
        .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    pub fn decode(b: &[u8]) -> Self {
        let f = |i: usize| {
            b.get(i * 8..i * 8 + 8).map(|s| i64::from_be_bytes(s.try_into().unwrap_or_default())).unwrap_or(0)
        };
        CheckpointData {
            physic_msg_timestamp: f(0),
            logics_msg_timestamp: f(1),
            index_msg_timestamp: f(2),
            master_flushed_offset: f(3),
            confirm_phy_offset: f(4),
        }
    }

    /// RocketMQ's `getMinTimestamp`: `min(physic, logics) - 3000`, at least 0.
    pub fn min_timestamp(&self) -> i64 {
        (self.physic_msg_timestamp.min(self.logics_msg_timestamp) - 3000).max(0)
    }

    /// `min(min_timestamp, index)`.
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp)
    }
}

/// The checkpoint file, updated in memory and written with `flush`.
pub struct StoreCheckpoint {
    path: PathBuf,
    file: File,
    data: Mutex<CheckpointData>,
}

impl StoreCheckpoint {
    /// Opens (or creates, zeroed) the checkpoint at `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let len = file.metadata()?.len();
        let mut buf = [0u8; 40];
        if len >= 40 {
            file.read_exact_at(&mut buf, 0)?;
        }
        if len != CHECKPOINT_FILE_SIZE as u64 {
            file.set_len(CHECKPOINT_FILE_SIZE as u64)?;
        }
        Ok(StoreCheckpoint { path: path.to_path_buf(), file, data: Mutex::new(CheckpointData::decode(&buf)) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn get(&self) -> CheckpointData {
        *self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes fields in memory.
    pub fn update(&self, f: impl FnOnce(&mut CheckpointData)) {
        f(&mut self.data.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Writes the fields and fsyncs.
    pub fn flush(&self) -> io::Result<()> {
        let bytes = self.get().encode();
        self.file.write_all_at(&bytes, 0)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_big_endian_at_fixed_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let cp = StoreCheckpoint::open(&p).unwrap();
        cp.update(|d| {
            d.physic_msg_timestamp = 0x0102030405060708;
            d.logics_msg_timestamp = 2;
            d.index_msg_timestamp = 3;
            d.master_flushed_offset = 4;
            d.confirm_phy_offset = 1_815_111;
        });
        cp.flush().unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 4096);
        assert_eq!(&raw[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&raw[8..16], &2i64.to_be_bytes());
        assert_eq!(&raw[32..40], &1_815_111i64.to_be_bytes());
        assert!(raw[40..].iter().all(|&b| b == 0));
        drop(cp);
        assert_eq!(StoreCheckpoint::open(&p).unwrap().get().confirm_phy_offset, 1_815_111);
    }

    #[test]
    fn min_timestamps() {
        let d = CheckpointData {
            physic_msg_timestamp: 10_000,
            logics_msg_timestamp: 9_000,
            index_msg_timestamp: 1_000,
            ..Default::default()
        };
        assert_eq!(d.min_timestamp(), 6_000);
        assert_eq!(d.min_timestamp_index(), 1_000);
        assert_eq!(CheckpointData::default().min_timestamp(), 0);
    }
}
