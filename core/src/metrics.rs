//! The broker's state as Prometheus text (exposition format 0.0.4): what `offsets()` tells,
//! and the put path's counters (see `store::put_metrics`). `Broker::metrics` renders it;
//! `rmqha broker --metrics-listen` serves it over HTTP, and every binding returns it.

use std::fmt::Write as _;

use crate::broker::Broker;
use crate::store::PutStatus;
use crate::store::put_metrics::WAIT_BUCKETS;

/// The content type a scrape answer carries.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value with `\`, `"` and newlines escaped as the format requires.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {value}");
        } else {
            let _ = writeln!(self.0, "{name}{{{labels}}} {value}");
        }
    }
    fn gauge(&mut self, name: &str, help: &str, value: impl std::fmt::Display) {
        self.family(name, "gauge", help);
        self.sample(name, "", value);
    }
}

/// Renders `broker`'s metrics.
pub fn render(broker: &Broker) -> String {
    let o = broker.offsets();
    let mut out = Out(String::with_capacity(4096));
    out.family("rmqha_info", "gauge", "The broker's name, role and rmqha version; always 1.");
    out.sample(
        "rmqha_info",
        &format!(
            "broker_name=\"{}\",role=\"{}\",version=\"{}\"",
            label(&broker.config().broker_name),
            o.role.as_str(),
            env!("CARGO_PKG_VERSION")
        ),
        1,
    );
    out.gauge(
        "rmqha_commitlog_max_offset_bytes",
        "CommitLog offset where the next record goes.",
        o.max_offset,
    );
    out.gauge("rmqha_commitlog_min_offset_bytes", "CommitLog offset of the oldest file kept.", o.min_offset);
    out.gauge("rmqha_commitlog_flushed_offset_bytes", "CommitLog offset flushed to disk.", o.flushed_offset);
    out.gauge(
        "rmqha_slave_ack_offset_bytes",
        "Master: the highest offset any slave acked; slave: the highest offset it acked.",
        o.slave_ack_offset,
    );
    out.gauge(
        "rmqha_dispatch_behind_bytes",
        "CommitLog bytes not yet dispatched to the ConsumeQueues and index.",
        o.dispatch_behind_bytes,
    );
    if broker.role() != crate::config::BrokerRole::Slave {
        out.gauge("rmqha_ha_slaves", "Slaves connected to this master.", o.slaves.len());
        out.family("rmqha_ha_slave_ack_offset_bytes", "gauge", "The offset each connected slave acked.");
        for s in &o.slaves {
            out.sample("rmqha_ha_slave_ack_offset_bytes", &format!("slave=\"{}\"", s.addr), s.ack_offset);
        }
        out.family("rmqha_ha_slave_lag_bytes", "gauge", "Bytes each connected slave is behind this master.");
        for s in &o.slaves {
            out.sample("rmqha_ha_slave_lag_bytes", &format!("slave=\"{}\"", s.addr), s.lag_bytes);
        }
        out.gauge(
            "rmqha_ha_refused_slaves",
            "Slave connections refused recently (their reasons are in offsets()).",
            o.refused_slaves.len(),
        );
        out.family(
            "rmqha_delayed_messages",
            "gauge",
            "Delayed messages whose delivery is not yet recorded (not due, or its copy not yet flushed, \
             and on a SYNC_MASTER held by a slave), by delay level.",
        );
        let store = broker.store();
        for level in 1..=store.delay_levels_ms().len() {
            let Some(q) = store.consume_queues().find(crate::message::SCHEDULE_TOPIC, level as i32 - 1)
            else {
                continue;
            };
            let done = broker.tables().delay_offsets().offset(level as i32).unwrap_or(0);
            let waiting = (q.max_offset_in_queue() - done.max(q.min_offset_in_queue())).max(0);
            out.sample("rmqha_delayed_messages", &format!("level=\"{level}\""), waiting);
        }
    } else {
        out.gauge(
            "rmqha_ha_master_connected",
            "Slave: 1 while connected to its master.",
            u8::from(o.connected.unwrap_or(false)),
        );
    }

    let (puts, messages) = broker.store().stored_counts();
    out.family("rmqha_puts_stored_total", "counter", "Puts (calls) whose messages were stored, since start.");
    out.sample("rmqha_puts_stored_total", "", puts);
    out.family("rmqha_put_messages_stored_total", "counter", "Messages stored by puts, since start.");
    out.sample("rmqha_put_messages_stored_total", "", messages);
    let (found, miss) = broker.stats().pulls();
    out.family(
        "rmqha_pulls_total",
        "counter",
        "Pulls answered with messages (found) and without (miss), since start.",
    );
    out.sample("rmqha_pulls_total", "result=\"found\"", found);
    out.sample("rmqha_pulls_total", "result=\"miss\"", miss);
    out.family("rmqha_pull_messages_total", "counter", "Messages pulls returned, since start.");
    out.sample("rmqha_pull_messages_total", "", broker.stats().transferred());
    let m = broker.store().put_metrics().snapshot();
    out.family("rmqha_puts_refused_total", "counter", "Puts that stored nothing, by status.");
    for s in PutStatus::ALL.iter().filter(|s| !s.is_stored()) {
        out.sample("rmqha_puts_refused_total", &format!("status=\"{}\"", s.as_str()), m.refused[*s as usize]);
    }
    out.family(
        "rmqha_puts_waited_total",
        "counter",
        "Stored puts that waited for a flush (SYNC_FLUSH) or a slave (SYNC_MASTER), by final status.",
    );
    for s in PutStatus::ALL.iter().filter(|s| s.is_stored()) {
        out.sample("rmqha_puts_waited_total", &format!("status=\"{}\"", s.as_str()), m.waited[*s as usize]);
    }
    out.family(
        "rmqha_put_wait_seconds",
        "histogram",
        "How long stored puts waited for a flush or a slave before their final status.",
    );
    for (bound, count) in WAIT_BUCKETS.iter().zip(&m.wait_cumulative) {
        out.sample("rmqha_put_wait_seconds_bucket", &format!("le=\"{bound}\""), count);
    }
    let total = m.wait_cumulative[WAIT_BUCKETS.len()];
    out.sample("rmqha_put_wait_seconds_bucket", "le=\"+Inf\"", total);
    out.sample("rmqha_put_wait_seconds_sum", "", m.wait_sum_seconds);
    out.sample("rmqha_put_wait_seconds_count", "", total);
    out.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(super::label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
