//! RocketMQ 4.9's plain ACL on the remoting port (`aclEnable`, `plain_acl.yml`): unsigned
//! and wrongly signed requests are refused, signed ones get what their account's topic and
//! group permissions grant, admin-only codes need an admin, white-listed addresses pass
//! unsigned, a changed file is reloaded and a broken one leaves the rules as they were, and
//! a slave signs its config sync to a master with ACL.
//!
//! Requests are signed here by an implementation of RocketMQ's `AclClientRPCHook` written
//! from the Java source (`AclUtils.combineRequestContent`, `AclSigner.calSignature`), not by
//! the broker's own signing code, so a mistake shared by both cannot pass unseen.

mod common;
mod remote_common;

use std::path::Path;
use std::sync::Arc;

use hmac::{Hmac, KeyInit, Mac};
use rmqha_core::Broker;
use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code};

use remote_common::*;

/// `java.util.Base64`-compatible (standard alphabet, padded) encoding, as commons-codec's
/// `Base64.encodeBase64` writes it.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `AclClientRPCHook.doBeforeRequest`: add AccessKey, then sign the values of every ext field
/// but Signature in the order of a Java `TreeMap<String, String>` (UTF-16 code units),
/// followed by the body, with HmacSHA1 keyed by the secret key's UTF-8 bytes.
fn sign(mut req: RemotingCommand, access_key: &str, secret_key: &str) -> RemotingCommand {
    req.set_ext("AccessKey", access_key);
    let mut keys: Vec<&String> = req.ext_fields.keys().filter(|k| k.as_str() != "Signature").collect();
    keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    let mut content = Vec::new();
    for k in keys {
        content.extend_from_slice(req.ext_fields[k].as_bytes());
    }
    content.extend_from_slice(&req.body);
    let mut mac = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(secret_key.as_bytes()).unwrap();
    mac.update(&content);
    let signature = base64(&mac.finalize().into_bytes());
    req.set_ext("Signature", signature);
    req
}

const PRODUCER: (&str, &str) = ("producerAK", "producer-secret-1");
const ADMIN: (&str, &str) = ("adminAK01", "admin-secret-1");
const OTHER: (&str, &str) = ("otherAK01", "other-secret-1");

/// Accounts of the tests: a producer with PUB|SUB on T, DENY on Denied, nothing else by
/// default but SUB on groups; an admin with no resource lists (everything); another account
/// with PUB on Other only.
const RULES: &str = "\
accounts:
  - accessKey: producerAK
    secretKey: producer-secret-1
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - T=PUB|SUB
      - Denied=DENY
    groupPerms:
      - blocked_cg=DENY
  - accessKey: adminAK01
    secretKey: admin-secret-1
    admin: true
  - accessKey: otherAK01
    secretKey: other-secret-1
    defaultTopicPerm: DENY
    topicPerms:
      - Other=PUB
";

fn acl_master(dir: &Path, rules: &str) -> (Arc<Broker>, std::path::PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("plain_acl.yml");
    std::fs::write(&file, rules).unwrap();
    let path = file.to_str().unwrap().to_string();
    let b = Broker::start_master(common::broker_config(
        &dir.join("store"),
        "ASYNC_MASTER",
        &[("aclEnable", "true"), ("aclFilePath", &path)],
    ))
    .unwrap();
    b.create_topic("T", 1).unwrap();
    b.create_topic("Denied", 1).unwrap();
    (b, file)
}

fn refused(resp: &RemotingCommand, why: &str) {
    assert_eq!(resp.code, code::SYSTEM_ERROR, "{resp:?}");
    let remark = resp.remark.as_deref().unwrap_or("");
    assert!(remark.contains(why), "remark {remark:?} should say {why:?}");
    for (_, secret) in [PRODUCER, ADMIN, OTHER] {
        assert!(!remark.contains(secret), "the remark repeats a secret: {remark}");
    }
}

fn create_topic_req(topic: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", 1)
        .with_ext("writeQueueNums", 1)
        .with_ext("perm", 6)
        .with_ext("topicFilterType", "SINGLE_TAG")
        .with_ext("topicSysFlag", 0)
        .with_ext("order", false)
}

fn signed_pull(c: &RemotingClient, group: &str, topic: &str) -> RemotingCommand {
    let req = pull_req(group, topic, 0, 0, 32, FLAG_SUBSCRIPTION, 0, "*");
    call(c, sign(req, PRODUCER.0, PRODUCER.1))
}

#[test]
fn signature_and_permissions_decide_each_request() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _) = acl_master(dir.path(), RULES);
    let c = client(b.remoting_addrs()[0]);

    // Unsigned: no access key.
    refused(&call(&c, send_v2(&Msg::new("T", b"x"))), "No accessKey is configured");
    // An unknown access key.
    refused(
        &call(&c, sign(send_v2(&Msg::new("T", b"x")), "nobody00", "whatever1")),
        "No acl config for nobody00",
    );
    // The right access key with a wrong secret.
    refused(
        &call(&c, sign(send_v2(&Msg::new("T", b"x")), PRODUCER.0, "producer-secret-2")),
        "Check signature failed for accessKey=producerAK",
    );
    // The Signature field missing altogether.
    let mut no_sig = sign(send_v2(&Msg::new("T", b"x")), PRODUCER.0, PRODUCER.1);
    no_sig.ext_fields.remove("Signature");
    refused(&call(&c, no_sig), "Check signature failed");

    // Signed with PUB on T: stored (both header formats, V1 and V2), and pulled back with SUB.
    let r = call(&c, sign(send_v2(&Msg::new("T", b"one")), PRODUCER.0, PRODUCER.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let r = call(&c, rocketmq_header(sign(send_v1(&Msg::new("T", b"two")), PRODUCER.0, PRODUCER.1)));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    // Answered once stored; pulled once dispatched.
    assert!(b.store().wait_dispatched(TIMEOUT));
    let p = signed_pull(&c, "test_cg", "T");
    assert_eq!(p.code, code::SUCCESS, "{p:?}");
    let bodies: Vec<Vec<u8>> = decode_records(&p.body).into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![b"one".to_vec(), b"two".to_vec()]);
    // A pull without a signature is refused too.
    refused(&call(&c, pull_req("test_cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "*")), "No accessKey");
    // A group the account is denied.
    refused(&signed_pull(&c, "blocked_cg", "T"), "No default permission for group:blocked_cg");

    // DENY on a topic, and a topic only the default (DENY) covers.
    refused(
        &call(&c, sign(send_v2(&Msg::new("Denied", b"x")), PRODUCER.0, PRODUCER.1)),
        "No default permission for topic:Denied",
    );
    refused(&signed_pull(&c, "test_cg", "Denied"), "No default permission for topic:Denied");
    refused(
        &call(&c, sign(send_batch("Other", 0, &[Msg::new("Other", b"x")]), PRODUCER.0, PRODUCER.1)),
        "No default permission for topic:Other",
    );
    // A consumer's heartbeat subscribing to a denied topic.
    refused(
        &call(
            &c,
            sign(heartbeat("c1", "test_cg", &[("T", "*", 1), ("Denied", "*", 1)]), PRODUCER.0, PRODUCER.1),
        ),
        "No default permission for topic:Denied",
    );
    let r = call(&c, sign(heartbeat("c1", "test_cg", &[("T", "*", 1)]), PRODUCER.0, PRODUCER.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");

    // Tampering after signing: the body, or a header field.
    let mut tampered = sign(send_v2(&Msg::new("T", b"pay 10")), PRODUCER.0, PRODUCER.1);
    tampered.body = b"pay 99".to_vec();
    refused(&call(&c, tampered), "Check signature failed");
    let mut tampered = sign(send_v2(&Msg::new("T", b"x")), PRODUCER.0, PRODUCER.1);
    tampered.set_ext("e", 3);
    refused(&call(&c, tampered), "Check signature failed");

    // Admin-only codes: refused to the producer, allowed to the admin.
    refused(
        &call(&c, sign(create_topic_req("New"), PRODUCER.0, PRODUCER.1)),
        "Need admin permission for request code=17, but accessKey=producerAK is not",
    );
    assert!(b.topic_config("New").is_none());
    let r = call(&c, sign(create_topic_req("New"), ADMIN.0, ADMIN.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(b.topic_config("New").is_some());
    let del = RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER).with_ext("topic", "New");
    refused(&call(&c, sign(del.clone(), PRODUCER.0, PRODUCER.1)), "Need admin permission");
    refused(&call(&c, del.clone()), "No accessKey");
    assert_eq!(call(&c, sign(del, ADMIN.0, ADMIN.1)).code, code::SUCCESS);
    // Having a transaction checked back again is an operator's act (4.9 checks only the
    // signature): the admin passes the gate (and is told there is no such message).
    let resume = RemotingCommand::request(request_code::RESUME_CHECK_HALF_MESSAGE)
        .with_ext("msgId", "7F00000100002A9F0000000000000000");
    refused(
        &call(&c, sign(resume.clone(), PRODUCER.0, PRODUCER.1)),
        "Need admin permission for request code=323, but accessKey=producerAK is not",
    );
    let r = call(&c, sign(resume, ADMIN.0, ADMIN.1));
    assert!(r.remark.as_deref().unwrap_or_default().contains("no message of this broker"), "{r:?}");
    // The admin, with no resource lists, may send anywhere.
    let r = call(&c, sign(send_v2(&Msg::new("Denied", b"x")), ADMIN.0, ADMIN.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");

    // A message looked up by its id (its offset in the log) is read only with SUB on its
    // topic: the producer may read T's, not Denied's (4.9 hands out any topic's).
    let offset_of = |r: &RemotingCommand| i64::from_str_radix(&r.ext("msgId").unwrap()[16..32], 16).unwrap();
    let denied_at = offset_of(&r);
    let ok = call(&c, sign(send_v2(&Msg::new("T", b"three")), PRODUCER.0, PRODUCER.1));
    let view =
        |offset: i64| RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID).with_ext("offset", offset);
    let r = call(&c, sign(view(offset_of(&ok)), PRODUCER.0, PRODUCER.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(decode_records(&r.body)[0].body, b"three");
    refused(
        &call(&c, sign(view(denied_at), PRODUCER.0, PRODUCER.1)),
        "No SUB permission for topic:Denied, accessKey=producerAK",
    );
    let r = call(&c, sign(view(denied_at), ADMIN.0, ADMIN.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
}

#[test]
fn white_listed_addresses_pass_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    // Globally: every request from 127.0.0.1.
    let (b, _) = acl_master(
        &dir.path().join("g"),
        &format!("globalWhiteRemoteAddresses:\n  - 127.0.0.{{1,2}}\n{RULES}"),
    );
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(call(&c, send_v2(&Msg::new("Denied", b"x"))).code, code::SUCCESS);
    assert_eq!(call(&c, create_topic_req("New")).code, code::SUCCESS);

    // A pattern that does not match leaves the checks on.
    let (b, _) =
        acl_master(&dir.path().join("n"), &format!("globalWhiteRemoteAddresses:\n  - 10.0.*.*\n{RULES}"));
    let c = client(b.remoting_addrs()[0]);
    refused(&call(&c, send_v2(&Msg::new("T", b"x"))), "No accessKey");

    // Per account: the access key, without a signature, from the account's addresses.
    let per_account = RULES.replace("    whiteRemoteAddress:\n", "    whiteRemoteAddress: 127.0.0.1-10\n");
    let (b, _) = acl_master(&dir.path().join("a"), &per_account);
    let c = client(b.remoting_addrs()[0]);
    let unsigned = send_v2(&Msg::new("Denied", b"x")).with_ext("AccessKey", PRODUCER.0);
    assert_eq!(call(&c, unsigned).code, code::SUCCESS);
    refused(&call(&c, send_v2(&Msg::new("T", b"x"))), "No accessKey");
}

#[test]
fn ipv6_ranges_white_list_ipv6_clients() {
    let dir = tempfile::tempdir().unwrap();
    let start = |name: &str, global: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let file = d.join("plain_acl.yml");
        std::fs::write(&file, format!("globalWhiteRemoteAddresses:\n  - {global}\n{RULES}")).unwrap();
        let path = file.to_str().unwrap().to_string();
        let b = Broker::start_master(common::broker_config(
            &d.join("store"),
            "ASYNC_MASTER",
            &[("bindAddress", "::1"), ("aclEnable", "true"), ("aclFilePath", &path)],
        ))
        .unwrap();
        b.create_topic("T", 1).unwrap();
        b
    };
    // ::1 is 0:0:0:0:0:0:0:1, within the last group's range 0-1.
    let b = start("in", "\"::0-1\"");
    assert!(b.remoting_addrs()[0].is_ipv6(), "{:?}", b.remoting_addrs());
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(call(&c, send_v2(&Msg::new("T", b"x"))).code, code::SUCCESS);
    // fe80::* is fe80:0:0:0:0:0:0:*, which ::1 is not.
    let b = start("out", "\"fe80::*\"");
    let c = client(b.remoting_addrs()[0]);
    refused(&call(&c, send_v2(&Msg::new("T", b"x"))), "No accessKey");
}

#[test]
fn a_changed_file_is_reloaded_and_a_broken_one_keeps_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (b, file) = acl_master(dir.path(), &RULES.replace("Denied=DENY", "Denied=SUB"));
    let c = client(b.remoting_addrs()[0]);
    let send = || call(&c, sign(send_v2(&Msg::new("Denied", b"x")), PRODUCER.0, PRODUCER.1));
    refused(&send(), "No default permission for topic:Denied");
    assert_eq!(b.acl_reloads(), Some((0, 0)));

    std::fs::write(&file, RULES.replace("Denied=DENY", "Denied=PUB")).unwrap();
    assert!(common::wait_until(TIMEOUT, || b.acl_reloads().unwrap().0 == 1), "never reloaded");
    assert_eq!(send().code, code::SUCCESS);

    // A broken version (a bad permission) is refused; the rules stay.
    std::fs::write(&file, RULES.replace("Denied=DENY", "Denied=PUBLISH")).unwrap();
    assert!(common::wait_until(TIMEOUT, || b.acl_reloads().unwrap().1 == 1), "the broken file was not seen");
    assert_eq!(send().code, code::SUCCESS);
    // GET_BROKER_CLUSTER_ACL_CONFIG lists the rules in effect, not the broken file.
    let listed = call(
        &c,
        sign(RemotingCommand::request(request_code::GET_BROKER_CLUSTER_ACL_CONFIG), ADMIN.0, ADMIN.1),
    );
    let listed: serde_json::Value = serde_json::from_slice(&listed.body).unwrap();
    assert_eq!(listed["plainAccessConfigs"][0]["topicPerms"][1], "Denied=PUB", "{listed}");
    // So is a file that is no YAML at all.
    std::fs::write(&file, "accounts: [\n").unwrap();
    assert!(common::wait_until(TIMEOUT, || b.acl_reloads().unwrap().1 == 2), "the broken file was not seen");
    assert_eq!(send().code, code::SUCCESS);
    assert_eq!(b.acl_reloads().unwrap().0, 1);
    // A good version after them is taken.
    std::fs::write(&file, RULES).unwrap();
    assert!(common::wait_until(TIMEOUT, || b.acl_reloads().unwrap().0 == 2), "never reloaded");
    refused(&send(), "No default permission for topic:Denied");

    // The watcher is joined by the shutdown, like every other thread of the broker (it ran
    // until the broker was dropped), though a handle to the broker is still held.
    b.shutdown();
    let watchers = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .filter(|name| name.trim() == "rmqha-acl-watch")
        .count();
    assert_eq!(watchers, 0, "the ACL watcher outlived the shutdown");
}

#[test]
fn a_broken_file_stops_the_start_naming_the_entry_and_never_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, RULES.replace("Denied=DENY", "Denied")).unwrap();
    let path = file.to_str().unwrap().to_string();
    let start = || {
        Broker::start_master(common::broker_config(
            &dir.path().join("store"),
            "ASYNC_MASTER",
            &[("aclEnable", "true"), ("aclFilePath", &path)],
        ))
    };
    let e = start().unwrap_err().to_string();
    assert!(e.contains(&path) && e.contains("accounts[0] (accessKey producerAK): topicPerms[1]"), "{e}");
    std::fs::write(&file, RULES.replace("secretKey: producer-secret-1", "secretKey: sX9q")).unwrap();
    let e = start().unwrap_err().to_string();
    assert!(e.contains("secretKey") && !e.contains("sX9q"), "{e}");
    std::fs::remove_file(&file).unwrap();
    let e = start().unwrap_err().to_string();
    assert!(e.contains(&path), "{e}");
}

#[test]
fn a_slave_signs_its_config_sync_to_a_master_with_acl() {
    let dir = tempfile::tempdir().unwrap();
    let rules = format!("{RULES}  - accessKey: slaveAK01\n    secretKey: slave-secret-1\n");
    let (m, _) = acl_master(&dir.path().join("m"), &rules);
    m.create_topic("Synced", 2).unwrap();
    let c = client(m.remoting_addrs()[0]);
    // The master refuses the sync request unsigned.
    refused(&call(&c, RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG)), "No accessKey");

    let master = m.remoting_addrs()[0].to_string();
    let s = common::slave_of(
        &dir.path().join("s"),
        &m,
        &[
            ("masterAddress", &master),
            ("vipChannelEnabled", "false"),
            ("slaveSyncIntervalMs", "200"),
            ("aclAccessKey", "slaveAK01"),
            ("aclSecretKey", "slave-secret-1"),
        ],
    );
    assert!(
        common::wait_until(TIMEOUT, || s.topic_config("Synced").is_some_and(|t| t.read_queue_nums == 2)),
        "the slave never got the master's topics"
    );
    // Its registration (REGISTER_BROKER, signed too) puts it in the master's routes.
    let route = || {
        let r = call(
            &c,
            sign(
                RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "Synced"),
                ADMIN.0,
                ADMIN.1,
            ),
        );
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()
    };
    assert!(
        common::wait_until(TIMEOUT, || route()["brokerDatas"][0]["brokerAddrs"]["1"].is_string()),
        "the slave never registered with its master: {}",
        route()
    );
}

const COMMIT: i32 = 8;
const ROLLBACK: i32 = 12;

/// A transactional SEND_MESSAGE_V2 to `topic` queue 0, producer group pg.
fn send_tx(topic: &str, body: &[u8], uniq: &str) -> RemotingCommand {
    let p = props(&[("TRAN_MSG", "true"), ("PGROUP", "pg"), ("UNIQ_KEY", uniq), ("WAIT", "true")]);
    RemotingCommand::request(request_code::SEND_MESSAGE_V2)
        .with_ext("a", "pg")
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", 0)
        .with_ext("f", 4)
        .with_ext("g", now_ms())
        .with_ext("h", 0)
        .with_ext("i", p)
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", false)
        .with_body(body.to_vec())
}

fn end_tx(half: (i64, i64), decision: i32) -> RemotingCommand {
    RemotingCommand::request(request_code::END_TRANSACTION)
        .with_ext("producerGroup", "pg")
        .with_ext("tranStateTableOffset", half.0)
        .with_ext("commitLogOffset", half.1)
        .with_ext("commitOrRollback", decision)
        .with_ext("fromTransactionCheck", false)
}

/// The half message a transactional send's answer names: (queue offset, log offset).
fn half_of(r: &RemotingCommand) -> (i64, i64) {
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    (ext_i64(r, "queueOffset"), msg_id_offset(r.ext("msgId").unwrap()))
}

fn bodies(b: &Broker, topic: &str) -> Vec<Vec<u8>> {
    assert!(b.store().wait_dispatched(TIMEOUT));
    b.get_messages(topic, 0, 0, 64).messages().into_iter().map(|m| m.body).collect()
}

const OP: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";

#[test]
fn end_transaction_needs_pub_on_the_real_topic() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _) = acl_master(dir.path(), RULES);
    let c = client(b.remoting_addrs()[0]);
    let half = half_of(&call(&c, sign(send_tx("T", b"tx-body", "U1"), PRODUCER.0, PRODUCER.1)));

    // Unsigned: refused by the gate.
    refused(&call(&c, end_tx(half, COMMIT)), "No accessKey");
    // Signed by an account without PUB on T: neither a commit nor a rollback, answered or
    // oneway.
    let why = "AclException: No PUB permission for topic:T, accessKey=otherAK01";
    refused(&call(&c, sign(end_tx(half, COMMIT), OTHER.0, OTHER.1)), why);
    refused(&call(&c, sign(end_tx(half, ROLLBACK), OTHER.0, OTHER.1)), why);
    c.invoke_oneway(sign(end_tx(half, COMMIT), OTHER.0, OTHER.1), TIMEOUT).unwrap();
    // The next request on the connection is answered after the oneway one was handled.
    refused(&call(&c, sign(end_tx(half, ROLLBACK), OTHER.0, OTHER.1)), why);
    assert!(bodies(&b, "T").is_empty(), "committed by an account without PUB on T");
    assert!(bodies(&b, OP).is_empty(), "decided by an account without PUB on T");

    // The half message is still undecided: an account with PUB on T commits it.
    let r = call(&c, sign(end_tx(half, COMMIT), PRODUCER.0, PRODUCER.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(r.remark, None, "not the first decision: {r:?}");
    assert_eq!(bodies(&b, "T"), vec![b"tx-body".to_vec()]);
    assert_eq!(bodies(&b, OP).len(), 1);

    // A rollback by an account with PUB, of another transaction.
    let half = half_of(&call(&c, sign(send_tx("T", b"rolled-back", "U2"), PRODUCER.0, PRODUCER.1)));
    refused(&call(&c, sign(end_tx(half, ROLLBACK), OTHER.0, OTHER.1)), why);
    assert_eq!(bodies(&b, OP).len(), 1);
    let r = call(&c, sign(end_tx(half, ROLLBACK), PRODUCER.0, PRODUCER.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(bodies(&b, OP).len(), 2);
    assert_eq!(bodies(&b, "T").len(), 1);
}

#[test]
fn a_globally_white_listed_address_ends_transactions_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _) = acl_master(dir.path(), &format!("globalWhiteRemoteAddresses:\n  - 127.0.0.1\n{RULES}"));
    let c = client(b.remoting_addrs()[0]);
    let half = half_of(&call(&c, send_tx("T", b"white", "UW")));
    let r = call(&c, end_tx(half, COMMIT));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(bodies(&b, "T"), vec![b"white".to_vec()]);
}

/// A raw connection whose signed HEART_BEAT registers producer group pg, to see what the
/// broker pushes to it.
fn producer_conn(b: &Broker, account: (&str, &str), client_id: &str) -> Raw {
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [],
        "producerDataSet": [{"groupName": "pg"}]
    });
    let hb = RemotingCommand::request(request_code::HEART_BEAT).with_body(body.to_string().into_bytes());
    raw.send(sign(hb, account.0, account.1), 1);
    let r = raw.recv();
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    raw
}

/// The next CHECK_TRANSACTION_STATE pushed to `raw` within `timeout`.
fn next_check(raw: &mut Raw, timeout: std::time::Duration) -> Option<RemotingCommand> {
    let deadline = std::time::Instant::now() + timeout;
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match raw.try_recv(left) {
            Some(f) if !f.is_response() && f.code == request_code::CHECK_TRANSACTION_STATE => return Some(f),
            Some(_) => continue,
            None => return None,
        }
    }
    None
}

/// 4.9 pushes a check-back, which carries the half message and its body, to any connection
/// whose heartbeat named the producer group: an account without any right to the topic could
/// read its undecided transactions that way.
#[test]
fn check_backs_go_only_to_producers_that_may_publish_the_real_topic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, RULES).unwrap();
    let b = Broker::start_master(common::broker_config(
        &dir.path().join("store"),
        "ASYNC_MASTER",
        &[
            ("aclEnable", "true"),
            ("aclFilePath", file.to_str().unwrap()),
            ("transactionCheckInterval", "200"),
            ("transactionTimeOut", "0"),
            ("transactionCheckMax", "1000"),
            ("flushCommitLogLeastPages", "0"),
        ],
    ))
    .unwrap();
    b.create_topic("T", 1).unwrap();
    // An account with no right to T names producer group pg.
    let mut other = producer_conn(&b, OTHER, "other-client");
    let c = client(b.remoting_addrs()[0]);
    half_of(&call(&c, sign(send_tx("T", b"undecided-body", "U-CB"), PRODUCER.0, PRODUCER.1)));
    assert!(
        next_check(&mut other, std::time::Duration::from_millis(1500)).is_none(),
        "a check-back, with the half message's body, pushed to an account without PUB on T"
    );
    // A producer of the group that may publish to T: checked back.
    let mut own = producer_conn(&b, PRODUCER, "own-client");
    let check = next_check(&mut own, TIMEOUT).expect("no check-back for the producer that may publish to T");
    assert!(check.body.windows(14).any(|w| w == b"undecided-body"), "{check:?}");
    assert!(next_check(&mut other, std::time::Duration::from_millis(600)).is_none());
}

/// An offset reset moves a group's offsets as UPDATE_CONSUMER_OFFSET does, and needs what
/// that needs: SUB on the group and on the topic (4.9 checks only the signature).
#[test]
fn an_offset_reset_needs_sub_on_the_group_and_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _) = acl_master(dir.path(), RULES);
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, sign(send_v2(&Msg::new("T", b"x")), PRODUCER.0, PRODUCER.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(b.store().wait_dispatched(TIMEOUT));
    for group in ["test_cg", "blocked_cg"] {
        b.commit_consumer_offset(group, "T", 0, 1).unwrap();
        b.commit_consumer_offset(group, "Denied", 0, 0).unwrap();
    }
    let reset = |topic: &str, group: &str| {
        RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("topic", topic)
            .with_ext("group", group)
            .with_ext("timestamp", 0)
            .with_ext("isForce", true)
    };
    refused(&call(&c, reset("T", "test_cg")), "No accessKey");
    refused(
        &call(&c, sign(reset("Denied", "test_cg"), PRODUCER.0, PRODUCER.1)),
        "No default permission for topic:Denied",
    );
    refused(
        &call(&c, sign(reset("T", "blocked_cg"), PRODUCER.0, PRODUCER.1)),
        "No default permission for group:blocked_cg",
    );
    assert_eq!(b.consumer_offset("test_cg", "T", 0), 1, "a refused reset moves nothing");
    assert_eq!(b.consumer_offset("blocked_cg", "T", 0), 1);
    let r = call(&c, sign(reset("T", "test_cg"), PRODUCER.0, PRODUCER.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(b.consumer_offset("test_cg", "T", 0), 0);
}

fn update_acl(ak: &str, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut r =
        RemotingCommand::request(request_code::UPDATE_AND_CREATE_ACL_CONFIG).with_ext("accessKey", ak);
    for (k, v) in fields {
        r.set_ext(*k, *v);
    }
    r
}

/// `mqadmin updateAclConfig`, `deleteAclConfig`, `updateGlobalWhiteAddr` and
/// `clusterAclConfigVersion`: only an admin changes the file; a change applies before its
/// answer, is written to the file (kept across a restart), and one that would break the file
/// is refused and changes nothing; no answer holds a secret.
#[test]
fn an_admin_changes_the_acl_file_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let (b, file) = acl_master(dir.path(), RULES);
    let c = client(b.remoting_addrs()[0]);
    let version = |b: &Broker, c: &RemotingClient| {
        let r = call(
            c,
            sign(RemotingCommand::request(request_code::GET_BROKER_CLUSTER_ACL_INFO), OTHER.0, OTHER.1),
        );
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        assert_eq!(r.ext("brokerName"), Some("broker-a"));
        assert_eq!(r.ext("clusterName"), Some("DefaultCluster"));
        assert_eq!(
            r.ext("brokerAddr").map(str::to_string),
            Some(b.store().commit_log().store_host().to_string())
        );
        let all: serde_json::Value = serde_json::from_str(r.ext("allAclFileVersion").unwrap()).unwrap();
        let v: serde_json::Value = serde_json::from_str(r.ext("version").unwrap()).unwrap();
        assert_eq!(all[file.to_str().unwrap()], v, "{r:?}");
        v["counter"].as_i64().unwrap()
    };
    assert_eq!(version(&b, &c), 0);

    // Not an admin: refused by the gate; the file is untouched.
    let new_account = update_acl(
        "newcomer1",
        &[("secretKey", "newcomer-secret"), ("defaultTopicPerm", "PUB"), ("topicPerms", "Denied=DENY,T=SUB")],
    );
    refused(
        &call(&c, sign(new_account.clone(), PRODUCER.0, PRODUCER.1)),
        "Need admin permission for request code=50",
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), RULES);

    // The admin creates an account, which may send at once.
    let r = call(&c, sign(new_account, ADMIN.0, ADMIN.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(version(&b, &c), 1);
    let as_newcomer =
        |topic: &str| call(&c, sign(send_v2(&Msg::new(topic, b"x")), "newcomer1", "newcomer-secret"));
    assert_eq!(as_newcomer("Other").code, code::SUCCESS, "defaultTopicPerm PUB");
    refused(&as_newcomer("Denied"), "permission for topic:Denied");
    refused(&as_newcomer("T"), "permission for topic:T");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("newcomer1") && text.contains("dataVersion"), "{text}");
    assert!(text.contains("producerAK") && text.contains("otherAK01"), "the other accounts kept: {text}");

    // An update keeps what it leaves out (the secret, the default), replaces the lists.
    let r = call(&c, sign(update_acl("newcomer1", &[("topicPerms", "T=PUB")]), ADMIN.0, ADMIN.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(as_newcomer("T").code, code::SUCCESS);
    assert_eq!(as_newcomer("Denied").code, code::SUCCESS, "the list was replaced; the default PUB applies");

    // A change that would break the file is refused with the reason, and nothing changes.
    let before = std::fs::read_to_string(&file).unwrap();
    for (fields, why) in [
        (vec![("topicPerms", "T=PUBLISH")], "topicPerms[0]"),
        (vec![("secretKey", "short")], "secretKey is missing or too short"),
        (vec![("whiteRemoteAddress", "10.0.0.300")], "whiteRemoteAddress"),
    ] {
        let r = call(&c, sign(update_acl("newcomer1", &fields), ADMIN.0, ADMIN.1));
        assert_eq!(r.code, rmqha_core::acl::UPDATE_AND_CREATE_ACL_CONFIG_FAILED, "{r:?}");
        let remark = r.remark.clone().unwrap_or_default();
        assert!(remark.contains(why) && remark.contains("newcomer1"), "{remark}");
        assert!(
            !remark.contains("short") || why.contains("secretKey") && !remark.contains("\"short\""),
            "{remark}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    assert_eq!(as_newcomer("T").code, code::SUCCESS);

    // The global white list: 127.0.0.1 then passes unsigned.
    refused(&call(&c, send_v2(&Msg::new("T", b"x"))), "No accessKey is configured");
    let white = RemotingCommand::request(request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
        .with_ext("globalWhiteAddrs", "10.10.103.*, 127.0.0.1");
    refused(&call(&c, sign(white.clone(), OTHER.0, OTHER.1)), "Need admin permission");
    assert_eq!(call(&c, sign(white, ADMIN.0, ADMIN.1)).code, code::SUCCESS);
    assert_eq!(call(&c, send_v2(&Msg::new("T", b"x"))).code, code::SUCCESS);
    // A white-listed address passes unsigned, but changing the ACL (or resuming a
    // transaction's checks) still takes an admin account: 4.9 would let this host white-list
    // everyone or make itself admin.
    let open_up = RemotingCommand::request(request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
        .with_ext("globalWhiteAddrs", "*");
    refused(&call(&c, open_up.clone()), "an admin account's accessKey is required");
    let mut as_producer = open_up.clone();
    as_producer.set_ext("AccessKey", PRODUCER.0);
    refused(&call(&c, as_producer), "Need admin permission for request code=53, but accessKey=producerAK");
    let mut unsigned_admin = open_up;
    unsigned_admin.set_ext("AccessKey", ADMIN.0);
    refused(&call(&c, unsigned_admin), "Check signature failed for accessKey=adminAK01");
    let make_admin = update_acl(PRODUCER.0, &[("admin", "true")]);
    refused(&call(&c, make_admin), "an admin account's accessKey is required");
    let resume = RemotingCommand::request(request_code::RESUME_CHECK_HALF_MESSAGE).with_ext("msgId", "x");
    refused(&call(&c, resume), "an admin account's accessKey is required");
    let list = RemotingCommand::request(request_code::GET_BROKER_CLUSTER_ACL_CONFIG);
    refused(&call(&c, list), "an admin account's accessKey is required");
    let bad_white = RemotingCommand::request(request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
        .with_ext("globalWhiteAddrs", "10.0.0.1-");
    let r = call(&c, sign(bad_white, ADMIN.0, ADMIN.1));
    assert_eq!(r.code, rmqha_core::acl::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, "{r:?}");
    let white = RemotingCommand::request(request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
        .with_ext("globalWhiteAddrs", "");
    assert_eq!(call(&c, sign(white, ADMIN.0, ADMIN.1)).code, code::SUCCESS);
    refused(&call(&c, send_v2(&Msg::new("T", b"x"))), "No accessKey is configured");

    // Deleting: the account is gone at once; deleting it again fails naming it.
    let del = RemotingCommand::request(request_code::DELETE_ACL_CONFIG).with_ext("accessKey", "newcomer1");
    assert_eq!(call(&c, sign(del.clone(), ADMIN.0, ADMIN.1)).code, code::SUCCESS);
    refused(&as_newcomer("T"), "No acl config for newcomer1");
    let r = call(&c, sign(del, ADMIN.0, ADMIN.1));
    assert_eq!(r.code, rmqha_core::acl::DELETE_ACL_CONFIG_FAILED, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or_default().contains("newcomer1"), "{r:?}");
    let changes = version(&b, &c);
    assert_eq!(changes, 5, "two updates, two white lists, one delete");

    // `mqadmin getAccessConfigSubCommand`: the accounts in effect, to an admin only, and
    // without their secrets (4.9 answers every secret key to any signed request).
    let get_config = RemotingCommand::request(request_code::GET_BROKER_CLUSTER_ACL_CONFIG);
    refused(
        &call(&c, sign(get_config.clone(), OTHER.0, OTHER.1)),
        "Need admin permission for request code=54",
    );
    refused(&call(&c, get_config.clone()), "an admin account's accessKey is required");
    let r = call(&c, sign(get_config, ADMIN.0, ADMIN.1));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let text = String::from_utf8(r.body.clone()).unwrap();
    assert!(!text.contains("secret"), "no secret key, nor its field: {text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["globalWhiteAddrs"], serde_json::json!([]), "{text}");
    assert_eq!(
        body["plainAccessConfigs"],
        serde_json::json!([
            {
                "accessKey": "producerAK",
                "admin": false,
                "defaultGroupPerm": "SUB",
                "defaultTopicPerm": "DENY",
                "groupPerms": ["blocked_cg=DENY"],
                "topicPerms": ["T=PUB|SUB", "Denied=DENY"],
            },
            { "accessKey": "adminAK01", "admin": true },
            { "accessKey": "otherAK01", "admin": false, "defaultTopicPerm": "DENY", "topicPerms": ["Other=PUB"] },
        ]),
        "fields as fastjson writes 4.9's PlainAccessConfig, in the file's order: {text}"
    );
    // Fields in fastjson's (alphabetical) order.
    assert!(text.starts_with(r#"{"globalWhiteAddrs":[],"plainAccessConfigs":[{"accessKey":"producerAK","admin":false,"defaultGroupPerm""#), "{text}");

    // The file holds the changes: a restart reads them.
    b.shutdown();
    drop(b);
    let text = std::fs::read_to_string(&file).unwrap();
    let b = Broker::start_master(common::broker_config(
        &dir.path().join("store"),
        "ASYNC_MASTER",
        &[("aclEnable", "true"), ("aclFilePath", file.to_str().unwrap())],
    ))
    .unwrap();
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(version(&b, &c), changes, "{text}");
    refused(&call(&c, send_v2(&Msg::new("T", b"x"))), "No accessKey is configured");
    assert_eq!(call(&c, sign(send_v2(&Msg::new("T", b"x")), PRODUCER.0, PRODUCER.1)).code, code::SUCCESS);
}
