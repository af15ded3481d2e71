//! Remote producers and consumers against `rmqha broker` processes: a SYNC_MASTER and its
//! SLAVE started from the example properties files. A client written here from the spec
//! produces (its SYNC put is not answered while the slave process is stopped, and SUCCESS
//! once it runs again), `rmqha put` and `rmqha get` drive both brokers, the consumer reads the
//! same messages from the master and from the slave, and the master's route names the slave.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rmqha_core::remoting::{ClientConfig, RemotingClient, RemotingCommand};

const RMQHA: &str = env!("CARGO_BIN_EXE_rmqha");

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    fn broker(conf: &str, store: &Path, extra: &[String]) -> Proc {
        let mut cmd = Command::new(RMQHA);
        cmd.arg("broker").arg("-c").arg(examples().join(conf));
        for s in [
            format!("storePathRootDir={}", store.display()),
            "listenPort=0".into(),
            "haListenPort=0".into(),
            "bindAddress=127.0.0.1".into(),
            "brokerIP1=127.0.0.1".into(),
            "mappedFileSizeCommitLog=1048576".into(),
            "slaveReadEnable=true".into(),
        ]
        .iter()
        .chain(extra)
        {
            cmd.arg("--set").arg(s);
        }
        cmd.env("RMQHA_LOG", "warn");
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("spawn");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    /// The `listenPort=` and `haPort=` of the start-up line.
    fn ports(&self) -> (u16, u16) {
        let line = self.lines.recv_timeout(Duration::from_secs(30)).expect("a start-up line");
        assert!(line.contains("rmqha broker started"), "{line}");
        let field = |k: &str| -> u16 {
            line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{k}="))).unwrap().parse().unwrap()
        };
        (field("listenPort"), field("haPort"))
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Stops the process with SIGSTOP and waits until every one of its threads is stopped
    /// (kill(2) only queues the signal; a thread on another CPU runs on for a moment).
    fn freeze(&self) {
        self.signal(libc::SIGSTOP);
        let task = format!("/proc/{}/task", self.child.id());
        let all_stopped = || {
            std::fs::read_dir(&task).unwrap().all(|t| {
                let stat = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap_or_default();
                // The state is the field after the parenthesised command name.
                stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T'))
            })
        };
        assert!(wait_until(Duration::from_secs(10), all_stopped), "the process never stopped");
    }

    fn stop(mut self) {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                assert!(s.success(), "exit status {s:?}");
                return;
            }
            assert!(Instant::now() < deadline, "broker did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// SEND_MESSAGE_V2 with SendMessageRequestHeaderV2's one-letter fields.
fn send(topic: &str, body: &str) -> RemotingCommand {
    RemotingCommand::request(310)
        .with_ext("a", "proc_pg")
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", -1)
        .with_ext("f", 0)
        .with_ext("g", 0)
        .with_ext("h", 0)
        .with_ext("i", "WAIT\u{1}true\u{2}")
        .with_body(body.as_bytes().to_vec())
}

fn route(addr: &str, topic: &str) -> serde_json::Value {
    let c = RemotingClient::new(addr, ClientConfig::default());
    let r = c
        .invoke_sync(RemotingCommand::request(105).with_ext("topic", topic), Duration::from_secs(5))
        .unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    serde_json::from_slice(&r.body).unwrap()
}

fn rmqha(args: &[&str], stdin: &[u8]) -> (bool, String, String) {
    let mut child = Command::new(RMQHA)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every body of `topic` on the broker at `addr`, queue by queue, through `rmqha get`.
fn get_all(addr: &str, topic: &str, queues: i32) -> Vec<String> {
    let mut all = Vec::new();
    for q in 0..queues {
        let (ok, out, err) = rmqha(
            &[
                "get",
                addr,
                "--topic",
                topic,
                "--queue",
                &q.to_string(),
                "--offset",
                "0",
                "--max",
                "1000",
                "--body-only",
            ],
            b"",
        );
        assert!(ok, "rmqha get failed: {err}");
        all.extend(out.lines().map(str::to_string));
    }
    all.sort();
    all
}

#[test]
fn remote_clients_produce_to_a_sync_master_process_and_consume_from_it_and_its_slave() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Proc::broker("broker-a.properties", md.path(), &[]);
    let (mport, mha) = master.ports();
    let maddr = format!("127.0.0.1:{mport}");
    let slave = Proc::broker(
        "broker-a-s.properties",
        sd.path(),
        &[format!("haMasterAddress=127.0.0.1:{mha}"), format!("masterAddress={maddr}")],
    );
    let (sport, _) = slave.ports();
    let saddr = format!("127.0.0.1:{sport}");
    // The slave registers with the master and appears in its routes.
    assert!(
        wait_until(Duration::from_secs(20), || route(&maddr, "TBW102")["brokerDatas"][0]["brokerAddrs"]["1"]
            == saddr.as_str()),
        "the master never routed to the slave: {}",
        route(&maddr, "TBW102")
    );
    // Routes come from the slave's registration; a SYNC put needs its HA stream too.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let (_, out, _) = rmqha(&["status", &maddr], b"");
            out.contains("transferring=true")
        }),
        "the slave never streamed from the master: {}",
        rmqha(&["status", &maddr], b"").1
    );

    // A client from the spec: 20 messages, the topic created from TBW102 on the first.
    let producer = RemotingClient::new(maddr.clone(), ClientConfig::default());
    let mut sent = Vec::new();
    for i in 0..20 {
        let body = format!("spec-client-{i:02}");
        let r = producer.invoke_sync(send("ProcTopic", &body), Duration::from_secs(10)).unwrap();
        assert_eq!(r.code, 0, "{r:?}");
        sent.push(body);
    }

    // With the slave process stopped, a SYNC put is not answered; once it runs, SUCCESS.
    slave.freeze();
    let pending = {
        let maddr = maddr.clone();
        let t0 = Instant::now();
        std::thread::spawn(move || {
            let c = RemotingClient::new(maddr, ClientConfig::default());
            let r = c.invoke_sync(send("ProcTopic", "while-stopped"), Duration::from_secs(10)).unwrap();
            (r.code, t0.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(700));
    if pending.is_finished() {
        panic!("a SYNC_MASTER answered while its only slave was stopped: {:?}", pending.join());
    }
    slave.signal(libc::SIGCONT);
    let (code, took) = pending.join().unwrap();
    assert_eq!(code, 0, "answered SUCCESS once the slave acked (after {took:?})");
    assert!(took >= Duration::from_millis(700));
    sent.push("while-stopped".into());

    // `rmqha put`, one message per line.
    let (ok, out, err) = rmqha(
        &["put", &maddr, "--topic", "ProcTopic", "--tags", "cli", "--keys", "k1,k2", "--lines"],
        b"cli-1\ncli-2\n",
    );
    assert!(ok, "rmqha put failed: {err}");
    assert_eq!(out.lines().filter(|l| l.starts_with("SEND_OK msgId=")).count(), 2, "{out}");
    sent.extend(["cli-1".to_string(), "cli-2".to_string()]);
    sent.sort();

    // `rmqha get` from the master and from the slave, once each has dispatched everything
    // (ConsumeQueues are built after a put is answered, as in RocketMQ).
    assert!(
        wait_until(Duration::from_secs(20), || get_all(&maddr, "ProcTopic", 4) == sent),
        "the master served {:?}",
        get_all(&maddr, "ProcTopic", 4)
    );
    assert!(
        wait_until(Duration::from_secs(20), || get_all(&saddr, "ProcTopic", 4) == sent),
        "the slave served {:?}",
        get_all(&saddr, "ProcTopic", 4)
    );
    // The text form names the tags and keys; --tags filters.
    let mut tagged = Vec::new();
    for q in 0..4 {
        let q = q.to_string();
        let args = [
            "get",
            &saddr,
            "--topic",
            "ProcTopic",
            "--queue",
            &q,
            "--offset",
            "0",
            "--max",
            "1000",
            "--tags",
            "cli",
        ];
        let (ok, out, err) = rmqha(&args, b"");
        assert!(ok, "{err}");
        tagged.extend(out.lines().map(str::to_string));
    }
    assert_eq!(tagged.len(), 2, "{tagged:?}");
    for l in &tagged {
        assert!(l.contains("tags=cli") && l.contains("keys=\"k1 k2\"") && l.contains("body=\"cli-"), "{l}");
    }
    // A slave refuses `rmqha put`; an unknown topic is an error for `rmqha get`.
    let (ok, _, err) = rmqha(&["put", &saddr, "--topic", "ProcTopic"], b"x");
    assert!(!ok && err.contains("SERVICE_NOT_AVAILABLE"), "{err}");
    let (ok, _, err) = rmqha(&["get", &maddr, "--topic", "Nope", "--queue", "0", "--offset", "0"], b"");
    assert!(!ok && err.contains("TOPIC_NOT_EXIST"), "{err}");

    slave.stop();
    master.stop();
}
