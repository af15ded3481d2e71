//! The clients a broker knows from their heartbeats (RocketMQ's `ConsumerManager` and
//! `ProducerManager`): consumer groups with their members and subscriptions, producer groups
//! with theirs.
//!
//! A member is dropped when its connection closes (RocketMQ's channel-close event; here the
//! connection's [`Responder`] reports it) or after 120 s without a heartbeat (RocketMQ's
//! `channelExpiredTimeout`), whichever comes first; the table is pruned whenever it is read.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::message::java_string_hash;
use crate::remoting::Responder;

/// Java `BrokerConfig.channelExpiredTimeout`.
pub(crate) const CHANNEL_EXPIRED: Duration = Duration::from_secs(120);

/// A tag expression (`TagA || TagB`, or `*` for everything), as Java's
/// `FilterAPI.buildSubscriptionData` parses it into a tag set and a code set.
///
/// The store matches a ConsumeQueue unit by its tags code (the Java hash code of the
/// message's TAGS, 0 without TAGS) against the code set during its scan, as RocketMQ's
/// `ExpressionMessageFilter.isMatchedByConsumeQueue`; [`matches`](Self::matches) then
/// checks the TAGS text against the tag set, as RocketMQ's clients do, so two tags with
/// the same hash code are told apart. Clones share the sets (a heartbeat's subscription is
/// cloned into every pull parked with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TagFilter {
    sets: Option<Arc<TagSets>>,
}

#[derive(Debug, PartialEq, Eq)]
struct TagSets {
    tags: HashSet<String>,
    codes: HashSet<i32>,
}

impl TagFilter {
    /// Everything.
    pub(crate) fn all() -> Self {
        TagFilter { sets: None }
    }

    /// Parses a subscription expression; `None`, empty and `*` match everything.
    pub(crate) fn parse(expr: Option<&str>) -> Self {
        let expr = expr.map(str::trim).unwrap_or("");
        if expr.is_empty() || expr == "*" {
            return Self::all();
        }
        let tags: HashSet<String> =
            expr.split("||").map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect();
        let codes = tags.iter().map(|t| java_string_hash(t)).collect();
        TagFilter { sets: Some(Arc::new(TagSets { tags, codes })) }
    }

    /// Whether a message with `tags` passes: its TAGS is one of the expression's tags.
    pub(crate) fn matches(&self, tags: Option<&[u8]>) -> bool {
        match &self.sets {
            None => true,
            Some(s) => tags.and_then(|t| std::str::from_utf8(t).ok()).is_some_and(|t| s.tags.contains(t)),
        }
    }

    /// Whether a ConsumeQueue unit with `tags_code` may pass (RocketMQ's
    /// `codeSet.contains(tagsCode.intValue())`): false only if no tag of the expression has
    /// that hash code.
    pub(crate) fn matches_code(&self, tags_code: i64) -> bool {
        match &self.sets {
            None => true,
            Some(s) => s.codes.contains(&(tags_code as i32)),
        }
    }

    /// Whether this filter passes every message.
    pub(crate) fn is_all(&self) -> bool {
        self.sets.is_none()
    }

    /// About how much memory the sets take (shared by the clones).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.sets.as_ref().map_or(0, |s| 64 + s.tags.iter().map(|t| 48 + t.len()).sum::<usize>())
    }
}

/// One topic subscription of a consumer group (Java `SubscriptionData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub topic: String,
    pub sub_string: String,
    pub sub_version: i64,
    pub expression_type: String,
    pub filter: TagFilter,
}

/// One client connection known from a heartbeat.
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub responder: Responder,
    pub peer: SocketAddr,
    pub last_update: Instant,
}

impl Channel {
    fn alive(&self, now: Instant) -> bool {
        self.responder.is_connected() && now.duration_since(self.last_update) < CHANNEL_EXPIRED
    }
}

#[derive(Debug, Default)]
struct ConsumerGroup {
    channels: HashMap<String, Channel>,
    subscriptions: HashMap<String, Subscription>,
    message_model: String,
}

#[derive(Debug, Default)]
struct Inner {
    consumers: HashMap<String, ConsumerGroup>,
    producers: HashMap<String, HashMap<String, Channel>>,
}

impl Inner {
    fn prune(&mut self) {
        let now = Instant::now();
        self.consumers.retain(|group, g| {
            g.channels.retain(|id, c| {
                let keep = c.alive(now);
                if !keep {
                    tracing::info!(group, client = id, peer = %c.peer, "consumer gone (connection closed or heartbeat expired)");
                }
                keep
            });
            !g.channels.is_empty()
        });
        self.producers.retain(|_, m| {
            m.retain(|_, c| c.alive(now));
            !m.is_empty()
        });
    }
}

/// What a pull without a subscription in its header finds for its group and topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SubscriptionLookup {
    Found { subscription: Subscription, broadcasting: bool },
    NoGroup,
    NoTopic,
}

/// Consumer and producer groups and their live members.
#[derive(Debug, Default)]
pub(crate) struct ClientTable {
    inner: Mutex<Inner>,
}

impl ClientTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a consumer's heartbeat; its subscriptions replace the group's. Returns whether
    /// the group's membership changed.
    pub(crate) fn register_consumer(
        &self,
        group: &str,
        client_id: &str,
        channel: Channel,
        message_model: &str,
        subscriptions: Vec<Subscription>,
    ) -> bool {
        let mut inner = self.lock();
        inner.prune();
        let g = inner.consumers.entry(group.to_owned()).or_default();
        let added = g.channels.insert(client_id.to_owned(), channel).is_none();
        g.message_model = message_model.to_owned();
        for s in subscriptions {
            match g.subscriptions.get(&s.topic) {
                // A heartbeat from a member still on an older subscription must not roll the
                // group back (Java `updateSubscription` keeps the newer version).
                Some(old) if old.sub_version > s.sub_version => {}
                _ => {
                    g.subscriptions.insert(s.topic.clone(), s);
                }
            }
        }
        if added {
            tracing::info!(group, client = client_id, "new consumer connected");
        }
        added
    }

    /// Records a producer's heartbeat.
    pub(crate) fn register_producer(&self, group: &str, client_id: &str, channel: Channel) {
        let mut inner = self.lock();
        // Closed connections go here too, or a broker that only producers use would keep each
        // one's entry (and its socket) for good.
        inner.prune();
        inner.producers.entry(group.to_owned()).or_default().insert(client_id.to_owned(), channel);
    }

    /// Removes a client from a producer group and/or a consumer group (UNREGISTER_CLIENT),
    /// only as registered from the same connection (`peer`): as RocketMQ, which unregisters the
    /// request's own channel, so that nobody removes another client by its id.
    pub(crate) fn unregister(
        &self,
        client_id: &str,
        peer: SocketAddr,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) {
        let mut inner = self.lock();
        if let Some(g) = producer_group {
            if let Some(m) = inner.producers.get_mut(g) {
                if m.get(client_id).is_some_and(|c| c.peer == peer) {
                    m.remove(client_id);
                }
            }
        }
        if let Some(g) = consumer_group {
            if let Some(cg) = inner.consumers.get_mut(g) {
                if cg.channels.get(client_id).is_some_and(|c| c.peer == peer) {
                    cg.channels.remove(client_id);
                    tracing::info!(group = g, client = client_id, "consumer unregistered");
                }
            }
        }
        inner.prune();
    }

    /// The client ids of a consumer group's live members, sorted.
    pub(crate) fn consumer_ids(&self, group: &str) -> Vec<String> {
        let mut inner = self.lock();
        inner.prune();
        let ids: BTreeSet<&String> =
            inner.consumers.get(group).map(|g| g.channels.keys().collect()).unwrap_or_default();
        ids.into_iter().cloned().collect()
    }

    /// The group's subscription of `topic`.
    pub(crate) fn subscription(&self, group: &str, topic: &str) -> SubscriptionLookup {
        let mut inner = self.lock();
        inner.prune();
        let Some(g) = inner.consumers.get(group) else { return SubscriptionLookup::NoGroup };
        match g.subscriptions.get(topic) {
            Some(s) => SubscriptionLookup::Found {
                subscription: s.clone(),
                broadcasting: g.message_model == "BROADCASTING",
            },
            None => SubscriptionLookup::NoTopic,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_filters_match_by_java_hash() {
        let f = TagFilter::parse(Some("TagA || TagB"));
        assert!(f.matches(Some(b"TagA")));
        assert!(f.matches(Some(b"TagB")));
        assert!(!f.matches(Some(b"TagC")));
        assert!(!f.matches(None));
        assert!(!f.is_all());
        for all in [None, Some(""), Some("*"), Some("  *  ")] {
            let f = TagFilter::parse(all);
            assert!(f.is_all() && f.matches(None) && f.matches(Some(b"x")));
            assert!(f.matches_code(0) && f.matches_code(12345));
        }
    }

    #[test]
    fn tag_filters_match_consume_queue_codes_then_tag_text() {
        let f = TagFilter::parse(Some(" TagA ||TagB|| "));
        let code = |t: &str| java_string_hash(t) as i64;
        assert!(f.matches_code(code("TagA")) && f.matches_code(code("TagB")));
        assert!(!f.matches_code(code("TagC")));
        // A message without TAGS is dispatched with tags code 0: no tag here hashes to 0.
        assert!(!f.matches_code(0));
        // RocketMQ compares `tagsCode.intValue()`.
        assert!(f.matches_code(code("TagA") + (1 << 32)));
        // "Aa" and "BB" have the same Java hash code: the code passes both, the text one.
        assert_eq!(java_string_hash("Aa"), java_string_hash("BB"));
        let f = TagFilter::parse(Some("Aa"));
        assert!(f.matches_code(code("BB")));
        assert!(f.matches(Some(b"Aa")) && !f.matches(Some(b"BB")));
        assert!(!f.matches(Some(b"Aa ")) && !f.matches(None));
        // Clones share the sets.
        let g = f.clone();
        assert_eq!(f, g);
        assert!(f.heap_bytes() > 0 && TagFilter::all().heap_bytes() == 0);
    }
}
