//! The message model and the CommitLog record codec (spec section 1).

pub mod codec;
pub mod hash;
pub mod msg_id;
pub mod properties;
pub mod sysflag;

pub use codec::{
    BLANK_MAGIC_CODE, CheckOptions, CheckResult, DecodeError, DispatchRequest, InvalidMessage,
    MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, Message, PreparedMessage, RecordView, SCHEDULE_TOPIC,
    check_record, crc32_masked, decode_record, key_error, parse_delay_levels,
};
pub use hash::java_string_hash;
pub use msg_id::{decode_offset_msg_id, offset_msg_id};
