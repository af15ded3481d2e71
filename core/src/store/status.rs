//! Put statuses and results (spec section 7), shared by the store, HA and every binding.

use std::net::SocketAddr;

/// The store's answer to a put. Every status but the failures at the bottom means the
/// message *is* in the CommitLog; the status says how durable it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum PutStatus {
    /// Stored, and flushed/replicated as the role requires.
    PutOk = 0,
    /// Stored, but SYNC_FLUSH did not reach the disk within `syncFlushTimeout`.
    FlushDiskTimeout = 1,
    /// Stored, but no slave acked within `slaveTimeout`.
    FlushSlaveTimeout = 2,
    /// Stored, but no slave is connected or in sync, so none will ack.
    SlaveNotAvailable = 3,
    /// Not stored: store shut down, poisoned, disk above `diskSpaceWarningLevelRatio`, or this
    /// broker is a slave.
    ServiceNotAvailable = 4,
    /// Not stored: body too large, bad topic or property characters.
    MessageIllegal = 5,
    /// Not stored: encoded properties longer than 32767 bytes.
    PropertiesSizeExceeded = 6,
    /// Not stored: the put lock has been held longer than `osPageCacheBusyTimeOutMills`.
    OsPageCacheBusy = 7,
    /// Not stored: a new CommitLog file could not be created (disk full?).
    CreateMappedFileFailed = 8,
    /// Not stored: anything else.
    UnknownError = 9,
}

impl PutStatus {
    /// Every status, in code order (`status as usize` indexes it).
    pub const ALL: [PutStatus; 10] = [
        PutStatus::PutOk,
        PutStatus::FlushDiskTimeout,
        PutStatus::FlushSlaveTimeout,
        PutStatus::SlaveNotAvailable,
        PutStatus::ServiceNotAvailable,
        PutStatus::MessageIllegal,
        PutStatus::PropertiesSizeExceeded,
        PutStatus::OsPageCacheBusy,
        PutStatus::CreateMappedFileFailed,
        PutStatus::UnknownError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PutStatus::PutOk => "PUT_OK",
            PutStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            PutStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            PutStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
            PutStatus::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            PutStatus::MessageIllegal => "MESSAGE_ILLEGAL",
            PutStatus::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
            PutStatus::OsPageCacheBusy => "OS_PAGE_CACHE_BUSY",
            PutStatus::CreateMappedFileFailed => "CREATE_MAPPED_FILE_FAILED",
            PutStatus::UnknownError => "UNKNOWN_ERROR",
        }
    }

    /// Whether the message is in the CommitLog (possibly without the durability asked for).
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            PutStatus::PutOk
                | PutStatus::FlushDiskTimeout
                | PutStatus::FlushSlaveTimeout
                | PutStatus::SlaveNotAvailable
        )
    }

    /// RocketMQ's remoting response code for this status (SendMessageProcessor).
    pub fn response_code(self) -> i32 {
        match self {
            PutStatus::PutOk => 0,
            PutStatus::FlushDiskTimeout => 10,
            PutStatus::SlaveNotAvailable => 11,
            PutStatus::FlushSlaveTimeout => 12,
            PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded => 13,
            PutStatus::ServiceNotAvailable => 14,
            // SYSTEM_ERROR, as 4.9's SendMessageProcessor answers it (not SYSTEM_BUSY): a 4.x
            // producer retries another broker on SYSTEM_ERROR, and throws on SYSTEM_BUSY.
            PutStatus::OsPageCacheBusy | PutStatus::CreateMappedFileFailed | PutStatus::UnknownError => 1,
        }
    }
}

impl std::fmt::Display for PutStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of a put: where the message went and how durable it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutResult {
    pub status: PutStatus,
    /// Physical offset of the record (or of the first record of a batch); -1 if not stored.
    pub phy_offset: i64,
    /// Bytes written (the whole batch for a batch put).
    pub size: i32,
    pub queue_id: i32,
    /// ConsumeQueue offset of the message (of the first message of a batch).
    pub queue_offset: i64,
    /// Number of messages written.
    pub msg_num: i32,
    pub store_timestamp: i64,
    /// The store host written into the record, for the message id.
    pub store_host: SocketAddr,
}

impl PutResult {
    /// RocketMQ's offset message id (hex), or an empty string when nothing was stored.
    pub fn msg_id(&self) -> String {
        if self.phy_offset < 0 {
            String::new()
        } else {
            crate::message::offset_msg_id(&self.store_host, self.phy_offset)
        }
    }

    /// The offset just past the record(s): what a flush or a slave must reach.
    pub fn end_offset(&self) -> i64 {
        self.phy_offset + self.size as i64
    }
}

#[cfg(test)]
mod tests {
    use super::PutStatus::*;

    /// RocketMQ 4.9's `SendMessageProcessor.handlePutMessageResult`, status by status.
    #[test]
    fn response_codes_follow_rocketmq_4_9() {
        let want = [
            (PutOk, 0),
            (FlushDiskTimeout, 10),
            (SlaveNotAvailable, 11),
            (FlushSlaveTimeout, 12),
            (MessageIllegal, 13),
            (PropertiesSizeExceeded, 13),
            (ServiceNotAvailable, 14),
            (OsPageCacheBusy, 1),
            (CreateMappedFileFailed, 1),
            (UnknownError, 1),
        ];
        for (status, code) in want {
            assert_eq!(status.response_code(), code, "{status}");
        }
    }
}
