//! Transactional messages (RocketMQ 4.9's `TransactionalMessageServiceImpl`,
//! `EndTransactionProcessor` and `TransactionalMessageCheckService`).
//!
//! A send with `TRAN_MSG=true` is stored as a half message: in RMQ_SYS_TRANS_HALF_TOPIC,
//! queue 0, with its own topic and queue in `REAL_TOPIC` / `REAL_QID` and its transaction type
//! reset to NOT_TYPE (so the half topic gets a ConsumeQueue unit and the check-back can walk
//! it). END_TRANSACTION commits it (the message is put again to its real topic and queue, with
//! the COMMIT type and `preparedTransactionOffset` naming the half) or rolls it back; either
//! way an op message (RMQ_SYS_TRANS_OP_HALF_TOPIC, same queue, tags `d`, body the half's queue
//! offset) records that the half message is decided.
//!
//! On a master, the [`Checker`] walks the half queue from its cursor (the consumer offset of
//! group CID_RMQ_SYS_TRANS, as in RocketMQ): a half message no op message names, older than
//! `transactionTimeOut` (or its `CHECK_IMMUNITY_TIME_IN_SECONDS`), is put again at the end of
//! the half queue with `TRANSACTION_CHECK_TIMES` one higher, and its producer group is sent
//! CHECK_TRANSACTION_STATE; one checked `transactionCheckMax` times is moved to
//! TRANS_CHECK_MAX_TIME_TOPIC with a warning.
//!
//! Where rmqha does better than RocketMQ 4.9:
//!
//! - The cursors are recorded only once every record the round read or wrote (the copies put
//!   back, the op messages it relied on) is flushed, and on a SYNC_MASTER held by a slave: a
//!   crash never leaves a cursor past a half message whose copy was lost. A round made since
//!   the last recorded cursors may then be checked again (the producer answers twice; the
//!   second END_TRANSACTION names a copy that is already decided or superseded).
//! - A delayed transactional message (DELAY, which the Java client strips but others may
//!   send) keeps its half message in the half topic and is delayed from its commit; 4.9 moves
//!   the half message itself to SCHEDULE_TOPIC_XXXX, whose delivery lands it back in the half
//!   topic under another offset than the producer was answered, so its commit fails.
//! - A commit's op message is written once the committed message's put is final, on a
//!   SYNC_MASTER once a slave holds it (4.9 puts the committed message without waiting).
//! - A transaction is decided at most once (`Decisions`, see
//!   `crate::processor::end_transaction`): 4.9 commits a half message again for each COMMIT
//!   naming it (a retry, or the producer's own commit racing its answer to a check-back), and
//!   lets a COMMIT follow a ROLLBACK. The copies a check puts back are the same transaction as
//!   the first half message (their origin), and each op message records its decision
//!   ([`OP_DECISION`]) so that a restart knows it. The decisions kept in memory are bounded
//!   (1,000,000 per queue) even when the cursors are not recorded for long (a SYNC_MASTER
//!   without its slave): past it, the oldest whose op message is written are read back from
//!   the op queue when asked again.
//! - A commit whose op message's put failed (its message stored) stays decided in memory,
//!   and the Checker's next round writes the missing op message rather than check it back.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::message::codec::PreparedMessage;
use crate::message::properties::keys;
use crate::message::{Message, sysflag};
use crate::metadata::{ConfigTables, TopicConfig};
use crate::remoting::{RemotingCommand, Responder, request_code};
use crate::schedule::{REAL_QID, REAL_TOPIC};
use crate::store::clock::now_ms;
use crate::store::flush::StopSignal;
use crate::store::{MessageStore, PutHandle, StoredMessage};

/// Java `TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC`.
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Java `TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC`.
pub const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Java `TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC`: where a half message checked too
/// many times goes.
pub const CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Java `MixAll.CID_SYS_RMQ_TRANS`: the group whose consumer offsets are the check cursors.
pub const SYS_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// Java `MessageConst.PROPERTY_TRANSACTION_PREPARED`.
pub const TRAN_MSG: &str = "TRAN_MSG";
/// Java `MessageConst.PROPERTY_PRODUCER_GROUP`.
pub const PGROUP: &str = "PGROUP";
/// Java `MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES`.
pub const CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
/// Java `MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS`.
pub const CHECK_IMMUNITY: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
/// Java `MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET`: on a half message put
/// back for a check, the half-queue offset of the first copy (the transaction's origin).
pub const PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// Java `TransactionalMessageUtil.REMOVETAG`: the tags of an op message.
pub const OP_TAG: &str = "d";
/// rmqha's property of an op message: `COMMIT` or `ROLLBACK`, the decision it records.
pub const OP_DECISION: &str = "TRAN_DECISION";

/// Whether a message asks to be a transaction's half message (`TRAN_MSG`, read as Java's
/// `Boolean.parseBoolean`).
pub fn is_prepared(msg: &Message) -> bool {
    msg.property(TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The half message of `msg` (4.9 `parseHalfMessageInner`).
pub fn to_half(msg: &Message) -> Message {
    let mut h = msg.clone();
    // The broker's own bookkeeping of copies put back, never the producer's.
    h.properties.retain(|(k, _)| k != PREPARED_QUEUE_OFFSET);
    h.set_property(REAL_TOPIC, msg.topic.clone());
    h.set_property(REAL_QID, msg.queue_id.to_string());
    h.sys_flag = (h.sys_flag & !sysflag::TRANSACTION_MASK) | sysflag::TRANSACTION_NOT_TYPE;
    h.topic = HALF_TOPIC.to_string();
    h.queue_id = 0;
    h
}

/// The message a commit of `half` puts (4.9 `endMessageTransaction`, then the COMMIT type,
/// `preparedTransactionOffset` = the half's offset, and `TRAN_MSG` cleared). `None` for a
/// record without a usable `REAL_TOPIC` / `REAL_QID`.
pub fn committed(half: &StoredMessage) -> Option<Message> {
    let topic = half.property(REAL_TOPIC)?.to_string();
    let queue_id: i32 = half.property(REAL_QID)?.trim().parse().ok()?;
    let mut m = Message {
        topic,
        queue_id,
        sys_flag: (half.sys_flag & !sysflag::TRANSACTION_MASK) | sysflag::TRANSACTION_COMMIT_TYPE,
        prepared_transaction_offset: half.phy_offset,
        ..half.to_message()
    };
    m.properties
        .retain(|(k, _)| k != REAL_TOPIC && k != REAL_QID && k != TRAN_MSG && k != PREPARED_QUEUE_OFFSET);
    Some(m)
}

/// The op message that records `half` as decided (4.9 `addRemoveTagInTransactionOp`), with
/// which way in [`OP_DECISION`] (rmqha's own property: 4.9 reads an op message's body and
/// tags only).
pub fn op_message(half: &StoredMessage, outcome: Outcome) -> Message {
    op_message_of(half.queue_id, half.queue_offset, origin(half), outcome)
}

/// The op message naming the half message at `target` in half queue `queue`, of
/// transaction `origin`.
fn op_message_of(queue: i32, target: i64, origin: i64, outcome: Outcome) -> Message {
    Message::new(OP_TOPIC, target.to_string().into_bytes())
        .with_queue(queue)
        .with_tags(OP_TAG)
        .with_property(keys::WAIT, "false")
        .with_property(OP_DECISION, outcome.as_str())
        // The transaction it decides, for when retention has deleted the half message named.
        .with_property(PREPARED_QUEUE_OFFSET, origin.to_string())
}

/// END_TRANSACTION's reference to a half message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndRef<'a> {
    pub producer_group: &'a str,
    pub tran_state_table_offset: i64,
    pub commit_log_offset: i64,
}

/// The half message `r` names, checked as 4.9 `checkPrepareMessage` (producer group, queue
/// offset and log offset all match); else why not.
pub fn find_half(store: &MessageStore, r: &EndRef<'_>) -> Result<StoredMessage, &'static str> {
    // Only a record the log holds at that offset: a body may hold bytes shaped like a half
    // message whose offset field names where they lie, any topic and REAL_TOPIC the forger
    // chose (4.9's `lookMessageByOffset` takes those too).
    let found = store
        .genuine_record_at(r.commit_log_offset)
        .and_then(|rec| rec.view().map(|v| StoredMessage::from_view(&v)));
    let Some(m) = found.filter(|m| m.topic == HALF_TOPIC) else {
        return Err("Find prepared transaction message failed");
    };
    if m.property(PGROUP) != Some(r.producer_group) {
        return Err("The producer group wrong");
    }
    if m.queue_offset != r.tran_state_table_offset {
        return Err("The transaction state table offset wrong");
    }
    if m.phy_offset != r.commit_log_offset {
        return Err("The commit log offset wrong");
    }
    Ok(m)
}

/// Creates the half and op topics (one read-write queue each, as 4.9's
/// `createTopicInSendMessageBackMethod`) if absent.
pub(crate) fn seed_topics(tables: &ConfigTables) {
    let perm = TopicConfig::PERM_READ | TopicConfig::PERM_WRITE;
    tables.topics().seed_if_absent([
        TopicConfig::with_queues(HALF_TOPIC, 1, 1, perm),
        TopicConfig::with_queues(OP_TOPIC, 1, 1, perm),
    ]);
}

/// The body of CHECK_TRANSACTION_STATE: the half message encoded as 4.9's
/// `MessageDecoder.encode(msgExt, false)`, with its real topic and queue.
pub fn check_body(half: &StoredMessage) -> Vec<u8> {
    let mut m = Message {
        topic: half.property(REAL_TOPIC).unwrap_or(&half.topic).to_string(),
        queue_id: half.property(REAL_QID).and_then(|q| q.trim().parse().ok()).unwrap_or(half.queue_id),
        ..half.to_message()
    };
    let p = match PreparedMessage::prepare(&m, &half.store_host, usize::MAX, half.store_timestamp) {
        Ok(p) => p,
        Err(_) => {
            // A real topic that is no valid name: the half topic's, as stored.
            m.topic = half.topic.clone();
            match PreparedMessage::prepare(&m, &half.store_host, usize::MAX, half.store_timestamp) {
                Ok(p) => p,
                Err(_) => return Vec::new(),
            }
        }
    };
    let mut buf = vec![0u8; p.total_len];
    p.write(&mut buf, half.queue_offset, half.phy_offset, half.store_timestamp, &half.store_host);
    buf
}

/// CHECK_TRANSACTION_STATE for `half` (4.9 `sendCheckMessage`).
pub fn check_request(half: &StoredMessage) -> RemotingCommand {
    let uniq = half.property(keys::UNIQ_KEY).unwrap_or("").to_string();
    RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE)
        .with_ext("tranStateTableOffset", half.queue_offset)
        .with_ext("commitLogOffset", half.phy_offset)
        .with_ext("msgId", uniq.clone())
        .with_ext("transactionId", uniq)
        .with_ext("offsetMsgId", half.msg_id.clone())
        .with_body(check_body(half))
}

/// Which way a transaction was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Commit,
    Rollback,
}

impl Outcome {
    /// As [`OP_DECISION`] writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Commit => "COMMIT",
            Outcome::Rollback => "ROLLBACK",
        }
    }

    fn parse(s: &str) -> Option<Outcome> {
        match s.trim() {
            "COMMIT" => Some(Outcome::Commit),
            "ROLLBACK" => Some(Outcome::Rollback),
            _ => None,
        }
    }

    /// "committed" / "rolled back".
    pub fn done(self) -> &'static str {
        match self {
            Outcome::Commit => "committed",
            Outcome::Rollback => "rolled back",
        }
    }
}

/// What [`Decisions`] knows of one transaction.
#[derive(Debug, Clone, Copy)]
enum State {
    /// A request holds the claim and is deciding it now.
    Deciding(Outcome),
    /// Decided. `outcome` is `None` for an op message that does not say which way (written by
    /// RocketMQ); `op` is the op message's op-queue offset, `None` while it is not written
    /// (its put failed after the commit's put succeeded).
    Decided { outcome: Option<Outcome>, op: Option<i64> },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    state: State,
    /// The highest half-queue offset of a copy the Checker put back of this transaction
    /// while it was known here (-1: none): the entry outlives the half cursor passing it.
    last_copy: i64,
}

#[derive(Debug, Default)]
struct QueueDecisions {
    /// The op queue was read from the Checker's recorded cursor (after a restart).
    loaded: bool,
    /// By origin (the half-queue offset of the transaction's first half message).
    entries: std::collections::HashMap<i64, Entry>,
    /// One past the highest origin spilled (0: none spilled); see [`QueueDecisions::spill`].
    spilled_below: i64,
    /// Where the spilled decisions are: no origin outside a run's `origins` was spilled in
    /// it, and the op message of each one that was lies in its `ops`.
    spills: Vec<Spill>,
    /// Bumped at each spill, so a claim sees that one happened between its two lock holds.
    generation: u64,
    /// An entry may be decided without its op message (set when one becomes so, cleared
    /// when the Checker claims them): the Checker's round reads every entry only then.
    missing_ops: bool,
    /// Entries below which no spill is tried (after one that could not get under the cap).
    retry_at: usize,
    /// The highest copy the Checker put back of a transaction not known here whose origin
    /// lies in a spill's range (perhaps spilled: its `last_copy`, kept as a spilled entry's
    /// would be; perhaps never decided, then it is kept for nothing until the cursor passes).
    spilled_copies: std::collections::HashMap<i64, i64>,
}

/// A run of decisions a spill dropped from memory (inclusive ranges).
#[derive(Debug, Clone, Copy)]
struct Spill {
    origins: (i64, i64),
    ops: (i64, i64),
}

/// Transactions known per queue above which the oldest decisions are spilled.
const MAX_ENTRIES: usize = 1_000_000;
/// Spilled transactions one [`Spill`] covers at most.
const SPILL_RUN: usize = 1024;
/// [`Spill`]s kept per queue at most (2 MiB); past it, neighbours are merged.
const MAX_SPILLS: usize = 1 << 16;

impl QueueDecisions {
    /// Over `cap` entries, drops the decided ones with the lowest origins, down to 3/4 of
    /// `cap`: only those whose op message is written and dispatched (below `op_end`, one past
    /// the last op-queue offset a reader finds), so the op queue answers for them (see
    /// [`spilled_decision`]), and of which the Checker put back no copy while they were
    /// known (their `last_copy` must outlive the half cursor). Being decided, or decided
    /// without an op message: kept. Whether it spilled.
    fn spill(&mut self, queue: i32, cap: usize, op_end: i64) -> bool {
        if self.entries.len() <= cap.max(self.retry_at) {
            return false;
        }
        let excess = self.entries.len() - cap / 4 * 3;
        let mut spillable: Vec<(i64, i64)> = self
            .entries
            .iter()
            .filter_map(|(&o, e)| match e.state {
                State::Decided { op: Some(op), .. } if e.last_copy < 0 && op < op_end => Some((o, op)),
                _ => None,
            })
            .collect();
        if spillable.len() < excess {
            // Not tried again before a quarter of the cap more (each try reads every entry).
            self.retry_at = self.entries.len() - spillable.len() + cap / 4;
            tracing::warn!(
                queue,
                known = self.entries.len(),
                spillable = spillable.len(),
                cap,
                "over {cap} transaction decisions known, and too few may leave memory (being decided, \
                 an op message not written or not dispatched yet, a copy put back meanwhile)"
            );
        } else {
            self.retry_at = 0;
        }
        if spillable.is_empty() {
            return false;
        }
        if excess < spillable.len() {
            spillable.select_nth_unstable(excess);
            spillable.truncate(excess);
        }
        // In runs of consecutive origins, so a lookup reads the op messages of one run (per
        // spill), not of the whole spill.
        spillable.sort_unstable();
        for run in spillable.chunks(SPILL_RUN) {
            let mut spill = Spill { origins: (run[0].0, run[run.len() - 1].0), ops: (i64::MAX, i64::MIN) };
            for &(o, op) in run {
                self.entries.remove(&o);
                spill.ops = (spill.ops.0.min(op), spill.ops.1.max(op));
            }
            self.spills.push(spill);
        }
        if self.spills.len() > MAX_SPILLS {
            // Coarser: two neighbours as one (a lookup reads more).
            self.spills = self
                .spills
                .chunks(2)
                .map(|p| {
                    p.iter().skip(1).fold(p[0], |a, b| Spill {
                        origins: (a.origins.0.min(b.origins.0), a.origins.1.max(b.origins.1)),
                        ops: (a.ops.0.min(b.ops.0), a.ops.1.max(b.ops.1)),
                    })
                })
                .collect();
        }
        self.spilled_below = self.spilled_below.max(spillable[spillable.len() - 1].0 + 1);
        self.generation += 1;
        tracing::warn!(
            queue,
            spilled = spillable.len(),
            kept = self.entries.len(),
            cap,
            spilled_below = self.spilled_below,
            "over {cap} transaction decisions known (the check cursors are not recorded: a SYNC_MASTER \
             without its slave, or a long transactionCheckInterval): the oldest are dropped from memory \
             and read back from the op queue when asked again"
        );
        true
    }

    /// The op-queue ranges to read for transaction `o` if it may have been spilled (empty:
    /// it was not).
    fn spilled_ranges(&self, o: i64) -> Vec<(i64, i64)> {
        if o >= self.spilled_below {
            return Vec::new();
        }
        let mut ranges: Vec<(i64, i64)> =
            self.spills.iter().filter(|s| (s.origins.0..=s.origins.1).contains(&o)).map(|s| s.ops).collect();
        // Each op message read once.
        ranges.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        merged
    }

    /// Whether `o` lies in the origins of a spill.
    fn maybe_spilled(&self, o: i64) -> bool {
        o < self.spilled_below && self.spills.iter().any(|s| (s.origins.0..=s.origins.1).contains(&o))
    }
}

/// What [`Decisions::claim`] found.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// The caller decides the transaction; the claim is held until it is settled or dropped.
    Claimed(Claim),
    /// Decided already (`None`: by an op message that does not say which way).
    Decided(Option<Outcome>),
    /// Another request is deciding it right now.
    Deciding(Outcome),
    /// The Checker has passed every copy of the transaction for good, and it is no longer
    /// known here: it was decided long ago, or discarded after `transactionCheckMax`, or is
    /// older than `fileReservedTime`.
    Passed,
}

/// The decisions of transactions, so that each is decided at most once (see
/// `crate::processor::end_transaction`): those made by this process, and those the op queue
/// holds from the Checker's recorded cursor on (read once, at the first claim of a queue).
/// An entry is dropped once the Checker's recorded cursors have passed its op message and
/// every copy of its half message known here. Over [`MAX_ENTRIES`] entries in a queue (the
/// cursors not recorded for long), the decided ones with the lowest origins whose op message
/// is written and dispatched are spilled ([`QueueDecisions::spill`]): a claim of a
/// transaction not known here whose origin a spill covers reads the op messages of that
/// spill (without the lock) before anything else, and a transaction found there is decided.
/// The first claim of a fresh transaction (an origin above every spilled one) reads nothing.
#[derive(Debug)]
pub(crate) struct Decisions {
    queues: parking_lot::Mutex<std::collections::HashMap<i32, QueueDecisions>>,
    /// Entries per queue above which the oldest decisions are spilled ([`MAX_ENTRIES`]).
    cap: usize,
}

impl Default for Decisions {
    fn default() -> Self {
        Decisions { queues: Default::default(), cap: MAX_ENTRIES }
    }
}

/// How far before a transaction's first half message [`Decisions::decided`] starts reading
/// the op queue by store time: an op message is stored after the half message it decides,
/// unless the clock was set back meanwhile, by up to this much.
const DECIDED_SCAN_SLACK_MS: i64 = 10 * 60 * 1000;

/// How long the first claim after a start waits for the op queue to be dispatched.
const LOAD_WAIT: Duration = Duration::from_secs(5);

impl Decisions {
    /// Claims the transaction of `half` for `outcome`.
    pub(crate) fn claim(
        self: &Arc<Self>,
        store: &MessageStore,
        tables: &ConfigTables,
        half: &StoredMessage,
        outcome: Outcome,
    ) -> Verdict {
        let (q, o) = (half.queue_id, origin(half));
        let mut caught_up = true;
        if !self.queues.lock().get(&q).is_some_and(|d| d.loaded) {
            // The op messages written before a restart must be in the op queue.
            caught_up = wait_dispatched_to(store, store.max_offset(), LOAD_WAIT);
            if !caught_up {
                tracing::warn!(
                    queue = q,
                    "the op queue is not dispatched yet: decisions recorded before the start may be \
                     missed by this END_TRANSACTION; the next one reads the op queue again"
                );
            }
        }
        let (known, generation, spilled, over) = {
            let mut queues = self.queues.lock();
            let d = queues.entry(q).or_default();
            if !d.loaded {
                // Read again until it is read caught up (entries known stay as they are).
                load(store, tables, q, d, self.cap);
                d.loaded = caught_up;
            }
            let known = d.entries.contains_key(&o);
            let over = d.entries.len() > self.cap + self.cap / 4 && d.entries.len() > d.retry_at;
            (known, d.generation, if known { Vec::new() } else { d.spilled_ranges(o) }, over)
        };
        if over {
            // The Checker spills at each tick, but not during a long round.
            self.spill_queue(store, q);
        }
        // Not known here, of an origin a spill dropped from memory: its op message says how it
        // was decided, if it was. Read without the lock.
        if !spilled.is_empty() {
            if let Some(outcome) = spilled_decision(store, q, o, &spilled) {
                return Verdict::Decided(outcome);
            }
        }
        // Not known here, but committed: a commit stored its message and the broker stopped
        // (a crash, a full disk) before its op message was written. Looked for without the
        // lock, in the index.
        let committed = !known && committed_in_real_topic(store, half, o);
        // A copy the Checker's recorded cursor has passed, of a transaction not known here:
        // is there a copy of it left for the Checker to check (else it is done with it)?
        // Looked for without the lock: this reads the half queue past the cursor.
        let cursor = tables.consumer_offsets().query(SYS_GROUP, HALF_TOPIC, q).unwrap_or(-1);
        let passed = !known && half.queue_offset < cursor && !has_copy_from(store, q, o, cursor);
        let mut queues = self.queues.lock();
        let d = queues.entry(q).or_default();
        if (known || d.generation != generation) && !d.entries.contains_key(&o) {
            // Pruned, spilled (or released) while the lock was not held: `committed`, `passed`
            // and the op queue were not looked at, and without them an entry pruned or
            // spilled as decided would be claimed anew (committed again, or committed after
            // its rollback). Look again.
            drop(queues);
            return self.claim(store, tables, half, outcome);
        }
        if committed && !d.entries.contains_key(&o) {
            if outcome == Outcome::Rollback || passed {
                // Nothing to remember: a later COMMIT finds the message again. And once the
                // Checker has passed every copy, its op message is written (behind the
                // recorded op cursor).
                return Verdict::Decided(Some(Outcome::Commit));
            }
            // This COMMIT writes the missing op message (below).
            d.entries.insert(
                o,
                Entry { state: State::Decided { outcome: Some(Outcome::Commit), op: None }, last_copy: -1 },
            );
        }
        match d.entries.get(&o).map(|e| e.state) {
            Some(State::Deciding(x)) => Verdict::Deciding(x),
            Some(State::Decided { outcome: Some(x), op: None }) if x == outcome => {
                // Committed, but its op message was not written: this request writes it.
                d.entries.get_mut(&o).expect("present").state = State::Deciding(x);
                Verdict::Claimed(Claim {
                    decisions: self.clone(),
                    queue: q,
                    origin: o,
                    outcome,
                    op_only: true,
                    settled: false,
                })
            }
            Some(State::Decided { outcome, .. }) => Verdict::Decided(outcome),
            None if passed => Verdict::Passed,
            None => {
                d.entries.insert(o, Entry { state: State::Deciding(outcome), last_copy: -1 });
                Verdict::Claimed(Claim {
                    decisions: self.clone(),
                    queue: q,
                    origin: o,
                    outcome,
                    op_only: false,
                    settled: false,
                })
            }
        }
    }

    /// How transaction `o` of queue `q` (of which `half` is a half message) was decided, if
    /// it was, wherever that is recorded: here (or being decided now), in a spill, by its
    /// committed message in the real topic, or by an op message in the op queue, read from
    /// the first stored [`DECIDED_SCAN_SLACK`] before the transaction's first half message
    /// (or from the queue's start when that message is gone). For an operator's
    /// RESUME_CHECK_HALF_MESSAGE, rare enough for the scan: a decided transaction checked
    /// again could be decided again (a rolled-back one committed).
    pub(crate) fn decided(
        &self,
        store: &MessageStore,
        half: &StoredMessage,
        q: i32,
        o: i64,
    ) -> Option<Option<Outcome>> {
        let spilled = {
            let queues = self.queues.lock();
            let d = queues.get(&q);
            match d.and_then(|d| d.entries.get(&o)).map(|e| e.state) {
                Some(State::Deciding(x)) => return Some(Some(x)),
                Some(State::Decided { outcome, .. }) => return Some(outcome),
                None => d.map(|d| d.spilled_ranges(o)).unwrap_or_default(),
            }
        };
        if !spilled.is_empty() {
            if let Some(outcome) = spilled_decision(store, q, o, &spilled) {
                return Some(outcome);
            }
        }
        if committed_in_real_topic(store, half, o) {
            return Some(Some(Outcome::Commit));
        }
        let op_q = store.consume_queues().find(OP_TOPIC, q)?;
        let half_q = store.consume_queues().find(HALF_TOPIC, q);
        let first_stored =
            half_q.as_deref().and_then(|h| h.get(o)).and_then(|u| store.message_at(u.phy_offset));
        let from = match first_stored {
            Some(m) => store.queue_offset_by_time(
                OP_TOPIC,
                q,
                m.store_timestamp.saturating_sub(DECIDED_SCAN_SLACK_MS),
            ),
            None => op_q.min_offset_in_queue(),
        };
        (from.max(op_q.min_offset_in_queue())..op_q.max_offset_in_queue())
            .filter_map(|i| read_op(store, &op_q, half_q.as_deref(), i))
            .find(|&(origin, _)| origin == o)
            .map(|(_, outcome)| outcome)
    }

    /// Claims every transaction of `queue` decided without its op message (a commit whose
    /// message is stored but whose op message's put failed), for the Checker to write it.
    pub(crate) fn claim_missing_ops(self: &Arc<Self>, queue: i32) -> Vec<Claim> {
        let mut queues = self.queues.lock();
        let Some(d) = queues.get_mut(&queue).filter(|d| d.missing_ops) else { return Vec::new() };
        d.missing_ops = false;
        d.entries
            .iter_mut()
            .filter_map(|(&origin, e)| match e.state {
                State::Decided { outcome: Some(outcome), op: None } => {
                    e.state = State::Deciding(outcome);
                    Some(Claim {
                        decisions: self.clone(),
                        queue,
                        origin,
                        outcome,
                        op_only: true,
                        settled: false,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// The Checker put back `copy` (a half-queue offset) of transaction `origin`: an entry
    /// made meanwhile must outlive the half cursor passing the copy.
    pub(crate) fn note_copy(&self, queue: i32, origin: i64, copy: i64) {
        let mut queues = self.queues.lock();
        let Some(d) = queues.get_mut(&queue) else { return };
        if let Some(e) = d.entries.get_mut(&origin) {
            e.last_copy = e.last_copy.max(copy);
        } else if d.maybe_spilled(origin) {
            // Perhaps decided and spilled (a round that read the op queue before the decision
            // reached its half message after the spill): kept as its entry would keep it.
            let c = d.spilled_copies.entry(origin).or_insert(copy);
            *c = (*c).max(copy);
        }
    }

    /// Whether the Checker put back a copy of transaction `origin` at `from` or later while
    /// it was known here.
    pub(crate) fn has_copy_from(&self, queue: i32, origin: i64, from: i64) -> bool {
        self.queues.lock().get(&queue).is_some_and(|d| {
            d.entries.get(&origin).is_some_and(|e| e.last_copy >= from)
                || d.spilled_copies.get(&origin).is_some_and(|&c| c >= from)
        })
    }

    /// Drops the entries of `queue` the Checker's recorded cursors have passed, and forgets
    /// the spills whose op messages they have all passed (their entries would be dropped).
    pub(crate) fn prune(&self, queue: i32, half_cursor: i64, op_cursor: i64) {
        if let Some(d) = self.queues.lock().get_mut(&queue) {
            d.entries.retain(|_, e| match e.state {
                State::Decided { op: Some(op), .. } => op >= op_cursor || e.last_copy >= half_cursor,
                _ => true,
            });
            if d.spills.is_empty() {
                return;
            }
            d.spilled_copies.retain(|_, c| *c >= half_cursor);
            let copies = &d.spilled_copies;
            d.spills.retain(|s| {
                s.ops.1 >= op_cursor || copies.keys().any(|o| (s.origins.0..=s.origins.1).contains(o))
            });
            d.spilled_below = d.spills.iter().map(|s| s.origins.1 + 1).max().unwrap_or(0);
            if d.spills.is_empty() {
                d.spilled_copies.clear();
            }
        }
    }

    /// Spills the oldest decisions of each queue over the cap (see [`QueueDecisions::spill`]).
    /// Called by the Checker at each tick: the op queue's end is read without the lock.
    pub(crate) fn spill(&self, store: &MessageStore) {
        let over: Vec<i32> =
            self.queues.lock().iter().filter(|(_, d)| d.entries.len() > self.cap).map(|(&q, _)| q).collect();
        for q in over {
            self.spill_queue(store, q);
        }
    }

    fn spill_queue(&self, store: &MessageStore, q: i32) {
        let op_end = store.consume_queues().find(OP_TOPIC, q).map_or(0, |c| c.max_offset_in_queue());
        if let Some(d) = self.queues.lock().get_mut(&q) {
            d.spill(q, self.cap, op_end);
        }
    }

    /// How many transactions are known (tests).
    #[cfg(test)]
    fn len(&self, queue: i32) -> usize {
        self.queues.lock().get(&queue).map_or(0, |d| d.entries.len())
    }
}

/// Waits until dispatch has passed `to` in the log (what is written meanwhile need not be).
fn wait_dispatched_to(store: &MessageStore, to: i64, timeout: Duration) -> bool {
    let d = store.dispatcher();
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let seen = d.dispatched().seq();
        if i64::try_from(d.reput_from()).unwrap_or(i64::MAX) >= to {
            return true;
        }
        let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else { return false };
        d.dispatched().wait(seen, left.min(Duration::from_millis(50)));
    }
}

/// Whether a message committed from transaction `o` (of `half`'s queue) is in its real topic:
/// found through the index by the producer's unique key (`UNIQ_KEY`, which a commit keeps);
/// the committed message must be of the COMMIT type, name a half message of the transaction
/// as the one it came from (`preparedTransactionOffset`), and carry its body. A delayed
/// transaction's committed message is in SCHEDULE_TOPIC_XXXX until its level is due, so it is
/// looked for there too. Without the index (`messageIndexEnable=false`) or a unique key,
/// nothing is found.
fn committed_in_real_topic(store: &MessageStore, half: &StoredMessage, o: i64) -> bool {
    let (Some(topic), Some(uniq)) = (half.property(REAL_TOPIC), half.property(keys::UNIQ_KEY)) else {
        return false;
    };
    let of_this = |m: &StoredMessage| {
        sysflag::transaction_type(m.sys_flag) == sysflag::TRANSACTION_COMMIT_TYPE
            && m.body == half.body
            && store
                .message_at(m.prepared_transaction_offset)
                .is_some_and(|h| h.topic == HALF_TOPIC && h.queue_id == half.queue_id && origin(&h) == o)
    };
    store.query_by_key(topic, uniq, 32, 0, i64::MAX).iter().any(of_this)
        || (half.property(keys::DELAY).is_some()
            && store
                .query_by_key(crate::message::SCHEDULE_TOPIC, uniq, 32, 0, i64::MAX)
                .iter()
                .any(|m| m.property(REAL_TOPIC) == Some(topic) && of_this(m)))
}

/// Whether the half queue `q` holds a copy of transaction `origin` from `from` on.
fn has_copy_from(store: &MessageStore, q: i32, origin_offset: i64, from: i64) -> bool {
    let Some(half_q) = store.consume_queues().find(HALF_TOPIC, q) else { return false };
    (from.max(half_q.min_offset_in_queue())..half_q.max_offset_in_queue()).any(|i| {
        half_q
            .get(i)
            .and_then(|u| store.message_at(u.phy_offset))
            .is_some_and(|m| origin(&m) == origin_offset)
    })
}

/// Reads the op queue `q` from the Checker's recorded cursor into `d`, spilling over `cap`.
fn load(store: &MessageStore, tables: &ConfigTables, q: i32, d: &mut QueueDecisions, cap: usize) {
    let Some(op_q) = store.consume_queues().find(OP_TOPIC, q) else { return };
    let half_q = store.consume_queues().find(HALF_TOPIC, q);
    let min = op_q.min_offset_in_queue();
    let from = tables.consumer_offsets().query(SYS_GROUP, OP_TOPIC, q).unwrap_or(min).max(min);
    let end = op_q.max_offset_in_queue();
    for i in from..end {
        let Some((o, outcome)) = read_op(store, &op_q, half_q.as_deref(), i) else { continue };
        d.entries.entry(o).or_insert(Entry { state: State::Decided { outcome, op: Some(i) }, last_copy: -1 });
        d.spill(q, cap, end);
    }
    if !d.entries.is_empty() {
        tracing::info!(queue = q, known = d.entries.len(), "transaction decisions read from the op queue");
    }
}

/// The transaction (origin) the op message at `i` decides, and how.
fn read_op(
    store: &MessageStore,
    op_q: &crate::store::consume_queue::ConsumeQueue,
    half_q: Option<&crate::store::consume_queue::ConsumeQueue>,
    i: i64,
) -> Option<(i64, Option<Outcome>)> {
    let op = op_q.get(i).and_then(|u| store.message_at(u.phy_offset))?;
    let target = std::str::from_utf8(&op.body).ok().and_then(|b| b.trim().parse::<i64>().ok())?;
    let outcome = op.property(OP_DECISION).and_then(Outcome::parse);
    let decided = half_q.and_then(|h| h.get(target)).and_then(|u| store.message_at(u.phy_offset));
    // A half message removed by retention: a copy put back in a later file may still be
    // of its transaction, which the op message records (else the offset is taken for the
    // origin: a copy's offset is nobody's origin).
    let o = decided.map_or_else(|| op_origin(&op).unwrap_or(target), |m| origin(&m));
    Some((o, outcome))
}

/// How transaction `o` of queue `q` was decided, if an op message in `ranges` (op-queue
/// offsets, inclusive) decides it: the decision of a spilled entry.
fn spilled_decision(store: &MessageStore, q: i32, o: i64, ranges: &[(i64, i64)]) -> Option<Option<Outcome>> {
    let op_q = store.consume_queues().find(OP_TOPIC, q)?;
    let half_q = store.consume_queues().find(HALF_TOPIC, q);
    let (min, end) = (op_q.min_offset_in_queue(), op_q.max_offset_in_queue());
    ranges
        .iter()
        .flat_map(|&(lo, hi)| lo.max(min)..(hi + 1).min(end))
        .filter_map(|i| read_op(store, &op_q, half_q.as_deref(), i))
        .find(|&(origin, _)| origin == o)
        .map(|(_, outcome)| outcome)
}

/// The right to decide one transaction, from [`Decisions::claim`]. Dropped unsettled (the
/// commit's put failed, or the op message of a rollback was not written), it is released:
/// a later END_TRANSACTION may decide the transaction.
#[derive(Debug)]
pub(crate) struct Claim {
    decisions: Arc<Decisions>,
    queue: i32,
    origin: i64,
    outcome: Outcome,
    /// The transaction was committed already; only its op message is missing.
    op_only: bool,
    settled: bool,
}

impl Claim {
    /// The decision, made: its op message is at `op` in the op queue (`None`: not written).
    pub(crate) fn settle(mut self, op: Option<i64>) {
        self.settled = true;
        self.set(State::Decided { outcome: Some(self.outcome), op });
    }

    /// Whether only the op message is missing (the commit's message is stored).
    pub(crate) fn op_only(&self) -> bool {
        self.op_only
    }

    fn set(&self, state: State) {
        let mut queues = self.decisions.queues.lock();
        let Some(d) = queues.get_mut(&self.queue) else { return };
        if let Some(e) = d.entries.get_mut(&self.origin) {
            e.state = state;
            d.missing_ops |= matches!(state, State::Decided { op: None, .. });
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        if self.op_only {
            self.set(State::Decided { outcome: Some(self.outcome), op: None });
            return;
        }
        let mut queues = self.decisions.queues.lock();
        if let Some(d) = queues.get_mut(&self.queue) {
            d.entries.remove(&self.origin);
        }
    }
}

/// The op-queue offset of an op message put by `handle`, if it was stored.
pub(crate) fn op_offset(handle: &PutHandle) -> Option<i64> {
    let r = match handle {
        PutHandle::Ready(r) => r.clone(),
        PutHandle::Pending(t) => t.current(),
    };
    (r.status.is_stored() && r.queue_offset >= 0).then_some(r.queue_offset)
}

/// The check-back settings (broker config).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckSettings {
    pub interval: Duration,
    pub timeout_ms: i64,
    pub check_max: i32,
    pub file_reserved_ms: i64,
}

/// Rounds whose cursors may wait to be recorded at once.
const MAX_PENDING: usize = 1024;

/// Cursors of one round waiting for the records below `end` to be durable.
#[derive(Debug, Clone, Copy)]
struct Pending {
    queue: i32,
    half: i64,
    op: i64,
    end: i64,
}

/// A live connection of a producer group.
/// A live connection of a producer group that may publish to a topic (its real topic).
pub(crate) type ProducerLookup = Arc<dyn Fn(&str, &str) -> Option<Responder> + Send + Sync>;

/// The check-back thread of a master (see the module doc).
pub(crate) struct Checker {
    store: Arc<MessageStore>,
    tables: Arc<ConfigTables>,
    producers: ProducerLookup,
    /// On a SYNC_MASTER, how far a slave holds the log.
    acked: Option<Arc<dyn Fn() -> i64 + Send + Sync>>,
    settings: CheckSettings,
    /// The decisions END_TRANSACTION made, pruned as the cursors are recorded.
    decisions: Arc<Decisions>,
    /// Each half queue's (half, op) cursors as walked, ahead of the recorded ones.
    cursors: BTreeMap<i32, (i64, i64)>,
    pending: Vec<Pending>,
}

impl Checker {
    pub(crate) fn new(
        store: Arc<MessageStore>,
        tables: Arc<ConfigTables>,
        producers: ProducerLookup,
        acked: Option<Arc<dyn Fn() -> i64 + Send + Sync>>,
        settings: CheckSettings,
        decisions: Arc<Decisions>,
    ) -> Self {
        Checker {
            store,
            tables,
            producers,
            acked,
            settings,
            decisions,
            cursors: BTreeMap::new(),
            pending: Vec::new(),
        }
    }

    /// Runs a round every `interval` until `stop`, recording cursors as their records become
    /// durable (looked at every 100 ms).
    pub(crate) fn run(mut self, stop: Arc<StopSignal>) {
        let tick = Duration::from_millis(100).min(self.settings.interval);
        let mut next_round = std::time::Instant::now() + self.settings.interval;
        loop {
            if std::time::Instant::now() >= next_round {
                self.round(&stop);
                next_round = std::time::Instant::now() + self.settings.interval;
            }
            self.settle();
            if !stop.sleep(tick) {
                break;
            }
        }
        self.settle();
    }

    /// How far the log is durable for the cursors: flushed, and on a SYNC_MASTER acked.
    fn durable(&self) -> i64 {
        let flushed = self.store.flushed_offset();
        match &self.acked {
            Some(a) => flushed.min(a()),
            None => flushed,
        }
    }

    fn settle(&mut self) {
        let durable = self.durable();
        let offsets = self.tables.consumer_offsets();
        self.pending.retain(|p| {
            if p.end > durable {
                return true;
            }
            offsets.commit(SYS_GROUP, HALF_TOPIC, p.queue, p.half);
            offsets.commit(SYS_GROUP, OP_TOPIC, p.queue, p.op);
            self.decisions.prune(p.queue, p.half, p.op);
            false
        });
        // Cursors not recorded for long (no slave, a long interval): memory stays bounded.
        self.decisions.spill(&self.store);
    }

    /// The recorded (else the queue's first) offset of `topic` queue `q`.
    fn recorded(&self, topic: &str, q: i32) -> i64 {
        let min = self.store.queue_min_offset(topic, q);
        self.tables.consumer_offsets().query(SYS_GROUP, topic, q).unwrap_or(min).max(min)
    }

    /// One pass over every half queue.
    fn round(&mut self, stop: &StopSignal) {
        for q in self.store.queue_ids(HALF_TOPIC) {
            if stop.is_stopped() {
                return;
            }
            self.check_queue(q, stop);
        }
    }

    fn check_queue(&mut self, q: i32, stop: &StopSignal) {
        let Some(half_q) = self.store.consume_queues().find(HALF_TOPIC, q) else { return };
        let (half_from, op_from) = match self.cursors.get(&q) {
            Some(&c) => c,
            None => (self.recorded(HALF_TOPIC, q), self.recorded(OP_TOPIC, q)),
        };
        let half_from = half_from.max(half_q.min_offset_in_queue());
        let log_end = self.store.max_offset();
        let origin_at = |t: i64| -> Option<i64> {
            let m = half_q.get(t).and_then(|u| self.store.message_at(u.phy_offset))?;
            Some(origin(&m))
        };
        // Every op message from the op cursor: where it is in the log and the transaction
        // (origin) it decides, in op order.
        let mut ops: Vec<(i64, Option<i64>, Option<i64>)> = Vec::new();
        if let Some(op_q) = self.store.consume_queues().find(OP_TOPIC, q) {
            let op_max = op_q.max_offset_in_queue();
            for i in op_from.max(op_q.min_offset_in_queue())..op_max {
                let Some(u) = op_q.get(i) else { break };
                let op = self.store.message_at(u.phy_offset);
                let target = op.as_ref().and_then(|m| {
                    std::str::from_utf8(&m.body).ok().and_then(|b| b.trim().parse::<i64>().ok())
                });
                // A half message removed by retention: the origin the op message records, else
                // the offset itself (a copy's offset is nobody's origin).
                let o = target.map(|t| origin_at(t).or_else(|| op.as_ref().and_then(op_origin)).unwrap_or(t));
                ops.push((u.phy_offset, target, o));
            }
        }
        let op_from = op_from.max(self.store.queue_min_offset(OP_TOPIC, q));
        let decided: HashSet<i64> = ops.iter().filter_map(|o| o.2).collect();
        // Transactions handled this round: an older copy of one is superseded by the copy
        // this round put back (or is decided).
        let mut handled: HashSet<i64> = HashSet::new();
        // Committed, but the op message's put failed: written here. Asking the producer
        // again would be asking what is decided (and an answer of rollback is refused); the
        // entry would otherwise stay in memory for good once the cursor passed its copies.
        for claim in self.decisions.claim_missing_ops(q) {
            let (o, outcome) = (claim.origin, claim.outcome);
            let written = match self.store.put_message(&op_message_of(q, o, o, outcome)) {
                Ok(h) => op_offset(&h).ok_or_else(|| "not stored".to_string()),
                Err(e) => Err(e.to_string()),
            };
            match written {
                Ok(op) => {
                    claim.settle(Some(op));
                    tracing::info!(
                        queue = q,
                        origin = o,
                        "the missing op message of a {} transaction written",
                        outcome.done()
                    );
                    handled.insert(o);
                }
                Err(why) => {
                    // The claim, dropped, leaves it decided without an op message: the next
                    // round tries again.
                    tracing::warn!(queue = q, origin = o, "the missing op message of a transaction: {why}");
                    break;
                }
            }
        }
        let start = now_ms();
        let max = half_q.max_offset_in_queue();
        let mut i = half_from;
        // A long backlog must not hold up a shutdown: the round ends where it got to.
        while i < max && !stop.is_stopped() {
            let Some(msg) = half_q.get(i).and_then(|u| self.store.message_at(u.phy_offset)) else {
                // Removed by retention, or a unit naming no record: nothing to check.
                i += 1;
                continue;
            };
            let o = origin(&msg);
            if decided.contains(&o) || handled.contains(&o) {
                i += 1;
                continue;
            }
            // 4.9 `needDiscard`: a message never checked is checked, whatever the maximum.
            let checked_times: Option<i32> = msg.property(CHECK_TIMES).and_then(|t| t.trim().parse().ok());
            let times = checked_times.unwrap_or(0);
            if checked_times.is_some() && times >= self.settings.check_max {
                self.discard(&msg, times);
                handled.insert(o);
                i += 1;
                continue;
            }
            let age = start - msg.born_timestamp;
            if age > self.settings.file_reserved_ms {
                tracing::warn!(
                    msg_id = %msg.msg_id,
                    queue_offset = i,
                    "a half message older than fileReservedTime is no longer checked (as RocketMQ's needSkip)"
                );
                handled.insert(o);
                i += 1;
                continue;
            }
            if msg.store_timestamp >= start {
                break;
            }
            let own_immunity = msg
                .property(CHECK_IMMUNITY)
                .and_then(|s| s.trim().parse::<i64>().ok())
                .filter(|&s| s > 0)
                .map(|s| s.saturating_mul(1000));
            let immunity = own_immunity.unwrap_or(self.settings.timeout_ms);
            if (0..immunity).contains(&age) {
                if own_immunity.is_none() {
                    // Not due yet; the later ones are younger.
                    break;
                }
                // A transaction's own immunity says nothing of the later ones, which may be
                // due long before it: as 4.9 `putImmunityMsgBackToHalfQueue`, it is put back
                // at the end of the half queue unchanged, so the cursor passes it.
                let mut copy = renew(&msg);
                copy.set_property(PREPARED_QUEUE_OFFSET, o.to_string());
                let Some(result) = self.put_back(&msg, &copy) else { break };
                self.decisions.note_copy(q, o, result.queue_offset);
                handled.insert(o);
                i += 1;
                continue;
            }
            // Put back at the end of the half queue, one check more, so the cursor can pass.
            let mut copy = renew(&msg);
            copy.set_property(CHECK_TIMES, (times + 1).to_string());
            copy.set_property(PREPARED_QUEUE_OFFSET, o.to_string());
            let Some(result) = self.put_back(&msg, &copy) else { break };
            self.decisions.note_copy(q, o, result.queue_offset);
            let mut checked = msg.clone();
            checked.properties = copy.properties.clone();
            checked.queue_offset = result.queue_offset;
            checked.phy_offset = result.phy_offset;
            checked.msg_id = result.msg_id();
            self.send_check(&checked);
            handled.insert(o);
            i += 1;
        }
        // The op cursor passes an op message once the half cursor is past every copy of the
        // transaction it decides that existed when it was written (copies are put back in log
        // order, so: past the op message's own log position).
        let cursor_phy = if i < max { half_q.get(i).map_or(i64::MAX, |u| u.phy_offset) } else { log_end };
        let mut op = op_from;
        for (phy, target, origin) in &ops {
            // A copy put back after the op message was written (a round racing the
            // decision) may lie past the half cursor: the op message stays ahead of the op
            // cursor until the half cursor passes it, so a restart still reads it.
            let copy_ahead = origin.is_some_and(|o| self.decisions.has_copy_from(q, o, i));
            match target {
                Some(t) if *t >= i || *phy >= cursor_phy || copy_ahead => break,
                _ => op += 1,
            }
        }
        if (i, op) != (half_from, op_from) || !self.cursors.contains_key(&q) {
            self.cursors.insert(q, (i, op));
            let end = self.store.max_offset().max(log_end);
            if self.pending.len() >= MAX_PENDING {
                // The log is not durable for a long while (a SYNC_MASTER without a slave):
                // the oldest entries go; the later ones record further anyway.
                self.pending.remove(0);
            }
            self.pending.push(Pending { queue: q, half: i, op, end });
        }
    }

    /// Puts `copy` of the half message `msg` back at the end of the half queue; `None` if it
    /// was not stored (the round stops there and the next one retries).
    fn put_back(&self, msg: &StoredMessage, copy: &Message) -> Option<crate::store::PutResult> {
        let result = match self.store.put_message(copy) {
            Ok(PutHandle::Ready(r)) => r,
            Ok(PutHandle::Pending(t)) => t.current(),
            Err(e) => {
                tracing::warn!(msg_id = %msg.msg_id, "putting a half message back for its check failed, retrying next round: {e}");
                return None;
            }
        };
        if !result.status.is_stored() {
            tracing::warn!(msg_id = %msg.msg_id, status = %result.status, "putting a half message back for its check failed, retrying next round");
            return None;
        }
        Some(result)
    }

    fn send_check(&self, half: &StoredMessage) {
        let group = half.property(PGROUP).unwrap_or("");
        let topic = half.property(REAL_TOPIC).unwrap_or("");
        let Some(channel) = (self.producers)(group, topic) else {
            tracing::warn!(
                group, topic, msg_id = %half.msg_id,
                "transaction check-back: no live producer of the group (that may publish to the topic, under ACL)"
            );
            return;
        };
        if let Err(e) = channel.push_oneway(check_request(half)) {
            tracing::warn!(group, msg_id = %half.msg_id, "transaction check-back not sent: {e}");
        }
    }

    /// A half message checked `times` times: moved to TRANS_CHECK_MAX_TIME_TOPIC (4.9
    /// `resolveDiscardMsg`).
    fn discard(&self, half: &StoredMessage, times: i32) {
        tracing::warn!(
            msg_id = %half.msg_id,
            uniq_key = half.property(keys::UNIQ_KEY).unwrap_or(""),
            group = half.property(PGROUP).unwrap_or(""),
            real_topic = half.property(REAL_TOPIC).unwrap_or(""),
            times,
            "a transactional half message was checked transactionCheckMax times without an answer: \
             discarded to {CHECK_MAX_TIME_TOPIC}"
        );
        let perm = TopicConfig::PERM_READ | TopicConfig::PERM_WRITE;
        self.tables.topics().seed_if_absent([TopicConfig::with_queues(CHECK_MAX_TIME_TOPIC, 1, 1, perm)]);
        let mut m = renew(half);
        m.topic = CHECK_MAX_TIME_TOPIC.to_string();
        m.queue_id = 0;
        if let Err(e) = self.store.put_message(&m) {
            tracing::error!(msg_id = %half.msg_id, "putting a discarded half message to {CHECK_MAX_TIME_TOPIC} failed: {e}");
        }
    }
}

/// RESUME_CHECK_HALF_MESSAGE's copy of `msg`, a transaction's half message (in the half
/// topic, or discarded to TRANS_CHECK_MAX_TIME_TOPIC after `transactionCheckMax` checks): in
/// the half queue again with no checks counted (4.9 `resumeCheckHalfMessage`), so the Checker
/// checks it back again, and the transaction it belongs to (its origin), when known. `None`
/// for any other message (4.9 puts whatever the id names into the half topic).
pub(crate) fn resumed(msg: &StoredMessage) -> Option<(Message, Option<i64>)> {
    let prepared = msg.property(TRAN_MSG).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !prepared
        || msg.property(REAL_TOPIC).is_none()
        || (msg.topic != HALF_TOPIC && msg.topic != CHECK_MAX_TIME_TOPIC)
    {
        return None;
    }
    // A first half message is its own origin; a discarded one without the property (one
    // RocketMQ discarded) no longer says which it was, and starts a transaction of its own.
    let origin = match msg.property(PREPARED_QUEUE_OFFSET).and_then(|v| v.trim().parse().ok()) {
        Some(o) => Some(o),
        None => (msg.topic == HALF_TOPIC).then_some(msg.queue_offset),
    };
    let mut copy = renew(msg);
    copy.topic = HALF_TOPIC.to_string();
    copy.queue_id = 0;
    copy.set_property(CHECK_TIMES, "0");
    if let Some(o) = origin {
        copy.set_property(PREPARED_QUEUE_OFFSET, o.to_string());
    }
    Some((copy, origin))
}

/// The half-queue offset of a transaction's first half message, which its copies carry.
fn origin(m: &StoredMessage) -> i64 {
    m.property(PREPARED_QUEUE_OFFSET).and_then(|v| v.trim().parse().ok()).unwrap_or(m.queue_offset)
}

/// The origin an op message records (rmqha's: RocketMQ's record none).
fn op_origin(op: &StoredMessage) -> Option<i64> {
    op.property(PREPARED_QUEUE_OFFSET).and_then(|v| v.trim().parse().ok())
}

/// A stored half message as a message to put again (4.9 `renewHalfMessageInner`).
fn renew(m: &StoredMessage) -> Message {
    let mut out = m.to_message();
    out.properties.retain(|(k, _)| k != keys::WAIT);
    out.properties.push((keys::WAIT.to_string(), "false".to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_half_message_keeps_its_real_topic_and_loses_its_transaction_type() {
        let m = Message::new("T", b"x".to_vec())
            .with_queue(3)
            .with_property(TRAN_MSG, "true")
            .with_property(PGROUP, "pg");
        let m = Message { sys_flag: sysflag::TRANSACTION_PREPARED_TYPE | sysflag::MULTI_TAGS, ..m };
        assert!(is_prepared(&m));
        let h = to_half(&m);
        assert_eq!((h.topic.as_str(), h.queue_id), (HALF_TOPIC, 0));
        assert_eq!(h.property(REAL_TOPIC), Some("T"));
        assert_eq!(h.property(REAL_QID), Some("3"));
        assert_eq!(h.sys_flag, sysflag::MULTI_TAGS);
        assert!(sysflag::takes_queue_offset(h.sys_flag));
    }

    #[test]
    fn a_claim_dropped_unsettled_is_released() {
        let d = Arc::new(Decisions::default());
        let claim = |origin, op_only| Claim {
            decisions: d.clone(),
            queue: 0,
            origin,
            outcome: Outcome::Commit,
            op_only,
            settled: false,
        };
        let state = |origin| d.queues.lock()[&0].entries.get(&origin).map(|e| e.state);
        {
            let mut queues = d.queues.lock();
            let q = queues.entry(0).or_default();
            q.entries.insert(1, Entry { state: State::Deciding(Outcome::Commit), last_copy: -1 });
            q.entries.insert(2, Entry { state: State::Deciding(Outcome::Commit), last_copy: -1 });
            q.entries.insert(3, Entry { state: State::Deciding(Outcome::Commit), last_copy: -1 });
        }
        // A commit whose put failed: forgotten, so a retry may commit.
        drop(claim(1, false));
        assert!(state(1).is_none());
        // Only its op message was missing: still committed, still without an op message.
        drop(claim(2, true));
        assert!(matches!(state(2), Some(State::Decided { outcome: Some(Outcome::Commit), op: None })));
        claim(3, false).settle(Some(4));
        assert!(matches!(state(3), Some(State::Decided { outcome: Some(Outcome::Commit), op: Some(4) })));
    }

    #[test]
    fn decisions_are_kept_until_the_recorded_cursors_pass_them_and_their_copies() {
        let d = Decisions::default();
        let decided =
            |op| Entry { state: State::Decided { outcome: Some(Outcome::Commit), op }, last_copy: -1 };
        {
            let mut queues = d.queues.lock();
            let q = queues.entry(0).or_default();
            q.entries.insert(5, decided(Some(3)));
            q.entries.insert(7, decided(Some(10)));
            q.entries.insert(9, Entry { state: State::Deciding(Outcome::Rollback), last_copy: -1 });
            q.entries.insert(11, decided(None));
        }
        // A copy of 5 put back at 20 while it was being decided.
        d.note_copy(0, 5, 20);
        d.note_copy(0, 6, 30); // not known: nothing to note
        assert!(d.has_copy_from(0, 5, 20) && !d.has_copy_from(0, 5, 21) && !d.has_copy_from(0, 6, 0));
        d.prune(0, 15, 5);
        assert_eq!(d.len(0), 4, "the op cursor passed 5's op message, but not its copy");
        d.prune(0, 21, 11);
        // Being decided, or decided without an op message: kept.
        assert_eq!(d.len(0), 2);
        assert!(
            d.queues.lock()[&0].entries.contains_key(&9) && d.queues.lock()[&0].entries.contains_key(&11)
        );
    }

    /// A store and its tables on a temporary directory, with no Checker: the cursors are
    /// never recorded, as on a SYNC_MASTER whose slave is down.
    fn open_store() -> (tempfile::TempDir, Arc<MessageStore>, Arc<ConfigTables>) {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::BrokerConfig::default();
        for (k, v) in [
            ("storePathRootDir", dir.path().to_str().unwrap()),
            ("mappedFileSizeCommitLog", "1048576"),
            ("listenPort", "0"),
            ("brokerIP1", "127.0.0.1"),
        ] {
            cfg.set(k, v).unwrap();
        }
        let store = MessageStore::open(cfg).unwrap();
        store.start().unwrap();
        let tables = Arc::new(ConfigTables::open(dir.path()).unwrap());
        seed_topics(&tables);
        (dir, store, tables)
    }

    /// Stores a half message of topic T (no UNIQ_KEY: nothing is found in the index) and
    /// returns it as END_TRANSACTION finds it.
    fn put_half(store: &MessageStore, body: &str) -> StoredMessage {
        let m = Message::new("T", body.as_bytes().to_vec()).with_property(PGROUP, "pg");
        let r = store.put_message_sync(&to_half(&m)).unwrap();
        assert!(r.status.is_stored());
        assert!(wait_dispatched_to(store, store.max_offset(), Duration::from_secs(5)));
        let end = EndRef {
            producer_group: "pg",
            tran_state_table_offset: r.queue_offset,
            commit_log_offset: r.phy_offset,
        };
        find_half(store, &end).unwrap()
    }

    /// END_TRANSACTION as its processor does it: claim, then for a commit put the message
    /// and its op message, for a rollback the op message. `None` if it decided; else what the
    /// claim answered.
    fn end(
        d: &Arc<Decisions>,
        store: &MessageStore,
        tables: &ConfigTables,
        half: &StoredMessage,
        outcome: Outcome,
    ) -> Option<Verdict> {
        let claim = match d.claim(store, tables, half, outcome) {
            Verdict::Claimed(c) => c,
            other => return Some(other),
        };
        if outcome == Outcome::Commit && !claim.op_only() {
            assert!(store.put_message_sync(&committed(half).unwrap()).unwrap().status.is_stored());
        }
        let op = op_offset(&store.put_message(&op_message(half, outcome)).unwrap());
        assert!(op.is_some());
        claim.settle(op);
        // Dispatched soon after, as on a running broker.
        assert!(wait_dispatched_to(store, store.max_offset(), Duration::from_secs(5)));
        None
    }

    fn outcome_of(i: usize) -> Outcome {
        if i % 2 == 0 { Outcome::Commit } else { Outcome::Rollback }
    }

    fn other(o: Outcome) -> Outcome {
        match o {
            Outcome::Commit => Outcome::Rollback,
            Outcome::Rollback => Outcome::Commit,
        }
    }

    /// Over the cap, the oldest decisions leave memory; an END_TRANSACTION of one of them is
    /// answered from its op message (agreed, or refused), and decides nothing again.
    #[test]
    fn decisions_over_the_cap_are_spilled_and_still_decided_once() {
        let (_dir, store, tables) = open_store();
        let d = Arc::new(Decisions { cap: 8, ..Decisions::default() });
        // 0 stays undecided (a slow local transaction), 1 is being decided during the spills.
        let halves: Vec<StoredMessage> = (0..17).map(|i| put_half(&store, &format!("m{i}"))).collect();
        let being_decided = match d.claim(&store, &tables, &halves[1], Outcome::Commit) {
            Verdict::Claimed(c) => c,
            other => panic!("{other:?}"),
        };
        for (i, h) in halves.iter().enumerate().take(14).skip(2) {
            assert!(end(&d, &store, &tables, h, outcome_of(i)).is_none());
        }
        // The claim of 12 found 11 known, over 8 + 8/4: it spilled 2..=6, down to 3/4 of the
        // cap (the one being decided stays).
        let known = |o: i64| d.queues.lock()[&0].entries.contains_key(&o);
        assert_eq!(d.len(0), 8);
        assert!((2..=6).all(|o| !known(o)) && (7..=13).all(known) && known(1));
        for (i, h) in halves.iter().enumerate().skip(14) {
            assert!(end(&d, &store, &tables, h, outcome_of(i)).is_none());
        }
        assert_eq!(d.len(0), 11);
        // The Checker's tick spills down to 3/4 of the cap: 7..=11.
        d.spill(&store);
        assert_eq!(d.len(0), 6);
        assert!((7..=11).all(|o| !known(o)) && (12..=16).all(known));
        assert!(matches!(d.queues.lock()[&0].entries[&1].state, State::Deciding(Outcome::Commit)));
        // Messages in the real topic and op messages.
        let counts = || {
            assert!(wait_dispatched_to(&store, store.max_offset(), Duration::from_secs(5)));
            (store.queue_max_offset("T", 0), store.queue_max_offset(OP_TOPIC, 0))
        };
        assert_eq!(counts(), (8, 15));
        for (i, h) in halves.iter().enumerate().skip(2) {
            let done = outcome_of(i);
            for asked in [done, other(done)] {
                match end(&d, &store, &tables, h, asked) {
                    Some(Verdict::Decided(Some(x))) => assert_eq!(x, done, "{i}"),
                    v => panic!("transaction {i} ({done:?}), asked {asked:?}: {v:?}"),
                }
            }
        }
        assert_eq!(counts(), (8, 15), "a spilled transaction was decided again");
        // Below the watermark but never decided: decided now, once.
        assert!(end(&d, &store, &tables, &halves[0], Outcome::Rollback).is_none());
        assert!(matches!(
            end(&d, &store, &tables, &halves[0], Outcome::Commit),
            Some(Verdict::Decided(Some(Outcome::Rollback)))
        ));
        being_decided.settle(None);
        assert_eq!(counts(), (8, 16));
        // Once the recorded cursors pass every spilled op message, the spills are forgotten
        // (their entries would have been pruned).
        d.prune(0, store.queue_max_offset(HALF_TOPIC, 0), counts().1);
        let q = &d.queues.lock()[&0];
        assert!(q.spills.is_empty() && q.spilled_below == 0);
        store.shutdown();
    }

    /// A restart reads the op queue from the recorded cursor: over the cap, it spills as it
    /// reads, and the spilled decisions still hold.
    #[test]
    fn the_op_queue_read_after_a_restart_is_spilled_over_the_cap() {
        let (_dir, store, tables) = open_store();
        let before = Arc::new(Decisions::default());
        let halves: Vec<StoredMessage> = (0..12).map(|i| put_half(&store, &format!("m{i}"))).collect();
        for (i, h) in halves.iter().enumerate() {
            assert!(end(&before, &store, &tables, h, outcome_of(i)).is_none());
        }
        assert!(wait_dispatched_to(&store, store.max_offset(), Duration::from_secs(5)));
        let d = Arc::new(Decisions { cap: 8, ..Decisions::default() });
        for (i, h) in halves.iter().enumerate() {
            let done = outcome_of(i);
            assert!(
                matches!(end(&d, &store, &tables, h, other(done)), Some(Verdict::Decided(Some(x))) if x == done),
                "{i}"
            );
            assert!(d.len(0) <= 8);
        }
        assert_eq!(store.queue_max_offset("T", 0), 6);
        assert_eq!(store.queue_max_offset(OP_TOPIC, 0), 12);
        store.shutdown();
    }

    /// A copy the Checker puts back of a transaction that may be spilled keeps the op cursor
    /// from passing its op message, as its entry's `last_copy` would.
    #[test]
    fn a_copy_of_a_spilled_transaction_is_noted() {
        let d = Decisions { cap: 4, ..Decisions::default() };
        {
            let mut queues = d.queues.lock();
            let q = queues.entry(0).or_default();
            for o in 0..6 {
                q.entries.insert(
                    o * 2,
                    Entry {
                        state: State::Decided { outcome: Some(Outcome::Commit), op: Some(o) },
                        last_copy: -1,
                    },
                );
            }
            assert!(q.spill(0, 4, 6));
            assert_eq!((q.entries.len(), q.spilled_below), (3, 5));
            // Decided but its op message not dispatched yet, or being decided: not spilled,
            // whatever their origin.
            q.entries
                .insert(1, Entry { state: State::Decided { outcome: None, op: Some(9) }, last_copy: -1 });
            q.entries.insert(3, Entry { state: State::Deciding(Outcome::Commit), last_copy: -1 });
            assert!(q.spill(0, 4, 6));
            let mut left: Vec<i64> = q.entries.keys().copied().collect();
            left.sort_unstable();
            assert_eq!((left, q.spilled_below), (vec![1, 3, 10], 9));
        }
        d.note_copy(0, 2, 40);
        d.note_copy(0, 30, 41); // above every spill: not noted
        assert!(d.has_copy_from(0, 2, 40) && !d.has_copy_from(0, 2, 41) && !d.has_copy_from(0, 30, 0));
        // The op cursor passed every spilled op message, the half cursor not the copy: kept.
        d.prune(0, 40, 6);
        assert_eq!(d.queues.lock()[&0].spilled_below, 5);
        d.prune(0, 41, 6);
        assert_eq!(d.queues.lock()[&0].spilled_below, 0);
        assert!(!d.has_copy_from(0, 2, 0));
    }

    /// A spill is kept as runs of origins, each with the op-queue range of its op messages:
    /// a lookup reads one run's, not the whole spill's.
    #[test]
    fn a_lookup_reads_the_op_messages_of_one_run() {
        let mut q = QueueDecisions::default();
        for o in 0..3000 {
            // 5 was decided late: its op message is far from its neighbours'.
            let op = if o == 5 { 2500 } else { o };
            q.entries.insert(
                o,
                Entry {
                    state: State::Decided { outcome: Some(Outcome::Commit), op: Some(op) },
                    last_copy: -1,
                },
            );
        }
        assert!(q.spill(0, 2000, 3000));
        assert_eq!((q.entries.len(), q.spilled_below), (1500, 1500));
        assert_eq!(q.spilled_ranges(10), vec![(0, 2500)]);
        assert_eq!(q.spilled_ranges(1200), vec![(1024, 1499)]);
        assert!(q.spilled_ranges(1500).is_empty() && q.spilled_ranges(2999).is_empty());
    }

    /// A commit whose op message's put failed: the Checker writes the op message itself
    /// (no check-back, no copy put back), and the decision then leaves memory as any other.
    #[test]
    fn the_checker_writes_the_op_message_a_commit_could_not() {
        let (_dir, store, tables) = open_store();
        let half = put_half(&store, "a");
        let d = Arc::new(Decisions::default());
        let Verdict::Claimed(claim) = d.claim(&store, &tables, &half, Outcome::Commit) else {
            panic!("claimed")
        };
        assert!(store.put_message_sync(&committed(&half).unwrap()).unwrap().status.is_stored());
        // The op message's put failed.
        claim.settle(None);
        let state = || d.queues.lock()[&0].entries.get(&0).map(|e| e.state);
        assert!(matches!(state(), Some(State::Decided { outcome: Some(Outcome::Commit), op: None })));
        assert!(d.queues.lock()[&0].missing_ops, "the Checker's next round looks for it");

        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let lookups = asked.clone();
        let producers: ProducerLookup = Arc::new(move |_, _| {
            lookups.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            None
        });
        // Due at once: without the op message it would be checked back.
        let settings = CheckSettings {
            interval: Duration::from_secs(60),
            timeout_ms: 0,
            check_max: 15,
            file_reserved_ms: i64::MAX,
        };
        let mut checker = Checker::new(store.clone(), tables.clone(), producers, None, settings, d.clone());
        let stop = StopSignal::new();
        checker.check_queue(0, &stop);
        assert!(matches!(state(), Some(State::Decided { outcome: Some(Outcome::Commit), op: Some(0) })));
        assert!(!d.queues.lock()[&0].missing_ops, "the later rounds do not read every entry again");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 0, "no check-back");
        assert!(wait_dispatched_to(&store, store.max_offset(), Duration::from_secs(5)));
        assert_eq!(store.queue_max_offset(HALF_TOPIC, 0), 1, "no copy put back");
        let op_q = store.consume_queues().find(OP_TOPIC, 0).unwrap();
        assert_eq!(op_q.max_offset_in_queue(), 1);
        assert_eq!(
            read_op(&store, &op_q, store.consume_queues().find(HALF_TOPIC, 0).as_deref(), 0),
            Some((0, Some(Outcome::Commit)))
        );
        let op = store.message_at(op_q.get(0).unwrap().phy_offset).unwrap();
        assert_eq!(op.body, b"0");

        // The next rounds pass the half message and the op message; once recorded, the
        // decision leaves memory, and a commit asked again decides nothing.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while d.len(0) > 0 {
            assert!(std::time::Instant::now() < deadline, "the decision was never pruned");
            store.flush().unwrap();
            checker.check_queue(0, &stop);
            checker.settle();
        }
        assert!(matches!(d.claim(&store, &tables, &half, Outcome::Commit), Verdict::Passed));
        assert_eq!(op_q.max_offset_in_queue(), 1, "one op message");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 0, "no check-back");
    }
}
