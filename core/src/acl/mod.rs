//! RocketMQ 4.9's plain ACL on the remoting port (`aclEnable`, `plain_acl.yml`).
//!
//! **What is checked.** With `aclEnable=true` every request on the remoting port (and its
//! VIP port) passes [`AclGate`] before any processor sees it, as RocketMQ's
//! `PlainAccessValidator` RPC hook does:
//!
//! 1. a client whose address matches `globalWhiteRemoteAddresses` passes;
//! 2. otherwise the request needs an `AccessKey` ext field naming an account, and passes if
//!    the client's address matches that account's `whiteRemoteAddress`;
//! 3. otherwise its `Signature` ext field must be the HMAC-SHA1 of the request under the
//!    account's `secretKey` (see `sign`), compared in constant time;
//! 4. then the resources the request touches (per request code, as
//!    `PlainAccessResource.parse`: PUB on the topic of a send, SUB on the topic and the
//!    group's `%RETRY%` resource of a pull, SUB on every subscribed topic and group of a
//!    heartbeat, ...) must be granted by the account's `topicPerms` / `groupPerms`, or else
//!    by its `defaultTopicPerm` / `defaultGroupPerm`; DENY always refuses; admin-only codes
//!    (create/delete topic, create/delete subscription group, UPDATE_BROKER_CONFIG, and
//!    beyond 4.9 the ACL update requests, the account listing GET_BROKER_CLUSTER_ACL_CONFIG
//!    and RESUME_CHECK_HALF_MESSAGE) need `admin: true`.
//!    The last ones need an admin account also from a white-listed address (see
//!    `ACCOUNT_ADMIN_CODES`).
//!
//! **Operators' read requests** (GET_TOPIC_STATS_INFO, GET_CONSUME_STATS,
//! GET_CONSUMER_CONNECTION_LIST, QUERY_CONSUME_QUEUE, ...) name no resource in 4.9's
//! `PlainAccessResource.parse`, so they need an account that passes steps 1-3 and no topic
//! or group permission, here as there. QUERY_CONSUME_QUEUE shows where a topic's messages
//! lie in the CommitLog and their tags codes, not their bodies; GET_TOPIC_STATS_INFO shows
//! the same queue offsets.
//!
//! **END_TRANSACTION** (not checked by RocketMQ 4.9: any client that passes the gate can
//! commit or roll back anyone's transaction). Its header names no topic, so the gate lets it
//! through with the account it verified ([`AclIdentity`], in
//! [`RequestContext::acl`](crate::remoting::RequestContext::acl)), and the processor, once it
//! has found the half message, requires PUB on the transaction's real topic (the half
//! message's `REAL_TOPIC`) from that account, with the same rules the gate used; an address
//! white-listed globally or for the account passes, as at the gate. Its refusal is answered
//! as the gate's.
//!
//! **HEART_BEAT's producers.** A heartbeat's `producerDataSet` asks for nothing, as in 4.9:
//! in RocketMQ's model a group permission is SUB only (`groupPerms` guard consumer groups'
//! retry topics) and a producer group is no resource, so there is no permission to require
//! without inventing one. What registering a producer group gives: the broker may push the
//! group's CHECK_TRANSACTION_STATE to that connection, and that carries the half message,
//! body included; 4.9 pushes it to any connection of the group, so a client that passes the
//! gate could, by naming another producer group, be sent that group's undecided messages.
//! Here the heartbeat's verified account is kept with the connection, and a check-back goes
//! only to a connection whose account may publish to the half message's real topic (see
//! `ClientTable::producer_channel`). Consumer groups and subscribed topics need SUB, as in
//! 4.9.
//!
//! A refusal answers SYSTEM_ERROR, as RocketMQ's remoting layer answers the hook's
//! `AclException`, with the reason as the remark (`AclException: Check signature failed for
//! accessKey=...`); a secret key is never in a remark, a log line or an error.
//!
//! **Reloading.** A thread re-reads the file every second; a changed file is parsed and
//! replaces the rules; a file that no longer parses, is empty, or cannot be read leaves the rules as
//! they were, and says why in the log (RocketMQ's `AclFileWatchService` polls every 5 s).

mod addr;
mod admin;
mod rules;
mod sign;

pub use admin::{
    BrokerIdentity, DELETE_ACL_CONFIG_FAILED, UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
};

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};
use crate::store::flush::StopSignal;
use rules::{AclRules, PUB, SUB, check_permission};

pub use sign::{ACCESS_KEY, Credentials, SECURITY_TOKEN, SIGNATURE};

/// How often the watcher looks at the file.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// `TopicValidator.RMQ_SYS_TRACE_TOPIC`: PUB on it skips the permission checks (message trace).
const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// `Permission.ADMIN_CODE` of RocketMQ 4.9, RESUME_CHECK_HALF_MESSAGE (4.9 checks only its
/// signature: any account could have any transaction checked back again) and the requests that
/// change the ACL file or list its accounts (see `admin`).
const ADMIN_CODES: &[i32] = &[
    request_code::UPDATE_AND_CREATE_TOPIC,
    request_code::UPDATE_BROKER_CONFIG,
    request_code::DELETE_TOPIC_IN_BROKER,
    request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    request_code::DELETE_SUBSCRIPTIONGROUP,
    request_code::RESUME_CHECK_HALF_MESSAGE,
    // 4.9 lets any signed request change the ACL file, or read it secrets and all: here only
    // an admin may.
    request_code::UPDATE_AND_CREATE_ACL_CONFIG,
    request_code::DELETE_ACL_CONFIG,
    request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    request_code::GET_BROKER_CLUSTER_ACL_CONFIG,
];

/// Codes that need an admin account whoever asks, a white-listed address included (4.9 lets a
/// white-listed address send anything, unsigned): changing the ACL file (a white-listed host
/// could otherwise white-list everyone, or make any account admin), reading its accounts, and
/// resuming a transaction's checks. From a globally white-listed address they need an AccessKey too; an
/// account's own `whiteRemoteAddress` passes its AccessKey unsigned, as for any code.
const ACCOUNT_ADMIN_CODES: &[i32] = &[
    request_code::UPDATE_AND_CREATE_ACL_CONFIG,
    request_code::DELETE_ACL_CONFIG,
    request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    request_code::GET_BROKER_CLUSTER_ACL_CONFIG,
    request_code::RESUME_CHECK_HALF_MESSAGE,
];

/// How many changed versions of the ACL file were taken, and how many were refused (the
/// rules before them kept), since the start.
#[derive(Debug, Default)]
pub struct AclReloads {
    pub reloaded: AtomicU64,
    pub rejected: AtomicU64,
}

/// The rules of one ACL file, and what the watcher last read from it.
struct AclState {
    path: PathBuf,
    rules: RwLock<Arc<AclRules>>,
    reloads: Arc<AclReloads>,
    /// The file's bytes as last read (`None`: unreadable then), so a reload happens once per
    /// change and a broken version is reported once.
    last: Mutex<Option<Vec<u8>>>,
    /// Held by an admin request's change of the file (see `admin`), one at a time.
    edit_lock: Mutex<()>,
}

impl AclState {
    fn load(path: &Path) -> Result<AclState, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("ACL file {}: {e}", path.display()))?;
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| format!("ACL file {}: not UTF-8 text", path.display()))?;
        let rules = AclRules::parse(&text).map_err(|e| format!("ACL file {}: {e}", path.display()))?;
        tracing::info!(
            "ACL: {} loaded: {} account(s), {} global white-list pattern(s)",
            path.display(),
            rules.accounts.len(),
            rules.global_white.len()
        );
        Ok(AclState {
            path: path.to_path_buf(),
            rules: RwLock::new(Arc::new(rules)),
            reloads: Arc::default(),
            last: Mutex::new(Some(bytes)),
            edit_lock: Mutex::new(()),
        })
    }

    /// Re-reads the file; a changed version that parses replaces the rules. Returns whether
    /// the rules were replaced.
    fn reload_if_changed(&self) -> bool {
        // Read under the lock: the watcher and an admin request's change both reload, and a
        // version read before the other's reload must not be taken after it.
        let mut last = self.last.lock();
        let read = std::fs::read(&self.path);
        match read {
            Err(e) => {
                if last.take().is_some() {
                    self.reloads.rejected.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "ACL: cannot read {} ({e}); keeping the rules loaded before",
                        self.path.display()
                    );
                }
                false
            }
            Ok(bytes) => {
                if last.as_deref() == Some(&bytes[..]) {
                    return false;
                }
                *last = Some(bytes.clone());
                // An empty version is refused, as 4.9 ("No data in file"): it is what a file
                // rewritten in place reads as midway, and taking it would refuse every client.
                let parsed =
                    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string()).and_then(|t| {
                        if rules::is_empty_document(&t) {
                            Err("the file is empty".to_string())
                        } else {
                            AclRules::parse(&t)
                        }
                    });
                match parsed {
                    Ok(rules) => {
                        tracing::info!(
                            "ACL: {} changed and was reloaded: {} account(s), {} global white-list pattern(s)",
                            self.path.display(),
                            rules.accounts.len(),
                            rules.global_white.len()
                        );
                        *self.rules.write() = Arc::new(rules);
                        self.reloads.reloaded.fetch_add(1, Ordering::Relaxed);
                        true
                    }
                    Err(e) => {
                        tracing::error!(
                            "ACL: {} changed but cannot be used ({e}); keeping the rules loaded before",
                            self.path.display()
                        );
                        self.reloads.rejected.fetch_add(1, Ordering::Relaxed);
                        false
                    }
                }
            }
        }
    }
}

/// A [`RequestHandler`] that checks each request against the ACL file and hands the
/// requests that pass to the next handler.
pub struct AclGate {
    state: Arc<AclState>,
    /// Where requests that pass go (REQUEST_CODE_NOT_SUPPORTED until set).
    next: Option<Arc<dyn RequestHandler>>,
    /// This broker, for GET_BROKER_CLUSTER_ACL_INFO.
    ident: admin::BrokerIdentity,
}

impl AclGate {
    /// Loads `path` (an error names the file, the entry and what is wrong). Give it the
    /// handler behind it with [`with_next`](Self::with_next), and reload it with
    /// [`watch`](Self::watch).
    pub fn load(path: &Path) -> crate::error::Result<AclGate> {
        let state = Arc::new(AclState::load(path).map_err(crate::error::Error::InvalidArgument)?);
        Ok(AclGate { state, next: None, ident: admin::BrokerIdentity::default() })
    }

    /// Starts the thread that reloads the file when it changes, until `stop` (the owner
    /// joins it). It holds the rules weakly: once the gate is gone it ends too.
    pub(crate) fn watch(&self, stop: Arc<StopSignal>) -> crate::error::Result<JoinHandle<()>> {
        let weak = Arc::downgrade(&self.state);
        std::thread::Builder::new()
            .name("rmqha-acl-watch".into())
            .spawn(move || {
                while stop.sleep(WATCH_INTERVAL) {
                    let Some(state) = weak.upgrade() else { return };
                    state.reload_if_changed();
                }
            })
            .map_err(|e| crate::error::Error::Store(format!("cannot start thread rmqha-acl-watch: {e}")))
    }

    /// The counts of reloads, shared with the watcher.
    pub fn reloads(&self) -> Arc<AclReloads> {
        self.state.reloads.clone()
    }

    /// The gate in front of `next`.
    pub fn with_next(mut self, next: Arc<dyn RequestHandler>) -> Self {
        self.next = Some(next);
        self
    }

    /// Who this broker is, as GET_BROKER_CLUSTER_ACL_INFO answers it.
    pub fn with_identity(mut self, ident: BrokerIdentity) -> Self {
        self.ident = ident;
        self
    }

    /// Checks `request` from `peer`: `Err` holds the reason of a refusal.
    pub fn check(&self, request: &RemotingCommand, peer: IpAddr) -> Result<(), String> {
        self.verify(request, peer).map(drop)
    }

    /// Checks `request` from `peer`, and says who passed: `Err` holds the reason of a refusal.
    pub fn verify(&self, request: &RemotingCommand, peer: IpAddr) -> Result<AclIdentity, String> {
        let rules = self.state.rules.read().clone();
        check(&rules, request, peer)
    }
}

impl std::fmt::Debug for AclGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclGate").field("path", &self.state.path).finish()
    }
}

impl RequestHandler for AclGate {
    fn connection_closed(&self, peer: std::net::SocketAddr) {
        if let Some(next) = &self.next {
            next.connection_closed(peer);
        }
    }

    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        match self.verify(&request, ctx.peer().ip()) {
            // The requests that read or change the ACL file itself.
            Ok(_) if admin::CODES.contains(&request.code) => {
                Handled::Respond(admin::handle(&self.state, &self.ident, &request))
            }
            Ok(identity) => match &self.next {
                Some(next) => next.handle(request, &ctx.with_acl(Arc::new(identity))),
                None => Handled::Respond(RemotingCommand::not_supported(&request)),
            },
            Err(reason) => {
                tracing::debug!(peer = %ctx.peer(), code = request.code, "ACL refused a request: {reason}");
                if request.is_oneway() {
                    Handled::NoResponse
                } else {
                    let remark = format!("AclException: {reason}");
                    Handled::Respond(RemotingCommand::response_to(
                        &request,
                        response_code::SYSTEM_ERROR,
                        Some(&remark),
                    ))
                }
            }
        }
    }
}

/// Who a request that passed the [`AclGate`] comes from, handed to the processors in
/// [`RequestContext::acl`]: for the checks that need what only a processor reads (the real
/// topic of END_TRANSACTION's half message).
#[derive(Debug, Clone)]
pub struct AclIdentity(Identity);

#[derive(Debug, Clone)]
enum Identity {
    /// A globally white-listed address, or an account's white-listed address (unsigned):
    /// passes every check, as at the gate.
    White { access_key: Option<String> },
    /// An account whose signature was verified, with the rules the gate checked it against.
    Account { access_key: String, rules: Arc<AclRules> },
}

impl AclIdentity {
    /// The account's access key (`None` for a globally white-listed address).
    pub fn access_key(&self) -> Option<&str> {
        match &self.0 {
            Identity::White { access_key } => access_key.as_deref(),
            Identity::Account { access_key, .. } => Some(access_key),
        }
    }

    /// Whether it may publish to `topic` (PUB, as a send needs): `Err` is the refusal's
    /// reason, naming the account and the topic.
    pub fn check_publish(&self, topic: &str) -> Result<(), String> {
        self.check_topic(topic, PUB, "PUB")
    }

    /// Whether it may read `topic` (SUB, as a pull needs): `Err` is the refusal's reason,
    /// naming the account and the topic.
    pub fn check_subscribe(&self, topic: &str) -> Result<(), String> {
        self.check_topic(topic, SUB, "SUB")
    }

    fn check_topic(&self, topic: &str, perm: u8, name: &str) -> Result<(), String> {
        let Identity::Account { access_key, rules } = &self.0 else { return Ok(()) };
        let Some(account) = rules.accounts.get(access_key) else {
            return Err(format!("No acl config for {access_key}"));
        };
        if account.perms.is_empty() && account.admin {
            return Ok(());
        }
        permits(account, topic, perm)
            .map_err(|_| format!("No {name} permission for topic:{topic}, accessKey={access_key}"))
    }
}

/// Whether `account` holds `perm` on `resource` (a topic, or a group as its retry topic).
fn permits(account: &rules::Account, resource: &str, perm: u8) -> Result<(), String> {
    let group = resource.strip_prefix(crate::processor::RETRY_GROUP_TOPIC_PREFIX);
    // RocketMQ 4.9: a resource the account lists is decided by its entry alone; the default
    // covers the others.
    let owned = match account.perms.get(resource) {
        Some(&owned) => owned,
        None if group.is_some() => account.default_group_perm,
        None => account.default_topic_perm,
    };
    if check_permission(perm, owned) {
        return Ok(());
    }
    Err(match group {
        Some(g) => format!("No default permission for group:{g}"),
        None => format!("No default permission for topic:{resource}"),
    })
}

/// `PlainPermissionManager.validate` with `PlainPermissionChecker.check`.
fn check(rules: &Arc<AclRules>, request: &RemotingCommand, peer: IpAddr) -> Result<AclIdentity, String> {
    let account_admin = ACCOUNT_ADMIN_CODES.contains(&request.code);
    if !account_admin && rules.global_white.iter().any(|p| p.matches(peer)) {
        return Ok(AclIdentity(Identity::White { access_key: None }));
    }
    let Some(access_key) = request.ext(ACCESS_KEY) else {
        return Err(if account_admin {
            format!(
                "Need admin permission for request code={}: an admin account's accessKey is required",
                request.code
            )
        } else {
            "No accessKey is configured".into()
        });
    };
    let Some(account) = rules.accounts.get(access_key) else {
        return Err(format!("No acl config for {access_key}"));
    };
    if account_admin && !account.admin {
        return Err(format!(
            "Need admin permission for request code={}, but accessKey={access_key} is not",
            request.code
        ));
    }
    if account.white.matches(peer) {
        return Ok(AclIdentity(Identity::White { access_key: Some(access_key.to_string()) }));
    }
    let verified =
        AclIdentity(Identity::Account { access_key: access_key.to_string(), rules: rules.clone() });
    let expected = sign::signature(request, account.secret_key.expose());
    let given = request.ext(SIGNATURE).unwrap_or("");
    if !sign::constant_time_eq(expected.as_bytes(), given.as_bytes()) {
        return Err(format!("Check signature failed for accessKey={access_key}"));
    }
    let mut needed = resources(request)?;
    // Publishing to the trace topic needs no permission (4.9 skips the check of a request
    // that publishes there). Only that resource: 4.9 returns at once, and a request naming
    // the trace topic besides a group (CONSUMER_SEND_MSG_BACK's `originTopic`) went through
    // unchecked for the group.
    if needed.get(TRACE_TOPIC) == Some(&PUB) {
        needed.remove(TRACE_TOPIC);
    }
    if ADMIN_CODES.contains(&request.code) && !account.admin {
        return Err(format!(
            "Need admin permission for request code={}, but accessKey={access_key} is not",
            request.code
        ));
    }
    if account.perms.is_empty() && account.admin {
        return Ok(verified);
    }
    for (resource, &perm) in &needed {
        permits(account, resource, perm)?;
    }
    Ok(verified)
}

/// The retry topic that stands for `group` in the rules (`MixAll.getRetryTopic`).
fn retry(group: &str) -> String {
    format!("{}{group}", crate::processor::RETRY_GROUP_TOPIC_PREFIX)
}

/// `PlainAccessResource.parse`: the resources a request touches and the permission each
/// needs. Beyond RocketMQ 4.9, SEND_BATCH_MESSAGE is checked as SEND_MESSAGE_V2 (its header)
/// and LITE_PULL_MESSAGE as PULL_MESSAGE; 4.9 checks neither.
fn resources(req: &RemotingCommand) -> Result<HashMap<String, u8>, String> {
    let mut needed = HashMap::new();
    let mut add = |resource: Option<String>, perm: u8| {
        if let Some(r) = resource {
            needed.insert(r, perm);
        }
    };
    let ext = |k: &str| req.ext(k).map(str::to_string);
    match req.code {
        // The topic as the send processor reads it (by the code's field names). A send to a
        // group's retry topic needs SUB on that group: the retry topic written to stands for
        // it. (4.9 checks the group the header names instead, `a` or `group`, which a client
        // chooses freely, so that SUB on one's own group let one write into any group's
        // retry topic.)
        request_code::SEND_MESSAGE | request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE => {
            match crate::processor::send::SendHeader::topic_of(req) {
                Some(t) if t.starts_with(crate::processor::RETRY_GROUP_TOPIC_PREFIX) => {
                    add(Some(t.to_string()), SUB)
                }
                Some(t) => add(Some(t.to_string()), PUB),
                None => return Err("the send request names no topic".to_string()),
            }
        }
        request_code::CONSUMER_SEND_MSG_BACK => {
            add(ext("group").map(|g| retry(&g)), SUB);
            add(ext("originTopic"), PUB);
        }
        request_code::PULL_MESSAGE | request_code::LITE_PULL_MESSAGE => {
            add(ext("topic"), SUB);
            add(ext("consumerGroup").map(|g| retry(&g)), SUB);
        }
        request_code::QUERY_MESSAGE => add(ext("topic"), SUB),
        request_code::HEART_BEAT => {
            let data: Value = std::str::from_utf8(&req.body)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    crate::metadata::json::from_str_lenient(t, "heartbeat body").map_err(|e| e.to_string())
                })
                .map_err(|e| format!("heartbeat body is not HeartbeatData JSON: {e}"))?;
            for c in data.get("consumerDataSet").and_then(Value::as_array).into_iter().flatten() {
                add(c.get("groupName").and_then(Value::as_str).map(retry), SUB);
                for s in c.get("subscriptionDataSet").and_then(Value::as_array).into_iter().flatten() {
                    add(s.get("topic").and_then(Value::as_str).map(str::to_string), SUB);
                }
            }
        }
        // Not checked by 4.9 (signature only); locking a group's queues (or unlocking them)
        // acts for the group on the topics: without a check, an account denied a group could
        // keep its queues locked under a made-up client id and stall its orderly consumers.
        request_code::LOCK_BATCH_MQ | request_code::UNLOCK_BATCH_MQ => {
            let data: Value = std::str::from_utf8(&req.body)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    crate::metadata::json::from_str_lenient(t, "lock request body").map_err(|e| e.to_string())
                })
                .map_err(|e| format!("lock request body is not LockBatchRequestBody JSON: {e}"))?;
            let Some(group) = data.get("consumerGroup").and_then(Value::as_str) else {
                return Err("the lock request names no consumerGroup".to_string());
            };
            add(Some(retry(group)), SUB);
            for mq in data.get("mqSet").and_then(Value::as_array).into_iter().flatten() {
                add(mq.get("topic").and_then(Value::as_str).map(str::to_string), SUB);
            }
        }
        request_code::UNREGISTER_CLIENT | request_code::GET_CONSUMER_LIST_BY_GROUP => {
            add(ext("consumerGroup").map(|g| retry(&g)), SUB);
        }
        // Not checked by 4.9 (signature only); they act for a group, reading a member's state
        // or making it consume a message, so they need what acting for the group needs.
        request_code::GET_CONSUMER_RUNNING_INFO | request_code::CONSUME_MESSAGE_DIRECTLY => {
            add(ext("consumerGroup").map(|g| retry(&g)), SUB);
        }
        // Not checked by 4.9 (signature only); it asks a group's members what they hold of a
        // topic, so it needs what reading the group's progress on the topic needs.
        request_code::INVOKE_BROKER_TO_GET_CONSUMER_STATUS => {
            add(ext("group").map(|g| retry(&g)), SUB);
            add(ext("topic"), SUB);
        }
        request_code::UPDATE_CONSUMER_OFFSET => {
            add(ext("consumerGroup").map(|g| retry(&g)), SUB);
            add(ext("topic"), SUB);
        }
        // Not checked by 4.9 (signature only); it moves a group's offsets as
        // UPDATE_CONSUMER_OFFSET does, so it needs what that needs.
        request_code::INVOKE_BROKER_TO_RESET_OFFSET => {
            add(ext("group").map(|g| retry(&g)), SUB);
            add(ext("topic"), SUB);
        }
        // Not checked by 4.9 (signature only); it reads one group's offsets and moves
        // another's, so it needs what acting for both groups (and the topic) needs.
        request_code::CLONE_GROUP_OFFSET => {
            add(ext("srcGroup").map(|g| retry(&g)), SUB);
            add(ext("destGroup").map(|g| retry(&g)), SUB);
            add(ext("topic"), SUB);
        }
        _ => {}
    }
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate's check, without who passed.
    fn check(r: &Arc<AclRules>, req: &RemotingCommand, peer: IpAddr) -> Result<(), String> {
        super::check(r, req, peer).map(drop)
    }

    fn rules() -> Arc<AclRules> {
        Arc::new(AclRules::parse(
            "accounts:\n  - accessKey: producer1\n    secretKey: secret123\n    defaultTopicPerm: DENY\n    \
             defaultGroupPerm: SUB\n    topicPerms:\n      - t1=PUB\n      - t2=SUB\n    groupPerms:\n      - g2=DENY\n",
        )
        .unwrap())
    }

    fn signed(mut req: RemotingCommand) -> RemotingCommand {
        Credentials::new("producer1", crate::config::Secret::new("secret123")).sign(&mut req);
        req
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn who_passed_the_gate_may_publish_what_its_account_may() {
        let r = rules();
        let end =
            || signed(RemotingCommand::request(request_code::END_TRANSACTION).with_ext("producerGroup", "p"));
        let id = super::check(&r, &end(), PEER).unwrap();
        assert_eq!(id.access_key(), Some("producer1"));
        assert_eq!(id.check_publish("t1"), Ok(()));
        assert_eq!(
            id.check_publish("t2").unwrap_err(),
            "No PUB permission for topic:t2, accessKey=producer1"
        );
        assert!(id.check_publish("other").is_err(), "the default (DENY) covers unlisted topics");
        assert_eq!(id.check_subscribe("t2"), Ok(()));
        assert_eq!(
            id.check_subscribe("t1").unwrap_err(),
            "No SUB permission for topic:t1, accessKey=producer1"
        );
        // A globally white-listed address passes, as at the gate.
        let white = Arc::new(AclRules::parse("globalWhiteRemoteAddresses:\n  - 127.0.0.1\n").unwrap());
        let unsigned = RemotingCommand::request(request_code::END_TRANSACTION);
        let id = super::check(&white, &unsigned, PEER).unwrap();
        assert_eq!((id.access_key(), id.check_publish("t2")), (None, Ok(())));
    }

    #[test]
    fn an_emptied_file_keeps_the_rules() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        let text =
            "accounts:\n  - accessKey: producer1\n    secretKey: secret123\n    defaultTopicPerm: PUB\n";
        std::fs::write(&path, text).unwrap();
        let state = AclState::load(&path).unwrap();
        // Truncated by a rewrite in place, before the new text is written.
        for midway in ["", "# plain_acl.yml\n"] {
            std::fs::write(&path, midway).unwrap();
            assert!(!state.reload_if_changed(), "{midway:?} replaced the rules");
            assert!(state.rules.read().accounts.contains_key("producer1"), "{midway:?} dropped the accounts");
        }
        std::fs::write(&path, text.replace("PUB", "SUB")).unwrap();
        assert!(state.reload_if_changed());
        assert_eq!(state.reloads.rejected.load(Ordering::Relaxed), 2);
    }

    /// The operators' read requests need a verified account, no permission on what they name
    /// (the account's default topic permission is DENY).
    #[test]
    fn operators_reads_need_an_account_only() {
        let r = rules();
        for code in [
            request_code::GET_TOPIC_STATS_INFO,
            request_code::GET_CONSUME_STATS,
            request_code::QUERY_CONSUME_QUEUE,
        ] {
            let req = || {
                RemotingCommand::request(code)
                    .with_ext("topic", "other")
                    .with_ext("consumerGroup", "g2")
                    .with_ext("queueId", "0")
            };
            assert_eq!(check(&r, &signed(req()), PEER), Ok(()), "code {code}");
            assert_eq!(check(&r, &req(), PEER).unwrap_err(), "No accessKey is configured", "code {code}");
        }
    }

    #[test]
    fn resources_per_code() {
        let r = rules();
        let send = |t: &str| {
            RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_ext("a", "g").with_ext("b", t)
        };
        assert_eq!(check(&r, &signed(send("t1")), PEER), Ok(()));
        assert_eq!(check(&r, &signed(send("t2")), PEER).unwrap_err(), "No default permission for topic:t2");
        // A retry-topic send needs SUB on the group.
        assert_eq!(check(&r, &signed(send("%RETRY%g")), PEER), Ok(()));
        let pull = |t: &str, g: &str| {
            RemotingCommand::request(request_code::PULL_MESSAGE)
                .with_ext("topic", t)
                .with_ext("consumerGroup", g)
        };
        assert_eq!(check(&r, &signed(pull("t2", "g1")), PEER), Ok(()));
        assert_eq!(
            check(&r, &signed(pull("t2", "g2")), PEER).unwrap_err(),
            "No default permission for group:g2"
        );
        let hb = RemotingCommand::request(request_code::HEART_BEAT).with_body(
            br#"{"clientID":"c","consumerDataSet":[{"groupName":"g1","subscriptionDataSet":[{"topic":"t1"}]}]}"#
                .to_vec(),
        );
        assert_eq!(check(&r, &signed(hb), PEER).unwrap_err(), "No default permission for topic:t1");
        // SEND_MESSAGE (10) names no group: writing to a retry topic needs SUB on its group.
        let send10 = |t: &str| {
            RemotingCommand::request(request_code::SEND_MESSAGE)
                .with_ext("producerGroup", "p")
                .with_ext("topic", t)
        };
        assert_eq!(
            check(&r, &signed(send10("%RETRY%g2")), PEER).unwrap_err(),
            "No default permission for group:g2"
        );
        assert_eq!(check(&r, &signed(send10("%RETRY%g1")), PEER), Ok(()));
        let trace = send(TRACE_TOPIC);
        assert_eq!(check(&r, &signed(trace), PEER), Ok(()));
        // The trace topic frees only itself from the check: a message handed back for a
        // group the account may not act for, naming the trace topic as its origin, is
        // refused for the group.
        let back = |g: &str| {
            RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK)
                .with_ext("group", g)
                .with_ext("originTopic", TRACE_TOPIC)
                .with_ext("offset", "0")
        };
        assert_eq!(check(&r, &signed(back("g1")), PEER), Ok(()));
        assert_eq!(check(&r, &signed(back("g2")), PEER).unwrap_err(), "No default permission for group:g2");
        // The topic is read by the code's names, as the send processor reads it: the other
        // spelling names no topic, and a header with both is checked for the one written to.
        let v1_names_as_v2 = RemotingCommand::request(request_code::SEND_MESSAGE_V2)
            .with_ext("producerGroup", "p")
            .with_ext("topic", "t2");
        assert_eq!(check(&r, &signed(v1_names_as_v2), PEER).unwrap_err(), "the send request names no topic");
        let v2_names_as_v1 =
            RemotingCommand::request(request_code::SEND_MESSAGE).with_ext("a", "p").with_ext("b", "t2");
        assert_eq!(check(&r, &signed(v2_names_as_v1), PEER).unwrap_err(), "the send request names no topic");
        let both = send("t1").with_ext("topic", "t2");
        assert_eq!(check(&r, &signed(both), PEER), Ok(()), "310 writes to b");
        let mut both_batch = send("t1").with_ext("topic", "t2");
        both_batch.code = request_code::SEND_BATCH_MESSAGE;
        assert_eq!(
            check(&r, &signed(both_batch), PEER).unwrap_err(),
            "No default permission for topic:t2",
            "320 with both spellings writes to topic"
        );
        // Locking (or unlocking) a group's queues needs SUB on the group and the topics.
        for code in [request_code::LOCK_BATCH_MQ, request_code::UNLOCK_BATCH_MQ] {
            let lock = |g: &str, t: &str| {
                RemotingCommand::request(code).with_body(
                    format!(
                        r#"{{"consumerGroup":"{g}","clientId":"c","mqSet":[{{"topic":"{t}","brokerName":"b","queueId":0}}]}}"#
                    )
                    .into_bytes(),
                )
            };
            assert_eq!(check(&r, &signed(lock("g1", "t2")), PEER), Ok(()), "code {code}");
            assert_eq!(
                check(&r, &signed(lock("g2", "t2")), PEER).unwrap_err(),
                "No default permission for group:g2"
            );
            assert!(check(&r, &signed(lock("g1", "t3")), PEER).is_err(), "t3: DENY by default");
            let nameless =
                RemotingCommand::request(code).with_body(br#"{"clientId":"c","mqSet":[]}"#.to_vec());
            assert_eq!(
                check(&r, &signed(nameless), PEER).unwrap_err(),
                "the lock request names no consumerGroup"
            );
        }
        // A send into another group's retry topic needs SUB on that group, whatever group
        // the header names.
        let into_retry = RemotingCommand::request(request_code::SEND_MESSAGE_V2)
            .with_ext("a", "g1")
            .with_ext("b", "%RETRY%g2");
        assert_eq!(check(&r, &signed(into_retry), PEER).unwrap_err(), "No default permission for group:g2");
        // Asking a group's consumer (its running state, to consume a message) needs SUB on
        // the group.
        for code in [request_code::GET_CONSUMER_RUNNING_INFO, request_code::CONSUME_MESSAGE_DIRECTLY] {
            let ask = |g: &str| {
                RemotingCommand::request(code).with_ext("consumerGroup", g).with_ext("clientId", "c")
            };
            assert_eq!(check(&r, &signed(ask("g1")), PEER), Ok(()));
            assert_eq!(
                check(&r, &signed(ask("g2")), PEER).unwrap_err(),
                "No default permission for group:g2",
                "code {code}"
            );
        }
        // Asking a group's members what they hold of a topic needs SUB on both.
        let status = |g: &str, t: &str| {
            RemotingCommand::request(request_code::INVOKE_BROKER_TO_GET_CONSUMER_STATUS)
                .with_ext("group", g)
                .with_ext("topic", t)
        };
        assert_eq!(check(&r, &signed(status("g1", "t2")), PEER), Ok(()));
        assert_eq!(
            check(&r, &signed(status("g2", "t2")), PEER).unwrap_err(),
            "No default permission for group:g2"
        );
        // Cloning offsets acts for both groups, on the topic when one is named.
        let clone = |src: &str, dest: &str, topic: Option<&str>| {
            let mut r = RemotingCommand::request(request_code::CLONE_GROUP_OFFSET)
                .with_ext("srcGroup", src)
                .with_ext("destGroup", dest);
            if let Some(t) = topic {
                r = r.with_ext("topic", t);
            }
            r
        };
        assert_eq!(check(&r, &signed(clone("g1", "g3", Some("t2"))), PEER), Ok(()));
        assert_eq!(check(&r, &signed(clone("g1", "g3", None)), PEER), Ok(()));
        for (src, dest) in [("g2", "g1"), ("g1", "g2")] {
            assert_eq!(
                check(&r, &signed(clone(src, dest, None)), PEER).unwrap_err(),
                "No default permission for group:g2"
            );
        }
        assert!(check(&r, &signed(clone("g1", "g3", Some("t3"))), PEER).is_err(), "t3: DENY by default");
    }
}
