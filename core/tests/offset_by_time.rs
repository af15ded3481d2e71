//! Searching a queue by store time (SEARCH_OFFSET_BY_TIMESTAMP, RocketMQ 5's `boundaryType`):
//! both boundaries agree with a plain scan of the queue's store times, across ConsumeQueue
//! files, for times before, inside, between and after the messages.

mod common;

use std::time::Duration;

use common::{message, store_config, wait_until};
use rmqha_core::store::clock::now_ms;
use rmqha_core::{GetMessageStatus, MessageStore, PutStatus, TimeBoundary};

#[test]
fn both_boundaries_agree_with_a_scan_of_store_times() {
    let dir = tempfile::tempdir().unwrap();
    // Ten units per ConsumeQueue file: the search crosses files.
    let store =
        MessageStore::open(store_config(dir.path(), &[("mappedFileSizeConsumeQueue", "200")])).unwrap();
    store.start().unwrap();
    // Groups of puts, most of a group in one millisecond, with at least 2 ms between groups
    // (a store time is at most 1 ms short of the system clock), so that times shared by
    // several messages and times no message has both occur.
    let mut i = 0;
    for group in 0..7 {
        for _ in 0..(group % 3 + 1) * 3 {
            assert_eq!(store.put_message_sync(&message("T", 0, i, 24)).unwrap().status, PutStatus::PutOk);
            i += 1;
        }
        let t = now_ms();
        assert!(wait_until(Duration::from_secs(5), || now_ms() >= t + 3));
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));

    let mut times = Vec::new();
    while (times.len() as i64) < store.queue_max_offset("T", 0) {
        let got = store.get_messages("T", 0, times.len() as i64, 32);
        assert_eq!(got.status, GetMessageStatus::Found);
        times.extend(got.messages().iter().map(|m| m.store_timestamp));
    }
    assert_eq!(times.len(), i);
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "store times in queue order: {times:?}");
    let (first, last) = (times[0], times[times.len() - 1]);
    let max = times.len() as i64;

    let mut gaps = 0;
    for ts in first - 3..=last + 3 {
        let lower = times.iter().position(|&t| t >= ts).map_or(max, |p| p as i64);
        let upper = times.iter().rposition(|&t| t <= ts).map_or(0, |p| p as i64);
        assert_eq!(
            store.queue_offset_by_time_bounded("T", 0, ts, TimeBoundary::Lower),
            lower,
            "lower of {ts}"
        );
        assert_eq!(
            store.queue_offset_by_time_bounded("T", 0, ts, TimeBoundary::Upper),
            upper,
            "upper of {ts}"
        );
        assert_eq!(store.queue_offset_by_time("T", 0, ts), lower, "the default is the lower boundary");
        if (first..=last).contains(&ts) && !times.contains(&ts) {
            gaps += 1;
            // Between two messages: lower is the one after, upper the one before.
            assert_eq!(lower, upper + 1, "around {ts}");
        }
    }
    assert!(gaps > 0, "the groups left times without messages: {times:?}");
    // Before every message both answer the first; after every message, lower is the next
    // offset to be written and upper the last message.
    assert_eq!(store.queue_offset_by_time_bounded("T", 0, 0, TimeBoundary::Upper), 0);
    assert_eq!(store.queue_offset_by_time_bounded("T", 0, i64::MAX, TimeBoundary::Lower), max);
    assert_eq!(store.queue_offset_by_time_bounded("T", 0, i64::MAX, TimeBoundary::Upper), max - 1);
    // A queue that does not exist answers 0 either way.
    assert_eq!(store.queue_offset_by_time_bounded("T", 5, last, TimeBoundary::Upper), 0);
    assert_eq!(store.queue_offset_by_time_bounded("None", 0, last, TimeBoundary::Lower), 0);
    store.shutdown();
}

#[test]
fn boundary_names_are_read_as_rocketmq_reads_them() {
    for (name, want) in [
        (Some("UPPER"), TimeBoundary::Upper),
        (Some("upper"), TimeBoundary::Upper),
        (Some("Upper"), TimeBoundary::Upper),
        (Some("LOWER"), TimeBoundary::Lower),
        (Some(""), TimeBoundary::Lower),
        (Some("up"), TimeBoundary::Lower),
        (None, TimeBoundary::Lower),
    ] {
        assert_eq!(TimeBoundary::from_name(name), want, "{name:?}");
    }
}
