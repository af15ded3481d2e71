//! The store: CommitLog, ConsumeQueue, IndexFile, dispatcher, flush, recovery, retention.

pub mod checkpoint;
pub mod clock;
pub mod commit_log;
pub mod consume_queue;
pub mod deleted_topics;
pub mod dirs;
pub mod dispatcher;
pub mod flush;
pub mod index;
pub mod lock;
pub mod mapped_file;
pub mod mapped_file_queue;
pub mod message_store;
pub mod notify;
pub mod put_metrics;
pub mod read;
pub mod retention;
pub mod status;
pub mod wait;

pub use message_store::{MessageStore, PutHandle, RecoveryReport};
pub use read::{GetMessageResult, GetMessageStatus, MessageFilter, RawRecord, StoredMessage, TimeBoundary};
pub use status::{PutResult, PutStatus};
pub use wait::PutTicket;
