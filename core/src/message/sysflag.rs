//! SYSFLAG bits of a record (spec 1.4).

pub const COMPRESSED: i32 = 0x1;
pub const MULTI_TAGS: i32 = 0x2;
pub const TRANSACTION_MASK: i32 = 0xC;
pub const TRANSACTION_NOT_TYPE: i32 = 0x0;
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
pub const BORNHOST_V6: i32 = 0x10;
pub const STOREHOSTADDRESS_V6: i32 = 0x20;
pub const NEED_UNWRAP: i32 = 0x40;
pub const INNER_BATCH: i32 = 0x80;
pub const COMPRESSION_TYPE_MASK: i32 = 0x700;

/// The transaction type bits of `sys_flag`.
pub fn transaction_type(sys_flag: i32) -> i32 {
    sys_flag & TRANSACTION_MASK
}

/// Whether a record with `sys_flag` takes a queue offset and gets a ConsumeQueue unit: every
/// one but a prepared or rolled-back transactional message.
pub fn takes_queue_offset(sys_flag: i32) -> bool {
    matches!(transaction_type(sys_flag), TRANSACTION_NOT_TYPE | TRANSACTION_COMMIT_TYPE)
}
