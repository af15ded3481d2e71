//! Delayed messages (RocketMQ's `ScheduleMessageService`, spec 4.1's SCHEDULE_TOPIC_XXXX).
//!
//! A put whose `DELAY` property names a level from 1 to the number of `messageDelayLevel`
//! entries (a higher level counts as the last, 0 or below as no delay) is stored in topic
//! SCHEDULE_TOPIC_XXXX, queue `level - 1`, with the topic and queue it was sent to in
//! `REAL_TOPIC` and `REAL_QID`; the dispatcher gives its ConsumeQueue unit the delivery time
//! (store time + the level's delay) as tags code. On a master, the scheduler thread walks each
//! level's queue from its delay offset (`delayOffset.json`, mirrored to slaves by config sync)
//! and, once a unit is due, puts the message again to its real topic and queue, without
//! `DELAY`, as RocketMQ's `messageTimeup` does.
//!
//! Where rmqha does better than RocketMQ:
//!
//! - A delivery stored with a non-OK status (a SYNC_MASTER without a slave) is delivered,
//!   not put again and again (RocketMQ 4.9 retries it every 10 s, storing a copy each time).
//! - A level's offset is recorded only once the delivered copy is flushed, and on a
//!   SYNC_MASTER also held by a slave: a crash or a failover to the slave never skips a
//!   message whose delivery was lost. The price, as in RocketMQ after a crash, is that a
//!   delivery made since the last recorded offset may be made again (consumers see the same
//!   `UNIQ_KEY`). At a clean stop the same rule holds: what is not safe after the stop's flush
//!   is not recorded.
//! - Progress is recorded with a compare-and-set, so an offset set from outside meanwhile is
//!   never written over; each level gets its turn in every round, so a backlog on one holds
//!   up no other.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::message::properties::keys;
use crate::message::{Message, SCHEDULE_TOPIC};
use crate::metadata::ConfigTables;
use crate::store::clock::now_ms;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::flush::StopSignal;
use crate::store::{MessageStore, PutHandle, PutStatus, StoredMessage};

/// The property holding a delayed message's own topic.
pub const REAL_TOPIC: &str = "REAL_TOPIC";
/// The property holding a delayed message's own queue id.
pub const REAL_QID: &str = "REAL_QID";

/// How long the scheduler sleeps at most between looks at its queues (RocketMQ's
/// `DELAY_FOR_A_WHILE`).
const IDLE: Duration = Duration::from_millis(100);
/// How long it waits before trying a put the store refused (a full disk) again.
const REFUSED_BACKOFF: Duration = Duration::from_secs(1);
/// Deliveries of one level per round. A backlog on one level (after a long stop, say) then
/// holds up neither the other levels, which get their turn in every round, nor a shutdown,
/// which is looked for between rounds.
const LEVEL_BUDGET: usize = 1024;
/// Deliveries whose offsets wait to be recorded; past this, a level's newest entry absorbs
/// the next one (its offset is then recorded later, never earlier).
const MAX_PENDING: usize = 4096;

/// The delay level a message asks for: `Ok(None)` for none (no `DELAY`, or 0 and below),
/// clamped to the last of `levels` levels; an error for a value that is not a number.
pub fn delay_level(msg: &Message, levels: usize) -> Result<Option<usize>> {
    let Some(v) = msg.property(keys::DELAY) else { return Ok(None) };
    let level: i64 = v.trim().parse().map_err(|_| Error::PutFailed {
        status: PutStatus::MessageIllegal,
        reason: format!("DELAY {:?} is not a delay level (1 to {levels})", crate::clip(v, 32)),
    })?;
    if level <= 0 || levels == 0 {
        return Ok(None);
    }
    Ok(Some((level as usize).min(levels)))
}

/// `msgs` with every delayed message moved to SCHEDULE_TOPIC_XXXX, or `None` when none is
/// delayed (the common case: nothing is copied). A batch may not hold a delayed message, as
/// in RocketMQ (MESSAGE_ILLEGAL).
pub fn to_schedule(msgs: &[Message], levels: usize) -> Result<Option<Vec<Message>>> {
    let mut out: Option<Vec<Message>> = None;
    for (i, m) in msgs.iter().enumerate() {
        let Some(level) = delay_level(m, levels)? else { continue };
        // Checked here, as the CommitLog checks an undelayed message: stored under
        // SCHEDULE_TOPIC_XXXX, a message to a topic no put could take was answered PUT_OK, and
        // dropped with a warning when due (found by an audit).
        if let Some(why) = crate::processor::topic_name_error(&m.topic) {
            return Err(Error::PutFailed {
                status: PutStatus::MessageIllegal,
                reason: format!("topic {:?}: {}", crate::clip(&m.topic, 64), crate::clip(&why, 200)),
            });
        }
        if m.queue_id < 0 {
            return Err(Error::PutFailed {
                status: PutStatus::MessageIllegal,
                reason: format!("queue id {} is negative", m.queue_id),
            });
        }
        if m.topic == SCHEDULE_TOPIC {
            // Delivered into SCHEDULE_TOPIC_XXXX, it would be due at once and delivered again.
            return Err(Error::PutFailed {
                status: PutStatus::MessageIllegal,
                reason: format!("a message to {SCHEDULE_TOPIC} cannot be delayed (DELAY)"),
            });
        }
        if msgs.len() > 1 {
            return Err(Error::PutFailed {
                status: PutStatus::MessageIllegal,
                reason: "a batch cannot hold a delayed message (DELAY)".into(),
            });
        }
        let out = out.get_or_insert_with(|| msgs.to_vec());
        let s = &mut out[i];
        s.set_property(REAL_TOPIC, m.topic.clone());
        s.set_property(REAL_QID, m.queue_id.to_string());
        s.set_property(keys::DELAY, level.to_string());
        s.topic = SCHEDULE_TOPIC.to_string();
        s.queue_id = level as i32 - 1;
    }
    Ok(out)
}

/// The message a due unit delivers: the stored one, back to its real topic and queue,
/// without `DELAY`. `None` for a record that is no delayed message.
pub fn delivered(m: &StoredMessage) -> Option<Message> {
    if m.topic != SCHEDULE_TOPIC {
        return None;
    }
    let topic = m.property(REAL_TOPIC)?.to_string();
    if topic == SCHEDULE_TOPIC {
        // Its delivery would be due at once, and delivered again, for ever.
        return None;
    }
    let queue_id: i32 = m.property(REAL_QID)?.trim().parse().ok()?;
    let mut out = Message { topic, queue_id, ..m.to_message() };
    out.properties.retain(|(k, _)| k != keys::DELAY);
    Some(out)
}

/// A delivery whose offset waits to be recorded: level index, the queue offset to record,
/// and where the delivered copy ends in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    level: usize,
    next: i64,
    end: i64,
}

/// The scheduler of one master (see the module doc). Holds the store and tables, never the
/// broker.
pub(crate) struct Scheduler {
    store: Arc<MessageStore>,
    tables: Arc<ConfigTables>,
    /// On a SYNC_MASTER, how far a slave holds the log: deliveries count once below it.
    acked: Option<Arc<dyn Fn() -> i64 + Send + Sync>>,
    /// Each level's delay in ms, level 1 first.
    delays: Vec<i64>,
    /// Each level's next queue offset to deliver.
    cursor: Vec<i64>,
    /// Each level's offset in the table as the scheduler last read or wrote it: a different
    /// one there was set from outside (`Broker::set_delay_offset`), and the level goes on
    /// from it.
    recorded: Vec<Option<i64>>,
    pending: VecDeque<Pending>,
    /// Whether the last round logged a refused put (one warning per run of refusals).
    refused: bool,
    /// Where the CommitLog ended when the scheduler started, until every level's recorded
    /// offset was checked against its queue as it stood then (once that much is dispatched):
    /// an offset past the queue's end then (a slave promoted with its master's offsets but a
    /// shorter log, queues rebuilt) would skip every message delayed since, so it starts
    /// again from that end, as RocketMQ's scheduler resets an offset past
    /// `maxOffsetInQueue`. Nothing is delivered before.
    unchecked_start: Option<i64>,
}

impl Scheduler {
    pub(crate) fn new(
        store: Arc<MessageStore>,
        tables: Arc<ConfigTables>,
        acked: Option<Arc<dyn Fn() -> i64 + Send + Sync>>,
    ) -> Self {
        let delays = store.delay_levels_ms().to_vec();
        let recorded: Vec<Option<i64>> =
            (1..=delays.len()).map(|l| tables.delay_offsets().offset(l as i32)).collect();
        let cursor = recorded.iter().map(|o| o.unwrap_or(0).max(0)).collect();
        let unchecked_start = Some(store.max_offset());
        // Levels `messageDelayLevel` no longer has (it was shortened): their queues are not
        // walked, as in RocketMQ, so their messages wait for the level to come back.
        for q in store.queue_ids(SCHEDULE_TOPIC).into_iter().filter(|&q| q >= 0 && q as usize >= delays.len())
        {
            let waiting = store.queue_max_offset(SCHEDULE_TOPIC, q)
                - tables
                    .delay_offsets()
                    .offset(q + 1)
                    .unwrap_or(0)
                    .max(store.queue_min_offset(SCHEDULE_TOPIC, q));
            if waiting > 0 {
                tracing::warn!(
                    level = q + 1,
                    levels = delays.len(),
                    waiting,
                    "delayed messages of a level messageDelayLevel no longer has are not delivered \
                     until it has that level again"
                );
            }
        }
        Scheduler {
            store,
            tables,
            acked,
            delays,
            cursor,
            recorded,
            pending: VecDeque::new(),
            refused: false,
            unchecked_start,
        }
    }

    /// Runs until `stop`; then flushes the deliveries made and records the offsets of those
    /// that are safe as `settle` counts them. A delivery the flush did not write (it failed),
    /// or that no slave of a SYNC_MASTER holds, stays unrecorded, and is made again after
    /// the restart rather than claimed and perhaps lost.
    pub(crate) fn run(mut self, stop: Arc<StopSignal>) {
        loop {
            let wait = self.round(now_ms());
            self.settle();
            if !stop.sleep(wait) {
                break;
            }
        }
        if !self.pending.is_empty() {
            if let Err(e) = self.store.flush() {
                tracing::warn!("flushing delayed messages' deliveries at the stop failed: {e}");
            }
            self.settle();
        }
        if !self.pending.is_empty() {
            tracing::info!(
                deliveries = self.pending.len(),
                "delayed messages delivered but not yet safe (unflushed, or not held by a slave) \
                 are not recorded: they are delivered again after the restart"
            );
        }
    }

    /// Delivers every due unit of every level; returns how long to sleep.
    fn round(&mut self, now: i64) -> Duration {
        if let Some(start) = self.unchecked_start {
            // Not before every record of the start is in the queues.
            if (self.store.dispatcher().reput_from() as i64) < start {
                return IDLE;
            }
            self.unchecked_start = None;
            for level in 0..self.delays.len() {
                let q = self.store.consume_queues().find(SCHEDULE_TOPIC, level as i32);
                let end = q.map_or(0, |q| end_before(&q, start));
                if self.cursor[level] > end {
                    self.restart_from(
                        level,
                        end,
                        "the delay offset is past the end of its SCHEDULE_TOPIC_XXXX queue",
                    );
                    // Recorded at once: the table (and the metrics) no longer claim the
                    // messages from there delivered.
                    self.record(level, end);
                }
            }
        }
        let mut wait = IDLE;
        for level in 0..self.delays.len() {
            let recorded = self.tables.delay_offsets().offset(level as i32 + 1);
            if recorded != self.recorded[level] {
                tracing::info!(level = level + 1, offset = ?recorded, "delay offset set: delivering from there");
                self.recorded[level] = recorded;
                self.cursor[level] = recorded.unwrap_or(0).max(0);
                self.pending.retain(|p| p.level != level);
            }
            let Some(q) = self.store.consume_queues().find(SCHEDULE_TOPIC, level as i32) else { continue };
            let (min, max) = (q.min_offset_in_queue(), q.max_offset_in_queue());
            if self.cursor[level] < min {
                self.restart_from(level, min, "delayed messages removed by retention before their delivery");
                self.push(Pending { level, next: min, end: 0 });
            }
            let mut budget = LEVEL_BUDGET;
            while self.cursor[level] < max {
                if budget == 0 {
                    // More of this level is due: the next round comes at once.
                    wait = Duration::ZERO;
                    break;
                }
                budget -= 1;
                let at = self.cursor[level];
                let Some(unit) = q.get(at) else { break };
                // A delivery time beyond now plus the level's whole delay was stamped by a
                // clock that has since gone back: due now (RocketMQ's correctDeliverTimestamp).
                let due = unit.tags_code <= now || unit.tags_code > now.saturating_add(self.delays[level]);
                if !due {
                    let ms = (unit.tags_code - now).clamp(1, IDLE.as_millis() as i64);
                    wait = wait.min(Duration::from_millis(ms as u64));
                    break;
                }
                let Some(msg) = self.store.message_at(unit.phy_offset).as_ref().and_then(delivered) else {
                    tracing::warn!(
                        level = level + 1,
                        queue_offset = at,
                        phy_offset = unit.phy_offset,
                        "a SCHEDULE_TOPIC_XXXX unit names no delayed message: skipped"
                    );
                    self.cursor[level] = at + 1;
                    self.push(Pending { level, next: at + 1, end: 0 });
                    continue;
                };
                match self.store.put_message(&msg) {
                    Ok(handle) => {
                        let end = match &handle {
                            PutHandle::Ready(r) => r.end_offset(),
                            PutHandle::Pending(t) => t.current().end_offset(),
                        };
                        self.refused = false;
                        self.cursor[level] = at + 1;
                        self.push(Pending { level, next: at + 1, end });
                    }
                    // A message no put can store (its real topic is no valid name, say): put
                    // again, it would hold up every later delivery for good.
                    Err(Error::PutFailed {
                        status: status @ (PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded),
                        reason,
                    }) => {
                        tracing::warn!(
                            level = level + 1,
                            queue_offset = at,
                            %status,
                            "a delayed message cannot be delivered, skipped: {reason}"
                        );
                        self.cursor[level] = at + 1;
                        self.push(Pending { level, next: at + 1, end: 0 });
                    }
                    Err(e) => {
                        if !self.refused {
                            tracing::warn!(
                                level = level + 1,
                                queue_offset = at,
                                "delivering a delayed message failed, retrying: {e}"
                            );
                        }
                        self.refused = true;
                        return REFUSED_BACKOFF;
                    }
                }
            }
        }
        wait
    }

    /// Moves a level's cursor to `to`, saying why.
    fn restart_from(&mut self, level: usize, to: i64, why: &str) {
        tracing::warn!(level = level + 1, from = self.cursor[level], to, "{why}: delivering from there");
        self.cursor[level] = to;
    }

    /// Records `offset` for `level`, unless an offset was set from outside since the
    /// scheduler last read or wrote the table: the next round goes on from that one instead.
    fn record(&mut self, level: usize, offset: i64) {
        if self.tables.delay_offsets().update_offset_if(level as i32 + 1, self.recorded[level], offset) {
            self.recorded[level] = Some(offset);
        }
    }

    fn push(&mut self, p: Pending) {
        if self.pending.len() >= MAX_PENDING {
            if let Some(last) = self.pending.iter_mut().rev().find(|q| q.level == p.level) {
                *last = Pending { level: p.level, next: p.next, end: last.end.max(p.end) };
                return;
            }
        }
        self.pending.push_back(p);
    }

    /// Records the offsets of deliveries that are flushed (and, on a SYNC_MASTER, held by a
    /// slave).
    fn settle(&mut self) {
        let mut safe = self.store.flushed_offset();
        if let Some(acked) = &self.acked {
            safe = safe.min(acked());
        }
        while let Some(p) = self.pending.front().copied() {
            if p.end > safe {
                break;
            }
            self.pending.pop_front();
            self.record(p.level, p.next);
        }
    }
}

/// The end of `q` as it stood when the CommitLog ended at `phy_end`: one past its last unit
/// of a record before `phy_end`.
fn end_before(q: &ConsumeQueue, phy_end: i64) -> i64 {
    let (min, mut end) = (q.min_offset_in_queue(), q.max_offset_in_queue());
    while end > min {
        match q.get(end - 1) {
            Some(u) if u.phy_offset >= phy_end => end -= 1,
            _ => break,
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(props: &[(&str, &str)]) -> Message {
        let mut m = Message::new("T", b"x".to_vec()).with_queue(3);
        for (k, v) in props {
            m.set_property(*k, *v);
        }
        m
    }

    /// `Broker::set_delay_offset` between the round that made a delivery and the look that
    /// records it: the scheduler's record must not write over it (the table had no
    /// compare-and-set, and the operator's offset was lost).
    #[test]
    fn an_offset_set_while_a_delivery_waits_to_be_recorded_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = crate::BrokerConfig::default();
        cfg.set("storePathRootDir", dir.path().to_str().unwrap()).unwrap();
        cfg.set("mappedFileSizeCommitLog", "65536").unwrap();
        cfg.set("messageDelayLevel", "1s 2s").unwrap();
        let store = MessageStore::open(cfg).unwrap();
        let tables = Arc::new(ConfigTables::open(dir.path()).unwrap());
        let mut s = Scheduler::new(store.clone(), tables.clone(), None);
        s.round(now_ms());
        // Delivered up to 7 (skipped records: nothing to flush), then set to 9 from outside.
        s.cursor[0] = 7;
        s.push(Pending { level: 0, next: 7, end: 0 });
        tables.delay_offsets().update_offset(1, 9);
        s.settle();
        assert_eq!(tables.delay_offsets().offset(1), Some(9), "the offset set was written over");
        assert!(s.pending.is_empty());
        // The next round goes on from it.
        s.round(now_ms());
        assert_eq!(s.cursor[0], 9);
        // And records its own progress again from there.
        s.push(Pending { level: 0, next: 10, end: 0 });
        s.settle();
        assert_eq!(tables.delay_offsets().offset(1), Some(10));
        store.shutdown();
    }

    #[test]
    fn delay_levels_are_read_as_rocketmq_reads_them() {
        assert_eq!(delay_level(&msg(&[]), 18).unwrap(), None);
        assert_eq!(delay_level(&msg(&[("DELAY", "0")]), 18).unwrap(), None);
        assert_eq!(delay_level(&msg(&[("DELAY", "-2")]), 18).unwrap(), None);
        assert_eq!(delay_level(&msg(&[("DELAY", "3")]), 18).unwrap(), Some(3));
        assert_eq!(delay_level(&msg(&[("DELAY", "40")]), 18).unwrap(), Some(18), "clamped to the last level");
        let e = delay_level(&msg(&[("DELAY", "soon")]), 18).unwrap_err();
        assert!(e.to_string().contains("soon"), "{e}");
    }

    #[test]
    fn a_delayed_message_moves_to_its_levels_queue_and_back() {
        assert!(to_schedule(&[msg(&[("TAGS", "a")])], 18).unwrap().is_none(), "nothing copied");
        let out = to_schedule(&[msg(&[("TAGS", "a"), ("DELAY", "40")])], 18).unwrap().unwrap();
        let s = &out[0];
        assert_eq!((s.topic.as_str(), s.queue_id), (SCHEDULE_TOPIC, 17));
        assert_eq!(s.property(REAL_TOPIC), Some("T"));
        assert_eq!(s.property(REAL_QID), Some("3"));
        assert_eq!(s.property("DELAY"), Some("18"));
        let two = [msg(&[]), msg(&[("DELAY", "1")])];
        assert!(to_schedule(&two, 18).unwrap_err().to_string().contains("batch"));
    }
}
