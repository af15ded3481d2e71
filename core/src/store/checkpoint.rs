//! The 4096-byte `checkpoint` file (spec 3.3): big-endian i64 fields at 0, 8, 16, 24, 32.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Size of the checkpoint file.
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// Bytes of it that hold fields: RocketMQ 5's 40, and rmqha's `logics_offset`.
pub const CHECKPOINT_DATA_SIZE: usize = 48;

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
    /// rmqha, at byte 40 (past RocketMQ's fields, which its loaders ignore): the CommitLog
    /// offset below which every record's ConsumeQueue unit was flushed when
    /// `logics_msg_timestamp` was taken; 0 when unknown (a checkpoint RocketMQ wrote).
    /// Recovery after a crash starts no later than it, whatever the timestamps say: store
    /// timestamps go back with the clock, offsets do not.
    pub logics_offset: i64,
}

impl CheckpointData {
    pub fn encode(&self) -> [u8; CHECKPOINT_DATA_SIZE] {
        let mut b = [0u8; CHECKPOINT_DATA_SIZE];
        for (i, v) in [
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
            self.logics_offset,
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
            logics_offset: f(5),
        }
    }

    /// Why these fields cannot have been written by a store at `now_ms` (a timestamp before
    /// the epoch or more than a day ahead, a negative offset), if so.
    pub fn implausible(&self, now_ms: i64) -> Option<String> {
        let ahead = now_ms.saturating_add(86_400_000);
        for (name, ts) in [
            ("physicMsgTimestamp", self.physic_msg_timestamp),
            ("logicsMsgTimestamp", self.logics_msg_timestamp),
            ("indexMsgTimestamp", self.index_msg_timestamp),
        ] {
            if !(0..=ahead).contains(&ts) {
                return Some(format!("{name} {ts}"));
            }
        }
        for (name, off) in [
            ("masterFlushedOffset", self.master_flushed_offset),
            ("confirmPhyOffset", self.confirm_phy_offset),
            ("logicsOffset", self.logics_offset),
        ] {
            if off < -1 {
                return Some(format!("{name} {off}"));
            }
        }
        None
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
        let mut buf = [0u8; CHECKPOINT_DATA_SIZE];
        if len >= CHECKPOINT_DATA_SIZE as u64 {
            file.read_exact_at(&mut buf, 0)?;
        } else if len >= 40 {
            file.read_exact_at(&mut buf[..40], 0)?;
        }
        if len != CHECKPOINT_FILE_SIZE as u64 {
            file.set_len(CHECKPOINT_FILE_SIZE as u64)?;
        }
        let mut data = CheckpointData::decode(&buf);
        if let Some(why) = data.implausible(super::clock::now_ms()) {
            // Recovery after a crash starts from the newest file older than these timestamps:
            // a garbage value far in the future would skip the files before it. Zero makes it
            // walk the whole log, which is slow but misses nothing.
            tracing::warn!("checkpoint {} is not believable ({why}); recovery ignores it", path.display());
            data = CheckpointData::default();
        }
        Ok(StoreCheckpoint { path: path.to_path_buf(), file, data: Mutex::new(data) })
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

    /// Writes the fields and fsyncs; an error names the file.
    pub fn flush(&self) -> io::Result<()> {
        let bytes = self.get().encode();
        self.file
            .write_all_at(&bytes, 0)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", self.path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_believed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let garbage: Vec<u8> = (0..CHECKPOINT_FILE_SIZE).map(|i| (i * 131 % 251) as u8 | 0x80).collect();
        std::fs::write(&p, &garbage).unwrap();
        assert_eq!(StoreCheckpoint::open(&p).unwrap().get(), CheckpointData::default());
        std::fs::write(&p, vec![0xFFu8; CHECKPOINT_FILE_SIZE]).unwrap();
        assert_eq!(StoreCheckpoint::open(&p).unwrap().get(), CheckpointData::default());
        // A real one is kept.
        let now = crate::store::clock::now_ms();
        let real = CheckpointData {
            physic_msg_timestamp: now,
            logics_msg_timestamp: now - 5,
            index_msg_timestamp: now - 9,
            master_flushed_offset: 4096,
            confirm_phy_offset: 4096,
            logics_offset: 4000,
        };
        let mut bytes = real.encode().to_vec();
        bytes.resize(CHECKPOINT_FILE_SIZE, 0);
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(StoreCheckpoint::open(&p).unwrap().get(), real);
    }

    #[test]
    fn layout_is_big_endian_at_fixed_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let cp = StoreCheckpoint::open(&p).unwrap();
        cp.update(|d| {
            d.physic_msg_timestamp = 0x0000_0102_0304_0506; // 2005, in ms
            d.logics_msg_timestamp = 2;
            d.index_msg_timestamp = 3;
            d.master_flushed_offset = 4;
            d.confirm_phy_offset = 1_815_111;
            d.logics_offset = 77;
        });
        cp.flush().unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 4096);
        assert_eq!(&raw[0..8], &[0, 0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(&raw[8..16], &2i64.to_be_bytes());
        assert_eq!(&raw[32..40], &1_815_111i64.to_be_bytes());
        // rmqha's own field, past the 40 bytes RocketMQ reads; nothing after it.
        assert_eq!(&raw[40..48], &77i64.to_be_bytes());
        assert!(raw[48..].iter().all(|&b| b == 0));
        drop(cp);
        let back = StoreCheckpoint::open(&p).unwrap().get();
        assert_eq!((back.confirm_phy_offset, back.logics_offset), (1_815_111, 77));
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
