//! A stock RocketMQ client against `rmqha broker` processes: Apache rocketmq-client-cpp, as
//! bundled by the `rocketmq` Python package (0.4.4 ships `librocketmq.so` in its wheel). Its
//! producer sends to a SYNC_MASTER found through the master's listen port as name server, its
//! push and pull consumers read the messages back, and with the master stopped its pull
//! consumer reads them from the slave.
//!
//! `scripts/install-test-deps.sh` (run by `make test`) installs that package into the test
//! venv, `target/py-venv`, where this test finds it; `RMQHA_ROCKETMQ_PYTHON` names another
//! Python that has it. Without either the test fails, saying how to install it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmqha_core::remoting::{ClientConfig, RemotingClient, RemotingCommand};

const RMQHA: &str = env!("CARGO_BIN_EXE_rmqha");

const PRODUCE: &str = r#"
import sys
from rocketmq.client import Producer, Message
p = Producer('PID_RMQHA_TEST')
p.set_namesrv_addr(sys.argv[1])
p.start()
for i in range(int(sys.argv[2])):
    m = Message('CppTopic'); m.set_keys('key-%d' % i); m.set_tags('TagA'); m.set_body('cpp-%03d' % i)
    r = p.send_sync(m)
    print(int(r.status), r.msg_id, r.offset)
p.shutdown()
"#;

const PUSH: &str = r#"
import sys, time
from rocketmq.client import PushConsumer
got = set()
def cb(msg):
    got.add(msg.body.decode())
c = PushConsumer('CID_RMQHA_PUSH')
c.set_namesrv_addr(sys.argv[1])
c.subscribe('CppTopic', cb)
c.start()
deadline = time.time() + 60
while len(got) < int(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.1)
c.shutdown()
for b in sorted(got):
    print(b)
"#;

const PULL: &str = r#"
import sys
from rocketmq.client import PullConsumer
c = PullConsumer('CID_RMQHA_PULL')
c.set_namesrv_addr(sys.argv[1])
c.start()
for msg in c.pull('CppTopic'):
    print(msg.body.decode())
c.shutdown()
"#;

struct Broker(Child);

impl Broker {
    fn start(props: &str) -> (Broker, u16, u16) {
        let mut child = Command::new(RMQHA)
            .args(["broker", "-c", props])
            .env("RMQHA_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let field = |k: &str| -> u16 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{line}"))
                .parse()
                .unwrap()
        };
        let ports = (field("listenPort"), field("haPort"));
        (Broker(child), ports.0, ports.1)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python(py: &str, script: &str, args: &[&str], home: &Path) -> Vec<String> {
    let out = Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .env("HOME", home) // the C++ client logs under $HOME/logs
        .output()
        .unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

/// A client script driven over its stdin and stdout: started, and its first line read.
fn interactive(
    py: &str,
    script: &str,
    args: &[&str],
    home: &Path,
) -> (Child, BufReader<std::process::ChildStdout>, String) {
    let mut child = Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .env("HOME", home) // the C++ client logs under $HOME/logs
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    (child, out, line)
}

/// A broker's properties on 127.0.0.1 with ports picked by the kernel, its store in
/// `dir/root`, written to `dir/root.properties`; `extra` adds (or overrides) keys.
fn broker_props(dir: &Path, root: &str, extra: &[String]) -> String {
    let mut lines = vec![
        "brokerClusterName=DefaultCluster".to_string(),
        "brokerName=broker-a".into(),
        "listenPort=0".into(),
        "haListenPort=0".into(),
        "bindAddress=127.0.0.1".into(),
        "brokerIP1=127.0.0.1".into(),
        "mappedFileSizeCommitLog=4194304".into(),
        format!("storePathRootDir={}", dir.join(root).display()),
    ];
    lines.extend_from_slice(extra);
    write_props(dir, &format!("{root}.properties"), &lines)
}

fn write_props(dir: &Path, name: &str, lines: &[String]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.display().to_string()
}

/// The Python with PyPI's `rocketmq==0.4.4`: `RMQHA_ROCKETMQ_PYTHON`, else the test venv.
fn client_python() -> String {
    let py = std::env::var("RMQHA_ROCKETMQ_PYTHON").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/py-venv/bin/python").display().to_string()
    });
    let found = Command::new(&py)
        .args(["-c", "import rocketmq.client"])
        .env("HOME", std::env::temp_dir())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{py} cannot import rocketmq.client: run scripts/install-test-deps.sh (make test-deps), or set \
         RMQHA_ROCKETMQ_PYTHON to a Python with `pip install rocketmq==0.4.4`"
    );
    py
}

#[test]
fn the_stock_cpp_client_produces_to_a_sync_master_and_consumes_from_it_and_its_slave() {
    let py = client_python();
    let dir = tempfile::tempdir().unwrap();
    let m = ["slaveReadEnable=true".to_string(), "brokerId=0".into(), "brokerRole=SYNC_MASTER".into()];
    let (master, mport, mha) = Broker::start(&broker_props(dir.path(), "m", &m));
    let s = [
        "slaveReadEnable=true".to_string(),
        "brokerId=1".into(),
        "brokerRole=SLAVE".into(),
        format!("haMasterAddress=127.0.0.1:{mha}"),
        format!("masterAddress=127.0.0.1:{mport}"),
    ];
    let (_slave, sport, _) = Broker::start(&broker_props(dir.path(), "s", &s));
    let (maddr, saddr) = (format!("127.0.0.1:{mport}"), format!("127.0.0.1:{sport}"));
    let home = dir.path();

    let sent = python(&py, PRODUCE, &[&maddr, "20"], home);
    assert_eq!(sent.len(), 20, "{sent:?}");
    for l in &sent {
        assert!(l.starts_with("0 "), "SendStatus SEND_OK (0) expected: {l}");
    }
    let want: Vec<String> = (0..20).map(|i| format!("cpp-{i:03}")).collect();
    let mut pushed = python(&py, PUSH, &[&maddr, "20"], home);
    pushed.sort();
    assert_eq!(pushed, want, "push consumer");
    let mut pulled = python(&py, PULL, &[&maddr], home);
    pulled.sort();
    assert_eq!(pulled, want, "pull consumer from the master");

    // With the master gone, the slave's route names only the slave, which serves the reads.
    drop(master);
    let slave_routes_master = || {
        let c = RemotingClient::new(saddr.clone(), ClientConfig::default());
        let r = c
            .invoke_sync(RemotingCommand::request(105).with_ext("topic", "CppTopic"), Duration::from_secs(5))
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v["brokerDatas"][0]["brokerAddrs"].get("0").is_some()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while slave_routes_master() {
        assert!(Instant::now() < deadline, "the slave still routes to its stopped master");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut from_slave = python(&py, PULL, &[&saddr], home);
    from_slave.sort();
    assert_eq!(from_slave, want, "pull consumer from the slave");
}

const MORE_PRODUCE: &str = r#"
import sys
from rocketmq.client import Producer, Message
p = Producer('PID_RMQHA_MORE', compress_level=5)
p.set_namesrv_addr(sys.argv[1])
p.start()
def msg(body, tags, key):
    m = Message('CppMore'); m.set_tags(tags); m.set_keys(key); m.set_body(body)
    m.set_property('origin', 'cpp')
    return m
r = p.send_batch([msg('batch-%d' % i, 'TagB', 'b%d' % i) for i in range(5)])
print('batch', int(r.status), r.offset)
for i in range(5):
    r = p.send_orderly(msg('order-%d' % i, 'TagA', 'o%d' % i), 2)
    print('orderly', int(r.status), r.offset)
r = p.send_sync(msg('z' * 10000 + 'end', 'TagA', 'big'))
print('big', int(r.status), r.offset)
p.send_oneway(msg('oneway-0', 'TagC', 'w0'))
m = msg('delayed-0', 'TagA', 'd0'); m.set_delay_time_level(1)
r = p.send_sync(m)
print('delayed', int(r.status), r.offset)
p.shutdown()
"#;

/// An orderly push consumer of `CppMore` with a tag expression: one line per message, in the
/// order received, `body queue_id origin-property` (a long body as its length and tail).
const MORE_PUSH: &str = r#"
import sys, time, threading
from rocketmq.client import PushConsumer
got = []
lock = threading.Lock()
def cb(msg):
    b = msg.body.decode()
    if len(b) > 64:
        b = 'len%d:%s' % (len(b), b[-3:])
    with lock:
        got.append('%s %d %s' % (b, msg.queue_id, msg.get_property('origin').decode()))
c = PushConsumer('CID_RMQHA_MORE', orderly=True)
c.set_namesrv_addr(sys.argv[1])
c.subscribe('CppMore', cb, sys.argv[3])
c.start()
deadline = time.time() + 60
while len(got) < int(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.5)  # anything past the expected count would show up here
c.shutdown()
for l in got:
    print(l)
"#;

const MORE_PULL: &str = r#"
import sys
from rocketmq.client import PullConsumer
c = PullConsumer('CID_RMQHA_MORE_PULL')
c.set_namesrv_addr(sys.argv[1])
c.start()
for msg in c.pull('CppMore'):
    b = msg.body.decode()
    print(b if len(b) <= 64 else 'len%d' % len(b))
c.shutdown()
"#;

/// The client's other sends against one ASYNC_MASTER: a batch (SEND_BATCH_MESSAGE), orderly
/// sends to one queue, a body the client compresses (over 4 KiB: the COMPRESSED sysflag, which
/// the broker stores as sent and the consumer inflates), a one-way send, a user property, a
/// delayed message (level 1, one second);
/// read back by an orderly push consumer (LOCK_BATCH_MQ) with a tag expression, which gets
/// exactly the matching messages with each queue in order, and by a pull consumer.
#[test]
fn the_stock_cpp_client_sends_batches_orderly_compressed_and_oneway_and_filters_by_tag() {
    let py = client_python();
    let dir = tempfile::tempdir().unwrap();
    let props = broker_props(dir.path(), "m", &["brokerRole=ASYNC_MASTER".to_string()]);
    let (_master, port, _) = Broker::start(&props);
    let addr = format!("127.0.0.1:{port}");
    let home = dir.path();

    let sent = python(&py, MORE_PRODUCE, &[&addr], home);
    assert_eq!(sent.len(), 8, "{sent:?}");
    for l in &sent {
        assert!(l.split(' ').nth(1) == Some("0"), "SendStatus SEND_OK (0) expected: {l}");
    }
    // The orderly sends went to one queue, one after another.
    let orderly: Vec<i64> =
        sent[1..6].iter().map(|l| l.split(' ').nth(2).unwrap().parse().unwrap()).collect();
    assert_eq!(orderly, (orderly[0]..orderly[0] + 5).collect::<Vec<_>>(), "{sent:?}");

    let pushed = python(&py, MORE_PUSH, &[&addr, "12", "TagA || TagB"], home);
    assert_eq!(pushed.len(), 12, "TagC is filtered out, nothing else is: {pushed:?}");
    assert!(pushed.iter().any(|l| l.starts_with("delayed-0 ")), "the delayed message arrives: {pushed:?}");
    assert!(pushed.iter().all(|l| l.ends_with(" cpp")), "the user property arrives: {pushed:?}");
    assert!(
        pushed.iter().any(|l| l.starts_with("len10003:end ")),
        "the compressed body inflates: {pushed:?}"
    );
    let order_lines: Vec<&String> = pushed.iter().filter(|l| l.starts_with("order-")).collect();
    let queue = order_lines[0].split(' ').nth(1).unwrap();
    assert_eq!(
        order_lines.iter().map(|l| l.split(' ').next().unwrap()).collect::<Vec<_>>(),
        (0..5).map(|i| format!("order-{i}")).collect::<Vec<_>>(),
        "an orderly consumer gets one queue in order"
    );
    assert!(order_lines.iter().all(|l| l.split(' ').nth(1) == Some(queue)), "{order_lines:?}");
    // The batch's messages were stored one by one, in one queue, in order.
    let batch: Vec<&str> =
        pushed.iter().filter(|l| l.starts_with("batch-")).map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(batch, (0..5).map(|i| format!("batch-{i}")).collect::<Vec<_>>(), "{pushed:?}");

    // Every message is stored in its topic, the one-way one included, and the delayed one
    // once (its scheduled record is in SCHEDULE_TOPIC_XXXX, which this consumer does not read).
    let mut pulled = python(&py, MORE_PULL, &[&addr], home);
    pulled.sort();
    let mut want: Vec<String> = (0..5).map(|i| format!("batch-{i}")).collect();
    want.extend((0..5).map(|i| format!("order-{i}")));
    want.extend(["len10003".to_string(), "oneway-0".into(), "delayed-0".into()]);
    want.sort();
    assert_eq!(pulled, want, "pull consumer");
}

const RETRY_PRODUCE: &str = r#"
import sys
from rocketmq.client import Producer, Message
p = Producer('PID_RMQHA_RETRY')
p.set_namesrv_addr(sys.argv[1])
p.start()
for body in ['first', 'retry-me', 'third']:
    m = Message('CppRetry'); m.set_tags('TagA'); m.set_body(body)
    print(int(p.send_sync(m).status))
p.shutdown()
"#;

/// A push consumer whose listener fails once for `retry-me`: one line per delivery,
/// `body reconsume_times`.
const RETRY_PUSH: &str = r#"
import sys, time, threading
from rocketmq.client import PushConsumer
got = []
failed = []
lock = threading.Lock()
def cb(msg):
    b = msg.body.decode()
    with lock:
        got.append('%s %d' % (b, msg.reconsume_times))
        if b == 'retry-me' and not failed:
            failed.append(b)
            raise RuntimeError('let the broker retry it')
c = PushConsumer('CID_RMQHA_RETRY')
c.set_namesrv_addr(sys.argv[1])
c.subscribe('CppRetry', cb)
c.start()
deadline = time.time() + 60
while len(got) < 4 and time.time() < deadline:
    time.sleep(0.05)
c.shutdown()
for l in got:
    print(l)
"#;

/// A message whose listener failed is handed back (CONSUMER_SEND_MSG_BACK) and comes back
/// through the group's retry topic after its delay level (one second here), once more
/// consumed.
#[test]
fn the_stock_cpp_client_hands_back_a_failed_message_and_gets_it_again() {
    let py = client_python();
    let dir = tempfile::tempdir().unwrap();
    let extra = ["brokerRole=ASYNC_MASTER".to_string(), "messageDelayLevel=1s 1s 1s 1s 1s".into()];
    let (_master, port, _) = Broker::start(&broker_props(dir.path(), "m", &extra));
    let addr = format!("127.0.0.1:{port}");
    let sent = python(&py, RETRY_PRODUCE, &[&addr], dir.path());
    assert_eq!(sent, ["0", "0", "0"], "SEND_OK");
    let mut got = python(&py, RETRY_PUSH, &[&addr], dir.path());
    got.sort();
    assert_eq!(got, ["first 0", "retry-me 0", "retry-me 1", "third 0"]);
    // The broker made the retry: scheduled at level 3, then put in the group's retry topic.
    let c = RemotingClient::new(addr.clone(), ClientConfig::default());
    let max_offset = |topic: &str, queue: i32| {
        let r = c
            .invoke_sync(
                RemotingCommand::request(30).with_ext("topic", topic).with_ext("queueId", queue),
                Duration::from_secs(5),
            )
            .unwrap();
        r.ext("offset").unwrap().parse::<i64>().unwrap()
    };
    assert_eq!(max_offset("SCHEDULE_TOPIC_XXXX", 2), 1);
    assert_eq!(max_offset("%RETRY%CID_RMQHA_RETRY", 0), 1);
}

/// A producer that signs with `argv[2]`/`argv[3]` (RocketMQ's ACL session credentials): one
/// line per send, `sent STATUS` or `refused`.
const ACL_PRODUCE: &str = r#"
import sys
from rocketmq.client import Producer, Message
p = Producer('PID_RMQHA_ACL')
p.set_namesrv_addr(sys.argv[1])
p.set_session_credentials(sys.argv[2], sys.argv[3], 'ALIYUN')
p.start()
for i in range(int(sys.argv[4])):
    m = Message('CppAcl'); m.set_tags('TagA'); m.set_body('%s-%d' % (sys.argv[5], i))
    try:
        print('sent', int(p.send_sync(m).status))
    except Exception as e:
        print('refused')
p.shutdown()
"#;

const ACL_PULL: &str = r#"
import sys
from rocketmq.client import PullConsumer
c = PullConsumer('CID_RMQHA_ACL')
c.set_namesrv_addr(sys.argv[1])
c.set_session_credentials(sys.argv[2], sys.argv[3], 'ALIYUN')
c.start()
for msg in c.pull('CppAcl'):
    print(msg.body.decode())
c.shutdown()
"#;

/// A master with `aclEnable`: the C++ client's signed requests (its `ClientRPCHook`, with the
/// OnsChannel field it adds) are accepted, and a producer with a wrong secret stores nothing.
#[test]
fn the_stock_cpp_client_signs_its_requests_for_a_master_with_acl() {
    let py = client_python();
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        "accounts:\n  - accessKey: cppClient1\n    secretKey: cpp-secret-1\n    defaultTopicPerm: DENY\n    \
         defaultGroupPerm: SUB\n    topicPerms:\n      - CppAcl=PUB|SUB\n",
    )
    .unwrap();
    let extra = [
        "brokerRole=ASYNC_MASTER".to_string(),
        "aclEnable=true".into(),
        format!("aclFilePath={}", acl.display()),
    ];
    let (_master, port, _) = Broker::start(&broker_props(dir.path(), "m", &extra));
    let addr = format!("127.0.0.1:{port}");
    let home = dir.path();

    let wrong = python(&py, ACL_PRODUCE, &[&addr, "cppClient1", "cpp-secret-2", "2", "wrong"], home);
    assert_eq!(wrong, ["refused", "refused"], "a wrong secret is refused");
    let sent = python(&py, ACL_PRODUCE, &[&addr, "cppClient1", "cpp-secret-1", "3", "right"], home);
    assert_eq!(sent, ["sent 0", "sent 0", "sent 0"], "SEND_OK with the right secret");
    let mut pulled = python(&py, ACL_PULL, &[&addr, "cppClient1", "cpp-secret-1"], home);
    pulled.sort();
    assert_eq!(pulled, ["right-0", "right-1", "right-2"], "only the signed sends were stored");
}

/// A push consumer that takes every message once, says so, waits for a line on stdin (the
/// test resets the group's offsets meanwhile), then waits to see every message a second
/// time and prints how many it saw twice.
const RESET_PUSH: &str = r#"
import sys, time, threading, collections
from rocketmq.client import PushConsumer
n = int(sys.argv[2])
seen = collections.Counter()
lock = threading.Lock()
def cb(msg):
    with lock:
        seen[msg.body.decode()] += 1
def twice():
    with lock:
        return sum(1 for v in seen.values() if v >= 2)
c = PushConsumer('CID_RMQHA_RESET')
c.set_namesrv_addr(sys.argv[1])
c.subscribe('CppTopic', cb)
c.start()
deadline = time.time() + 60
while len(seen) < n and time.time() < deadline:
    time.sleep(0.05)
print('first', len(seen), flush=True)
sys.stdin.readline()
deadline = time.time() + 60
while twice() < n and time.time() < deadline:
    time.sleep(0.05)
c.shutdown()
print('twice', twice(), flush=True)
"#;

/// `rmqha reset-offset` against a group whose stock C++ push consumer is online: the broker
/// pushes RESET_CONSUMER_CLIENT_OFFSET in the list form that client reads, and the consumer
/// drops its queues and consumes every message again from the reset offsets.
#[test]
fn a_reset_offset_makes_an_online_cpp_push_consumer_consume_again() {
    let py = client_python();
    let dir = tempfile::tempdir().unwrap();
    let (_master, port, _) =
        Broker::start(&broker_props(dir.path(), "m", &["brokerRole=ASYNC_MASTER".to_string()]));
    let addr = format!("127.0.0.1:{port}");
    let home = dir.path();
    let sent = python(&py, PRODUCE, &[&addr, "20"], home);
    assert_eq!(sent.len(), 20, "{sent:?}");

    let (mut consumer, mut out, mut line) = interactive(&py, RESET_PUSH, &[&addr, "20"], home);
    assert_eq!(line.trim(), "first 20", "the consumer took every message once");

    // The client commits its offsets every 5 s: wait until the broker has all 20.
    let c = RemotingClient::new(addr.clone(), ClientConfig::default());
    let committed = || -> i64 {
        let req = RemotingCommand::request(208)
            .with_ext("consumerGroup", "CID_RMQHA_RESET")
            .with_ext("topic", "CppTopic");
        let r = c.invoke_sync(req, Duration::from_secs(5)).unwrap();
        if r.code != 0 {
            return 0;
        }
        let stats = rmqha_core::broker_admin::ConsumeStats::decode(&r.body).unwrap();
        stats.offsets.iter().map(|(_, o)| o.consumer_offset).sum()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while committed() < 20 {
        assert!(Instant::now() < deadline, "the consumer's offsets never reached the broker");
        std::thread::sleep(Duration::from_millis(100));
    }

    let reset = Command::new(RMQHA)
        .args(["reset-offset", &addr, "--group", "CID_RMQHA_RESET", "--topic", "CppTopic", "--to", "0"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&reset.stdout), String::from_utf8_lossy(&reset.stderr));
    assert!(reset.status.success(), "{stdout} {stderr}");
    assert!(stdout.contains("broker-a CppTopic queue 0: offset 0"), "{stdout}");
    assert!(!stderr.contains("no consumer"), "the consumer is online: {stderr}");

    use std::io::Write;
    consumer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(consumer.wait().unwrap().success());
    assert_eq!(line.trim(), "twice 20", "every message consumed again after the reset");
}

/// A push consumer that says when it has consumed `argv[2]` messages, then runs until a line
/// arrives on stdin.
const CALLED_PUSH: &str = r#"
import sys, time
from rocketmq.client import PushConsumer
seen = set()
def cb(msg):
    seen.add(msg.body.decode())
c = PushConsumer('CID_RMQHA_CALLED')
c.set_namesrv_addr(sys.argv[1])
c.subscribe('CppTopic', cb)
c.start()
deadline = time.time() + 60
while len(seen) < int(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.05)
print('consumed', len(seen), flush=True)
sys.stdin.readline()
c.shutdown()
"#;

/// GET_CONSUMER_RUNNING_INFO (what `mqadmin consumerStatus` asks) for an online stock C++
/// push consumer: the broker forwards it and answers with the client's ConsumerRunningInfo.
/// That client does not implement CONSUME_MESSAGE_DIRECTLY: the broker answers
/// CONSUME_MSG_TIMEOUT once `consumerCallTimeoutMillis` has passed, as 4.9 does after 10 s.
#[test]
fn an_online_cpp_consumer_answers_running_info_through_the_broker() {
    let py = client_python();
    let dir = tempfile::tempdir().unwrap();
    let props = ["brokerRole=ASYNC_MASTER".to_string(), "consumerCallTimeoutMillis=1500".into()];
    let (_master, port, _) = Broker::start(&broker_props(dir.path(), "m", &props));
    let addr = format!("127.0.0.1:{port}");
    let home = dir.path();
    let sent = python(&py, PRODUCE, &[&addr, "3"], home);
    assert_eq!(sent.len(), 3, "{sent:?}");
    // The client prints its own message ids: the first message's offset message id is its
    // store host's and CommitLog offset 0.
    let msg_id = rmqha_core::message::offset_msg_id(&addr.parse().unwrap(), 0);

    let (mut consumer, _out, line) = interactive(&py, CALLED_PUSH, &[&addr, "3"], home);
    assert_eq!(line.trim(), "consumed 3", "the consumer is up");

    let c = RemotingClient::new(addr.clone(), ClientConfig::default());
    let ids = c
        .invoke_sync(
            RemotingCommand::request(38).with_ext("consumerGroup", "CID_RMQHA_CALLED"),
            Duration::from_secs(5),
        )
        .unwrap();
    let ids: serde_json::Value = serde_json::from_slice(&ids.body).unwrap();
    let client_id = ids["consumerIdList"][0].as_str().expect("the consumer's id").to_owned();

    let info = RemotingCommand::request(307)
        .with_ext("consumerGroup", "CID_RMQHA_CALLED")
        .with_ext("clientId", &client_id)
        .with_ext("jstackEnable", false);
    let r = c.invoke_sync(info, Duration::from_secs(15)).unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    let body = String::from_utf8_lossy(&r.body);
    for want in ["\"PROP_CONSUME_TYPE\":\"CONSUME_PASSIVELY\"", "\"topic\" : \"CppTopic\"", "\"mqTable\""] {
        assert!(body.contains(want), "{want} in the client's ConsumerRunningInfo: {body}");
    }

    let direct = RemotingCommand::request(309)
        .with_ext("consumerGroup", "CID_RMQHA_CALLED")
        .with_ext("clientId", &client_id)
        .with_ext("msgId", &msg_id);
    let asked = Instant::now();
    let r = c.invoke_sync(direct, Duration::from_secs(15)).unwrap();
    assert_eq!(r.code, 207, "CONSUME_MSG_TIMEOUT: {r:?}");
    assert!(asked.elapsed() >= Duration::from_millis(1500), "{:?}", asked.elapsed());
    let remark = r.remark.unwrap_or_default();
    assert!(remark.starts_with(&format!("consumer <CID_RMQHA_CALLED> <{client_id}> Timeout")), "{remark}");

    use std::io::Write;
    consumer.stdin.take().unwrap().write_all(b"stop\n").unwrap();
    assert!(consumer.wait().unwrap().success());
}
