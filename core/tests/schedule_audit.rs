//! Delayed messages and retries at their edges: a delay offset ahead of its queue, a
//! delayed message addressed to SCHEDULE_TOPIC_XXXX itself, a client's retry past its limit.

mod common;

use std::time::Duration;

use common::{broker_config, wait_until};
use rmqha_core::{Broker, BrokerConfig, Message};

const WAIT: Duration = Duration::from_secs(15);

fn config(dir: &std::path::Path) -> BrokerConfig {
    broker_config(
        dir,
        "ASYNC_MASTER",
        &[
            ("messageDelayLevel", "1s 1s 1s 1s 1s"),
            ("flushCommitLogThoroughInterval", "200"),
            ("autoCreateSubscriptionGroup", "false"),
        ],
    )
}

fn delayed(body: &str) -> Message {
    Message::new("Orders", body.as_bytes().to_vec()).with_queue(0).with_property("DELAY", "1")
}

/// A delay offset past the end of its level's queue (a slave promoted with the master's synced
/// offsets but a shorter log, a store whose queues were rebuilt or copied): RocketMQ's
/// scheduler starts again from the queue's end; messages delayed since must not be skipped.
#[test]
fn a_delay_offset_ahead_of_its_queue_strands_no_new_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path())).unwrap();
    let path = b.tables().delay_offsets().path();
    b.shutdown();
    std::fs::write(&path, r#"{"offsetTable":{1:3}}"#).unwrap();

    let b = Broker::start_master(config(dir.path())).unwrap();
    assert_eq!(b.delay_offset(1), Some(3));
    b.put_message_sync(&delayed("after-promotion")).unwrap();
    assert!(
        wait_until(WAIT, || b.get_messages("Orders", 0, 0, 8).messages().len() == 1),
        "a message delayed after the restart was never delivered"
    );
    b.shutdown();
}
