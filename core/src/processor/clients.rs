//! The clients a broker knows from their heartbeats (RocketMQ's `ConsumerManager` and
//! `ProducerManager`): consumer groups with their members and subscriptions, producer groups
//! with theirs.
//!
//! A member is dropped when its connection closes (RocketMQ's channel-close event; here the
//! connection's [`Responder`] reports it) or after `channelExpiredTimeout` (120 s) without a
//! heartbeat, whichever comes first; the table is pruned whenever it is read. A member
//! dropped for its heartbeats while its connection stayed open (a hung client) is also
//! recorded for [`ClientTable::expire`], whose caller closes that connection and tells the
//! rest of its group, as RocketMQ 5's `scanNotActiveChannel` does (4.9 drops it without a
//! word).
//!
//! A consumer heartbeat's subscriptions replace its group's, as RocketMQ's
//! `ConsumerGroupInfo.updateSubscription`: a topic it leaves out is dropped (a pull for it
//! without a subscription in its header is then answered SUBSCRIPTION_NOT_EXIST), and a
//! group has at most 4096 topics.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::filter::{SqlError, SqlExpression};
use crate::message::properties::keys;
use crate::message::{decode_record, java_string_hash};
use crate::remoting::{LanguageCode, Responder};
use crate::store::MessageFilter;

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

/// RocketMQ's SQL92 expression type (`ExpressionType.SQL92`).
pub(crate) const SQL92: &str = "SQL92";

/// Whether an `expressionType` is a tag expression (Java `ExpressionType.isTagType`:
/// absent, empty or `TAG`, case-sensitive).
pub(crate) fn is_tag_type(expression_type: Option<&str>) -> bool {
    matches!(expression_type, None | Some("") | Some("TAG"))
}

/// A subscription's filter: a tag expression, or a compiled SQL92 one (RocketMQ's
/// `SubscriptionData` with its `ConsumerFilterData`). Clones share what they hold.
#[derive(Debug, Clone)]
pub(crate) enum ConsumerFilter {
    Tag(TagFilter),
    Sql(Arc<SqlExpression>),
    /// An expression that cannot be evaluated: a SQL92 one that does not compile, or a type
    /// this broker has no filter for. A heartbeat's subscription keeps the reason, and pulls
    /// relying on it are answered FILTER_DATA_NOT_EXIST, as RocketMQ answers them when its
    /// `ConsumerFilterManager` could not register the expression.
    Invalid(Arc<str>),
}

/// Why a subscription's expression cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FilterError {
    /// A type other than TAG and SQL92.
    Unsupported(String),
    /// A SQL92 expression that does not compile.
    Parse(SqlError),
}

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FilterError::Unsupported(t) => {
                write!(f, "expression type {:?} is not supported (TAG or SQL92)", crate::clip(t, 64))
            }
            FilterError::Parse(e) => e.fmt(f),
        }
    }
}

impl ConsumerFilter {
    /// The filter for an expression of `expression_type` (see [`is_tag_type`]).
    pub(crate) fn build(
        expression_type: Option<&str>,
        expression: Option<&str>,
    ) -> Result<Self, FilterError> {
        match expression_type {
            t if is_tag_type(t) => Ok(ConsumerFilter::Tag(TagFilter::parse(expression))),
            Some(SQL92) => SqlExpression::compile(expression.unwrap_or(""))
                .map(|e| ConsumerFilter::Sql(Arc::new(e)))
                .map_err(FilterError::Parse),
            other => Err(FilterError::Unsupported(other.unwrap_or_default().to_owned())),
        }
    }

    /// [`build`](Self::build) for a heartbeat's subscription: what does not build is kept
    /// as `Invalid`, with the reason.
    pub(crate) fn registered(expression_type: Option<&str>, expression: &str) -> Self {
        Self::build(expression_type, Some(expression))
            .unwrap_or_else(|e| ConsumerFilter::Invalid(e.to_string().into()))
    }

    /// Whether this filter passes every message.
    pub(crate) fn is_all(&self) -> bool {
        matches!(self, ConsumerFilter::Tag(t) if t.is_all())
    }

    /// Whether a message's properties decide whether it passes, beyond its tags code (a
    /// parked pull then reads each new record to know whether to wake).
    pub(crate) fn needs_record(&self) -> bool {
        !matches!(self, ConsumerFilter::Tag(_))
    }

    /// About how much memory it takes (shared by the clones).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            ConsumerFilter::Tag(t) => t.heap_bytes(),
            ConsumerFilter::Sql(e) => 64 + 8 * e.text().len(),
            ConsumerFilter::Invalid(why) => 16 + why.len(),
        }
    }
}

impl PartialEq for ConsumerFilter {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ConsumerFilter::Tag(a), ConsumerFilter::Tag(b)) => a == b,
            (ConsumerFilter::Sql(a), ConsumerFilter::Sql(b)) => a.text() == b.text(),
            (ConsumerFilter::Invalid(a), ConsumerFilter::Invalid(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for ConsumerFilter {}

impl MessageFilter for ConsumerFilter {
    fn matches_unit(&self, tags_code: i64) -> bool {
        match self {
            ConsumerFilter::Tag(t) => t.matches_code(tags_code),
            ConsumerFilter::Sql(e) => e.matches_unit(tags_code),
            ConsumerFilter::Invalid(_) => false,
        }
    }

    fn matches_record(&self, record: &[u8]) -> bool {
        match self {
            // A tag with the same hash code as a subscribed one is told apart here.
            ConsumerFilter::Tag(t) => decode_record(record).is_ok_and(|v| t.matches(v.property(keys::TAGS))),
            ConsumerFilter::Sql(e) => e.matches_record(record),
            ConsumerFilter::Invalid(_) => false,
        }
    }
}

/// One topic subscription of a consumer group (Java `SubscriptionData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub topic: String,
    pub sub_string: String,
    pub sub_version: i64,
    pub expression_type: String,
    pub filter: ConsumerFilter,
}

impl Subscription {
    /// Warns, naming group, topic and reason, if the expression cannot be used: once per
    /// subscription a heartbeat brings (a new topic or a newer version), not at every
    /// heartbeat repeating it.
    fn warn_if_invalid(self, group: &str) -> Self {
        if let ConsumerFilter::Invalid(why) = &self.filter {
            tracing::warn!(
                group,
                topic = self.topic.as_str(),
                "a consumer's subscription cannot be used, its pulls will be refused: {why}"
            );
        }
        self
    }

    /// As Java's `SubscriptionData` (fastjson's order): the tag and code sets as
    /// `FilterAPI.buildSubscriptionData` fills them from the expression (`*` has none), tags
    /// sorted. GET_CONSUMER_CONNECTION_LIST's subscription table and QUERY_CONSUME_QUEUE.
    pub(crate) fn java_json(&self) -> serde_json::Value {
        let expr = self.sub_string.trim();
        // `FilterAPI.build` fills the sets for tag expressions only.
        let tags: Vec<&str> = if expr.is_empty() || expr == "*" || !is_tag_type(Some(&self.expression_type)) {
            Vec::new()
        } else {
            let set: BTreeSet<&str> = expr.split("||").map(str::trim).filter(|t| !t.is_empty()).collect();
            set.into_iter().collect()
        };
        let codes: Vec<i32> = tags.iter().map(|t| java_string_hash(t)).collect();
        serde_json::json!({
            "classFilterMode": false, "codeSet": codes, "expressionType": self.expression_type,
            "subString": self.sub_string, "subVersion": self.sub_version, "tagsSet": tags, "topic": self.topic,
        })
    }
}

/// One client connection known from a heartbeat.
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub responder: Responder,
    pub peer: SocketAddr,
    /// The language and version the heartbeat's header named (GET_CONSUMER_CONNECTION_LIST).
    pub language: LanguageCode,
    pub version: i32,
    pub last_update: Instant,
    /// Who the ACL gate verified the heartbeat came from (`None` without `aclEnable`).
    pub acl: Option<Arc<crate::acl::AclIdentity>>,
}

impl Channel {
    /// Java's `Connection` of the client `id` on this channel (the connection lists).
    fn connection(&self, id: &str) -> serde_json::Value {
        serde_json::json!({
            "clientAddr": self.peer.to_string(), "clientId": id,
            "language": self.language.to_string(), "version": self.version,
        })
    }

    fn alive(&self, now: Instant, expiry: Duration) -> bool {
        self.responder.is_connected() && now.duration_since(self.last_update) < expiry
    }
}

/// Most topics a consumer group subscribes to (RocketMQ sets no limit). A heartbeat with
/// more keeps the first this many.
pub(crate) const MAX_SUBSCRIPTIONS_PER_GROUP: usize = 4096;

#[derive(Debug, Default)]
struct ConsumerGroup {
    channels: HashMap<String, Channel>,
    subscriptions: HashMap<String, Subscription>,
    message_model: String,
    consume_type: String,
    consume_from_where: String,
    /// Whether a heartbeat's subscriptions were cut to the limit since the last that fitted
    /// (to warn once, not on every heartbeat).
    warned_too_many: bool,
}

impl ConsumerGroup {
    /// Java `ConsumerGroupInfo.updateSubscription`: a heartbeat's subscriptions replace the
    /// group's; a topic it does not name is dropped, and for one it names the group keeps
    /// its entry unless the heartbeat's has a newer `subVersion` (a member still on an older
    /// subscription must not roll the group back). Beyond `max` topics the rest of the
    /// heartbeat's are ignored, with a warning. Returns how many topics were added and how
    /// many dropped (RocketMQ notifies the group's members when either is not 0).
    fn update_subscriptions(
        &mut self,
        group: &str,
        subscriptions: Vec<Subscription>,
        max: usize,
    ) -> (usize, usize) {
        let mut old = std::mem::take(&mut self.subscriptions);
        let mut next: HashMap<String, Subscription> = HashMap::with_capacity(subscriptions.len().min(max));
        let (mut ignored, mut added) = (0usize, 0usize);
        for s in subscriptions {
            if let Some(n) = next.get_mut(&s.topic) {
                // The same topic twice in one heartbeat: as Java, applied in turn.
                if s.sub_version > n.sub_version {
                    *n = s;
                }
                continue;
            }
            if next.len() >= max {
                ignored += 1;
                continue;
            }
            let keep = match old.remove(&s.topic) {
                Some(o) if o.sub_version >= s.sub_version => o,
                Some(_) => s.warn_if_invalid(group),
                None => {
                    added += 1;
                    s.warn_if_invalid(group)
                }
            };
            next.insert(keep.topic.clone(), keep);
        }
        self.subscriptions = next;
        if ignored == 0 {
            self.warned_too_many = false;
        } else if !self.warned_too_many {
            self.warned_too_many = true;
            tracing::warn!(
                group,
                ignored,
                "a heartbeat subscribes the group to more than {max} topics: the rest are ignored (warned once until it fits)"
            );
        }
        if !old.is_empty() {
            tracing::info!(
                group,
                dropped = old.len(),
                first = old.keys().next().map(String::as_str),
                "topics no longer in the group's heartbeat dropped from its subscriptions"
            );
        }
        (added, old.len())
    }
}

#[derive(Debug, Default)]
struct Inner {
    consumers: HashMap<String, ConsumerGroup>,
    producers: HashMap<String, HashMap<String, Channel>>,
    /// Connections a heartbeat came from, so that closing any other (a tool's, a slave's
    /// config sync) costs no walk over every group.
    peers: HashSet<SocketAddr>,
    /// Consumer groups a member left by expiring on an open connection, and those
    /// connections, since the last [`ClientTable::expire`].
    expired_groups: BTreeSet<String>,
    expired_connections: Vec<Responder>,
    /// `channelExpiredTimeout`.
    expiry: Duration,
}

/// Drops the members of one group whose heartbeats stopped or whose connection closed. A
/// consumer group that lost one is noted for its members' notification (even when the
/// connection had closed: its close may have been reported while the member was already
/// gone from here, and then nobody was told); a member's connection still open is noted to
/// be closed.
fn drop_dead(
    group: &str,
    channels: &mut HashMap<String, Channel>,
    consumer: bool,
    (now, expiry): (Instant, Duration),
    groups: &mut BTreeSet<String>,
    connections: &mut Vec<Responder>,
) {
    channels.retain(|id, c| {
        let keep = c.alive(now, expiry);
        if !keep {
            let open = c.responder.is_connected();
            if consumer {
                let why = if open { "heartbeats stopped" } else { "connection closed" };
                tracing::info!(group, client = id, peer = %c.peer, "consumer gone ({why})");
                groups.insert(group.to_owned());
            }
            if open {
                connections.push(c.responder.clone());
            }
        }
        keep
    });
}

impl Inner {
    /// Drops the dead members of every group (the expiry timer, a closed connection).
    fn prune(&mut self) {
        let clock = (Instant::now(), self.expiry);
        let (groups, connections) = (&mut self.expired_groups, &mut self.expired_connections);
        self.consumers.retain(|group, g| {
            drop_dead(group, &mut g.channels, true, clock, groups, connections);
            !g.channels.is_empty()
        });
        self.producers.retain(|group, m| {
            drop_dead(group, m, false, clock, groups, connections);
            !m.is_empty()
        });
    }

    /// Drops the dead members of one consumer group only: what a lookup of the group needs.
    /// (Pruning every group at every pull let one connection that registered many made-up
    /// members slow every consumer's pulls.)
    fn prune_consumers(&mut self, group: &str) {
        let clock = (Instant::now(), self.expiry);
        let Some(g) = self.consumers.get_mut(group) else { return };
        drop_dead(
            group,
            &mut g.channels,
            true,
            clock,
            &mut self.expired_groups,
            &mut self.expired_connections,
        );
        if g.channels.is_empty() {
            self.consumers.remove(group);
        }
    }

    /// Drops the dead members of one producer group only.
    fn prune_producers(&mut self, group: &str) {
        let clock = (Instant::now(), self.expiry);
        let Some(m) = self.producers.get_mut(group) else { return };
        drop_dead(group, m, false, clock, &mut self.expired_groups, &mut self.expired_connections);
        if m.is_empty() {
            self.producers.remove(group);
        }
    }
}

/// How a consumer group's heartbeat says it consumes (Java `ConsumerData`'s enums, as sent).
#[derive(Debug, Clone, Default)]
pub(crate) struct ConsumerKind {
    /// CLUSTERING or BROADCASTING.
    pub message_model: String,
    /// CONSUME_ACTIVELY (pull) or CONSUME_PASSIVELY (push).
    pub consume_type: String,
    /// CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET, CONSUME_FROM_TIMESTAMP, ...
    pub consume_from_where: String,
}

/// What a pull without a subscription in its header finds for its group and topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SubscriptionLookup {
    Found { subscription: Subscription, broadcasting: bool },
    NoGroup,
    NoTopic,
}

/// Consumer and producer groups and their live members.
#[derive(Debug)]
pub(crate) struct ClientTable {
    inner: Mutex<Inner>,
}

impl Default for ClientTable {
    fn default() -> Self {
        Self::new(Duration::from_secs(120))
    }
}

impl ClientTable {
    /// A table dropping clients after `expiry` without a heartbeat (`channelExpiredTimeout`).
    pub(crate) fn new(expiry: Duration) -> Self {
        ClientTable { inner: Mutex::new(Inner { expiry, ..Inner::default() }) }
    }

    /// How often [`expire`](Self::expire) should run: a tenth of the expiry, at most 10 s.
    pub(crate) fn expiry_scan_interval(&self) -> Duration {
        (self.lock().expiry / 10).min(Duration::from_secs(10))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a consumer's heartbeat; its subscriptions replace the group's (see
    /// `ConsumerGroup::update_subscriptions`). Returns whether the group changed as RocketMQ
    /// tells its members (`ConsumerManager.registerConsumer`): a new member, or a topic added
    /// to or dropped from its subscriptions.
    pub(crate) fn register_consumer(
        &self,
        group: &str,
        client_id: &str,
        channel: Channel,
        kind: &ConsumerKind,
        subscriptions: Vec<Subscription>,
    ) -> bool {
        let mut inner = self.lock();
        inner.prune_consumers(group);
        inner.peers.insert(channel.peer);
        let g = inner.consumers.entry(group.to_owned()).or_default();
        // One member per connection and group, as RocketMQ keys its members by channel: a
        // connection that names another client id replaces its member (a peer could
        // otherwise register any number of made-up members, which rebalancing would hand
        // queues to).
        let before = g.channels.len();
        g.channels.retain(|id, c| id == client_id || c.peer != channel.peer);
        let replaced = before != g.channels.len();
        let added = g.channels.insert(client_id.to_owned(), channel).is_none() || replaced;
        g.message_model.clone_from(&kind.message_model);
        g.consume_type.clone_from(&kind.consume_type);
        g.consume_from_where.clone_from(&kind.consume_from_where);
        let (topics_added, topics_dropped) =
            g.update_subscriptions(group, subscriptions, MAX_SUBSCRIPTIONS_PER_GROUP);
        if added {
            tracing::info!(group, client = client_id, "new consumer connected");
        }
        added || topics_added > 0 || topics_dropped > 0
    }

    /// Records a producer's heartbeat.
    pub(crate) fn register_producer(&self, group: &str, client_id: &str, channel: Channel) {
        let mut inner = self.lock();
        inner.prune_producers(group);
        inner.peers.insert(channel.peer);
        let members = inner.producers.entry(group.to_owned()).or_default();
        // One member per connection and group, as for consumers.
        members.retain(|id, c| id == client_id || c.peer != channel.peer);
        members.insert(client_id.to_owned(), channel);
    }

    /// A live connection of producer group `group` (RocketMQ's `getAvailableChannel`), the
    /// most recently heard from, among those whose account (under ACL) may publish to
    /// `topic`; `None` if the group has none.
    ///
    /// 4.9 picks any connection of the group: a producer group is no ACL resource, so any
    /// client that passes the gate could name another group in its heartbeat and be sent that
    /// group's check-backs, half messages and bodies included. Here a check-back goes only to
    /// a connection that could have sent the message and may decide it.
    pub(crate) fn producer_channel(&self, group: &str, topic: &str) -> Option<Responder> {
        let mut inner = self.lock();
        inner.prune_producers(group);
        inner
            .producers
            .get(group)?
            .values()
            .filter(|c| c.acl.as_ref().is_none_or(|id| id.check_publish(topic).is_ok()))
            .max_by_key(|c| c.last_update)
            .map(|c| c.responder.clone())
    }

    /// Removes a client from a producer group and/or a consumer group (UNREGISTER_CLIENT),
    /// only as registered from the same connection (`peer`): as RocketMQ, which unregisters the
    /// request's own channel, so that nobody removes another client by its id. Returns
    /// whether a member of the consumer group left.
    pub(crate) fn unregister(
        &self,
        client_id: &str,
        peer: SocketAddr,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) -> bool {
        let mut left = false;
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
                    left = true;
                    tracing::info!(group = g, client = client_id, "consumer unregistered");
                }
            }
        }
        inner.prune();
        left
    }

    /// Forgets every client on the connection from `peer`, which closed (RocketMQ's
    /// `doChannelCloseEvent`); returns the consumer groups a member left, sorted.
    pub(crate) fn connection_closed(&self, peer: SocketAddr) -> Vec<String> {
        let mut inner = self.lock();
        if !inner.peers.remove(&peer) {
            return Vec::new();
        }
        let mut groups = Vec::new();
        for (group, g) in inner.consumers.iter_mut() {
            let before = g.channels.len();
            g.channels.retain(|_, c| c.peer != peer);
            if g.channels.len() != before {
                tracing::info!(group = group.as_str(), %peer, "consumer gone (connection closed)");
                groups.push(group.clone());
            }
        }
        for members in inner.producers.values_mut() {
            members.retain(|_, c| c.peer != peer);
        }
        inner.prune();
        groups.sort();
        groups
    }

    /// Drops the members whose heartbeats stopped (see the module doc) and returns, once, the
    /// consumer groups that lost one since the last call (sorted) and the connections those
    /// members were on, still open, for the caller to close.
    pub(crate) fn expire(&self) -> (Vec<String>, Vec<Responder>) {
        let mut inner = self.lock();
        inner.prune();
        let groups = std::mem::take(&mut inner.expired_groups).into_iter().collect();
        let mut connections = std::mem::take(&mut inner.expired_connections);
        connections.sort_by_key(|r| r.peer());
        connections.dedup_by_key(|r| r.peer());
        (groups, connections)
    }

    /// The client ids of a consumer group's live members, sorted.
    pub(crate) fn consumer_ids(&self, group: &str) -> Vec<String> {
        let mut inner = self.lock();
        inner.prune_consumers(group);
        let ids: BTreeSet<&String> =
            inner.consumers.get(group).map(|g| g.channels.keys().collect()).unwrap_or_default();
        ids.into_iter().cloned().collect()
    }

    /// A consumer group's live members by client id, sorted (to push a request to each).
    pub(crate) fn consumer_channels(&self, group: &str) -> Vec<(String, Channel)> {
        let mut inner = self.lock();
        inner.prune_consumers(group);
        let mut out: Vec<(String, Channel)> = inner
            .consumers
            .get(group)
            .map(|g| g.channels.iter().map(|(id, c)| (id.clone(), c.clone())).collect())
            .unwrap_or_default();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The live connection of client `client_id` in consumer group `group` (Java's
    /// `ConsumerManager.findChannel`), to send it a request; `None` if it is not connected.
    pub(crate) fn consumer_channel(&self, group: &str, client_id: &str) -> Option<Channel> {
        let mut inner = self.lock();
        inner.prune_consumers(group);
        inner.consumers.get(group)?.channels.get(client_id).cloned()
    }

    /// A consumer group's live members and subscriptions as Java's `ConsumerConnection`
    /// (GET_CONSUMER_CONNECTION_LIST's body, `mqadmin consumerConnection`); `None` if no
    /// member is connected.
    pub(crate) fn consumer_connection(&self, group: &str) -> Option<serde_json::Value> {
        use serde_json::{Value, json};
        let mut inner = self.lock();
        inner.prune_consumers(group);
        let g = inner.consumers.get(group)?;
        let mut ids: Vec<&String> = g.channels.keys().collect();
        ids.sort();
        let connections: Vec<Value> = ids.into_iter().map(|id| g.channels[id].connection(id)).collect();
        let mut topics: Vec<&Subscription> = g.subscriptions.values().collect();
        topics.sort_by(|a, b| a.topic.cmp(&b.topic));
        let table: serde_json::Map<String, Value> =
            topics.into_iter().map(|s| (s.topic.clone(), s.java_json())).collect();
        Some(json!({
            "connectionSet": connections,
            "consumeFromWhere": g.consume_from_where,
            "consumeType": g.consume_type,
            "messageModel": g.message_model,
            "subscriptionTable": table,
        }))
    }

    /// A producer group's live connections as Java's `ProducerConnection`
    /// (GET_PRODUCER_CONNECTION_LIST's body, `mqadmin producerConnection`); `None` if none is
    /// connected.
    pub(crate) fn producer_connection(&self, group: &str) -> Option<serde_json::Value> {
        let mut inner = self.lock();
        inner.prune_producers(group);
        let members = inner.producers.get(group)?;
        let mut ids: Vec<&String> = members.keys().collect();
        ids.sort();
        let connections: Vec<serde_json::Value> =
            ids.into_iter().map(|id| members[id].connection(id)).collect();
        Some(serde_json::json!({ "connectionSet": connections }))
    }

    /// The consumer groups with a live member whose group subscribes to `topic` (4.9's
    /// `ConsumerManager.queryTopicConsumeByWho`).
    pub(crate) fn groups_subscribing(&self, topic: &str) -> Vec<String> {
        let mut inner = self.lock();
        inner.prune();
        inner
            .consumers
            .iter()
            .filter(|(_, g)| g.subscriptions.contains_key(topic))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The group's subscription of `topic`.
    pub(crate) fn subscription(&self, group: &str, topic: &str) -> SubscriptionLookup {
        let mut inner = self.lock();
        inner.prune_consumers(group);
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

    /// A member's channel on a real connection (its peer as the broker would see it).
    fn channel(listener: &std::net::TcpListener) -> (Channel, std::net::TcpStream) {
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().unwrap();
        let channel = Channel {
            responder: Responder::for_test(stream, peer),
            peer,
            language: LanguageCode::JAVA,
            version: 401,
            last_update: Instant::now(),
            acl: None,
        };
        (channel, client)
    }

    /// One member per connection and group, as RocketMQ keys members by channel: a peer that
    /// names client ids by the thousand holds one member, the last it named.
    #[test]
    fn a_connection_holds_one_member_per_group() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let t = ClientTable::new(Duration::from_secs(120));
        let (ch, _c) = channel(&listener);
        let kind = ConsumerKind::default();
        assert!(t.register_consumer("g", "a", ch.clone(), &kind, vec![]));
        for i in 0..1000 {
            assert!(t.register_consumer("g", &format!("fake-{i}"), ch.clone(), &kind, vec![]), "a change");
        }
        assert!(!t.register_consumer("g", "fake-999", ch.clone(), &kind, vec![]), "the same member again");
        assert_eq!(t.consumer_ids("g"), ["fake-999"]);
        // Another connection is another member.
        let (other, _o) = channel(&listener);
        t.register_consumer("g", "b", other, &kind, vec![]);
        assert_eq!(t.consumer_ids("g"), ["b", "fake-999"]);
        for i in 0..100 {
            t.register_producer("p", &format!("p-{i}"), ch.clone());
        }
        let v = t.producer_connection("p").unwrap();
        assert_eq!(v["connectionSet"].as_array().unwrap().len(), 1);
    }

    /// A member whose connection closed, dropped by a lookup before the close is reported:
    /// its group is still told (by the next expiry round). Before, the lookup dropped it
    /// silently and the close found nothing left to report.
    #[test]
    fn a_member_dropped_before_its_close_is_reported_is_still_announced() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let t = ClientTable::new(Duration::from_secs(120));
        let kind = ConsumerKind::default();
        let (a, _ca) = channel(&listener);
        let (gone, _cg) = channel(&listener);
        let gone_peer = gone.peer;
        t.register_consumer("g", "a", a, &kind, vec![]);
        t.register_consumer("g", "gone", gone.clone(), &kind, vec![]);
        assert_eq!(t.expire().0, Vec::<String>::new());
        // Its connection is marked closed; a pull's lookup runs before the close handler.
        gone.responder.close_connection();
        assert!(matches!(t.subscription("g", "T"), SubscriptionLookup::NoTopic));
        assert_eq!(t.consumer_ids("g"), ["a"]);
        let at_close = t.connection_closed(gone_peer);
        let (expired, _) = t.expire();
        assert!(
            at_close == ["g"] || expired == ["g"],
            "the group was told neither at the close ({at_close:?}) nor by expiry ({expired:?})"
        );
    }

    fn sub(topic: &str, expr: &str, version: i64) -> Subscription {
        Subscription {
            topic: topic.into(),
            sub_string: expr.into(),
            sub_version: version,
            expression_type: "TAG".into(),
            filter: ConsumerFilter::Tag(TagFilter::parse(Some(expr))),
        }
    }

    fn topics(g: &ConsumerGroup) -> Vec<(&str, &str, i64)> {
        let mut t: Vec<_> = g
            .subscriptions
            .values()
            .map(|s| (s.topic.as_str(), s.sub_string.as_str(), s.sub_version))
            .collect();
        t.sort();
        t
    }

    /// As RocketMQ's `ConsumerGroupInfo.updateSubscription`: a heartbeat's set replaces the
    /// group's, and per topic the entry with the newer subVersion stays.
    #[test]
    fn a_heartbeat_replaces_the_groups_subscriptions() {
        let mut g = ConsumerGroup::default();
        assert_eq!(g.update_subscriptions("g", vec![sub("A", "*", 1), sub("B", "x", 1)], 10), (2, 0));
        assert_eq!(topics(&g), vec![("A", "*", 1), ("B", "x", 1)]);
        // The group moves from A to C: A is dropped.
        assert_eq!(g.update_subscriptions("g", vec![sub("B", "x", 1), sub("C", "*", 1)], 10), (1, 1));
        assert_eq!(topics(&g), vec![("B", "x", 1), ("C", "*", 1)]);
        // An older or equal subVersion keeps the group's entry; a newer one replaces it.
        // Neither adds or drops a topic.
        assert_eq!(g.update_subscriptions("g", vec![sub("B", "old", 0), sub("C", "same", 1)], 10), (0, 0));
        assert_eq!(topics(&g), vec![("B", "x", 1), ("C", "*", 1)]);
        assert_eq!(g.update_subscriptions("g", vec![sub("B", "y", 2), sub("C", "*", 1)], 10), (0, 0));
        assert_eq!(topics(&g), vec![("B", "y", 2), ("C", "*", 1)]);
        // The same topic twice in one heartbeat: the newer wins.
        g.update_subscriptions("g", vec![sub("B", "y", 2), sub("B", "z", 3), sub("B", "w", 1)], 10);
        assert_eq!(topics(&g), vec![("B", "z", 3)]);
        // A heartbeat with no subscription leaves none.
        assert_eq!(g.update_subscriptions("g", vec![], 10), (0, 1));
        assert!(g.subscriptions.is_empty());
    }

    /// One heartbeat naming 200k made-up topics keeps only the limit, the first in the
    /// heartbeat's order; the next heartbeat's replace them.
    #[test]
    fn a_group_has_at_most_the_limit_of_topics() {
        let mut g = ConsumerGroup::default();
        let many: Vec<Subscription> = (0..200_000).map(|i| sub(&format!("T{i}"), "*", 1)).collect();
        g.update_subscriptions("g", many.clone(), MAX_SUBSCRIPTIONS_PER_GROUP);
        assert_eq!(g.subscriptions.len(), MAX_SUBSCRIPTIONS_PER_GROUP);
        assert!(
            g.warned_too_many && g.subscriptions.contains_key("T0") && !g.subscriptions.contains_key("T4096")
        );
        // Each heartbeat is cut again, not added to the last.
        g.update_subscriptions("g", many[100_000..].to_vec(), MAX_SUBSCRIPTIONS_PER_GROUP);
        assert_eq!(g.subscriptions.len(), MAX_SUBSCRIPTIONS_PER_GROUP);
        assert!(g.subscriptions.contains_key("T100000") && !g.subscriptions.contains_key("T0"));
        g.update_subscriptions("g", vec![sub("T1", "*", 1)], MAX_SUBSCRIPTIONS_PER_GROUP);
        assert_eq!(topics(&g), vec![("T1", "*", 1)]);
        assert!(!g.warned_too_many, "warns again the next time");
    }

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
