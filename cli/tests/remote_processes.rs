//! Remote producers and consumers against `rmqha broker` processes: a SYNC_MASTER and its
//! SLAVE started from the example properties files. A client written here from the spec
//! produces (its SYNC put is not answered while the slave process is stopped, and SUCCESS
//! once it runs again), `rmqha put` and `rmqha get` drive both brokers, the consumer reads the
//! same messages from the master and from the slave, and the master's route names the slave.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Proc, RMQHA, wait_until};

use rmqha_core::remoting::{ClientConfig, RemotingClient, RemotingCommand};

/// A broker process as `Proc::broker` starts it, with a free HA port and reads from the slave.
fn broker(conf: &str, store: &Path, extra: &[String]) -> Proc {
    let mut sets = vec!["haListenPort=0".to_string(), "slaveReadEnable=true".to_string()];
    sets.extend_from_slice(extra);
    Proc::broker(conf, store, &sets)
}

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
    rmqha_env(args, stdin, &[])
}

/// `rmqha` with environment variables set (and the ACL ones of the caller's cleared).
fn rmqha_env(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut child = Command::new(RMQHA)
        .args(args)
        .env_remove("RMQHA_ACCESS_KEY")
        .env_remove("RMQHA_SECRET_KEY")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command refused on its arguments exits before it reads its input.
    if let Err(e) = child.stdin.take().unwrap().write_all(stdin) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "writing rmqha's input: {e}");
    }
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
    let master = broker("broker-a.properties", md.path(), &[]);
    let (mport, mha) = master.ports();
    let maddr = format!("127.0.0.1:{mport}");
    let slave = broker(
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
    // Bad arguments are refused before anything is sent: --max 0, and a property whose value
    // would smuggle in TAGS through RocketMQ's separator bytes.
    // -1, the documented default of --queue, is accepted as a value too.
    let (ok, out, err) = rmqha(&["put", &maddr, "--topic", "ProcTopic", "--queue", "-1"], b"minus-one");
    assert!(ok && out.starts_with("SEND_OK"), "{out} {err}");
    // Dispatched after its answer: wait for it, so that `before` holds it.
    assert!(wait_until(Duration::from_secs(20), || get_all(&maddr, "ProcTopic", 4)
        .contains(&"minus-one".to_string())));
    let before = get_all(&maddr, "ProcTopic", 4);
    let (ok, _, err) = rmqha(&["put", &maddr, "--topic", "ProcTopic"], b"");
    assert!(!ok && err.contains("standard input is empty"), "{err}");
    let (ok, out, err) =
        rmqha(&["get", &maddr, "--topic", "ProcTopic", "--queue", "0", "--offset", "0", "--max", "0"], b"");
    assert!(!ok && out.is_empty() && err.contains("--max"), "{out} {err}");
    let smuggled = "a=b\u{2}TAGS\u{1}evil";
    let (ok, _, err) = rmqha(&["put", &maddr, "--topic", "ProcTopic", "--property", smuggled], b"x");
    assert!(!ok && err.contains("0x01 or 0x02"), "{err}");
    assert_eq!(get_all(&maddr, "ProcTopic", 4), before, "a refused put stored nothing");

    slave.stop();
    master.stop();
}

/// Runs `rmqha` with `args`, killing it if it has not exited by `limit`; returns whether it
/// succeeded, its stderr, and how long it ran.
fn rmqha_within(args: &[&str], limit: Duration) -> (bool, String, Duration) {
    let t0 = Instant::now();
    let mut child = Command::new(RMQHA)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let exited = wait_until(limit, || child.try_wait().unwrap().is_some());
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    assert!(exited, "rmqha {args:?} still running after {limit:?}");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned(), t0.elapsed())
}

/// A peer that answers with a frame's first bytes and then one byte every 300 ms held
/// `status`, `put` and `get` for as long as it kept sending: each read got the call's whole
/// timeout afresh. The call's deadline now bounds the whole answer.
#[test]
fn a_peer_dripping_its_answer_does_not_hold_a_command_past_its_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = std::io::Read::read(&mut conn, &mut buf);
                // A 64 KiB frame whose 4 KiB JSON header never ends.
                if conn.write_all(&[0, 1, 0, 0, 0, 0, 16, 0]).is_err() {
                    return;
                }
                while conn.write_all(b" ").is_ok() {
                    std::thread::sleep(Duration::from_millis(300));
                }
            });
        }
    });
    let (ok, err, took) = rmqha_within(&["status", &addr], Duration::from_secs(30));
    assert!(!ok && err.contains("timed out after 3.0 s"), "{err}");
    assert!(took < Duration::from_secs(10), "status took {took:?}");
    let (ok, err, took) = rmqha_within(
        &["get", &addr, "--topic", "T", "--queue", "0", "--offset", "0"],
        Duration::from_secs(40),
    );
    assert!(!ok && err.contains("timed out after 10.0 s"), "{err}");
    assert!(took < Duration::from_secs(16), "get took {took:?}");
}

/// An ASYNC_MASTER process holding "a" and "b" at offsets 0 and 1 of queue 0 of topic Bad.
fn master_with_two_messages(store: &Path) -> (Proc, String) {
    let master = broker("broker-a.properties", store, &["brokerRole=ASYNC_MASTER".to_string()]);
    let (port, _) = master.ports();
    let addr = format!("127.0.0.1:{port}");
    let (ok, out, err) = rmqha(&["put", &addr, "--topic", "Bad", "--queue", "0", "--lines"], b"a\nb\n");
    assert!(ok, "{out} {err}");
    wait_dispatched_bad(&addr, 2);
    (master, addr)
}

/// Waits until GET_MAX_OFFSET says queue 0 of topic Bad at `addr` holds `count` messages: a
/// put is answered once stored, and its ConsumeQueue entry follows from the dispatcher.
fn wait_dispatched_bad(addr: &str, count: i64) {
    let c = RemotingClient::new(addr, ClientConfig::default());
    let want = count.to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let max = RemotingCommand::request(30).with_ext("topic", "Bad").with_ext("queueId", 0);
        let r = c.invoke_sync(max, Duration::from_secs(5)).unwrap();
        if r.ext("offset") == Some(want.as_str()) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "queue Bad:0 never reached offset {count}: {r:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `rmqha get --topic Bad` at `addr` with more arguments.
fn get_bad(addr: &str, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["get", addr, "--topic", "Bad"];
    all.extend_from_slice(args);
    rmqha(&all, b"")
}

/// An offset outside the queue exited 0 with a summary line, as an empty read does; a
/// negative queue or offset got clap's "unexpected argument '-1' found". Each is an error
/// naming what was wrong now.
#[test]
fn get_refuses_an_offset_outside_the_queue_and_negative_arguments() {
    let d = tempfile::tempdir().unwrap();
    let (master, addr) = master_with_two_messages(d.path());
    assert!(wait_until(Duration::from_secs(20), || get_bad(&addr, &["--queue", "0", "--offset", "0"])
        .1
        .lines()
        .count()
        == 2));
    // Past the end: an error naming the queue's offsets.
    let (ok, out, err) = get_bad(&addr, &["--queue", "0", "--offset", "100"]);
    assert!(!ok && out.is_empty(), "{out} {err}");
    assert!(err.contains("no offset 100") && err.contains("maxOffset") && err.contains(" 2 "), "{err}");
    // At the end: an empty read, not an error.
    let (ok, out, err) = get_bad(&addr, &["--queue", "0", "--offset", "2"]);
    assert!(ok && out.is_empty() && err.contains("PULL_NOT_FOUND"), "{out} {err}");
    let (ok, _, err) = get_bad(&addr, &["--queue", "-1", "--offset", "0"]);
    assert!(!ok && err.contains("'--queue <QUEUE>'"), "{err}");
    let (ok, _, err) = get_bad(&addr, &["--queue", "0", "--offset", "-1"]);
    assert!(!ok && err.contains("'--offset <OFFSET>'"), "{err}");
    master.stop();
}

/// Bad input to `put` is refused naming what was wrong, and nothing of it is stored:
/// --queue below -1 (stored to a queue the broker picked), --timeout 0 (a timeout "waiting
/// for another call"), a body larger than a request can carry (partly sent, then "Broken
/// pipe"), and a line the broker refuses (which one, and that the lines before it were stored).
#[test]
fn put_refuses_bad_input_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let (master, addr) = master_with_two_messages(d.path());
    let put = |args: &[&str], stdin: &[u8]| {
        let mut all = vec!["put", addr.as_str(), "--topic", "Bad"];
        all.extend_from_slice(args);
        rmqha(&all, stdin)
    };
    let (ok, out, err) = put(&["--queue", "-5"], b"x");
    assert!(!ok && out.is_empty() && err.contains("'--queue <QUEUE>'"), "{out} {err}");
    let (ok, out, err) = put(&["--timeout", "0"], b"x");
    assert!(!ok && out.is_empty() && err.contains("--timeout 0"), "{out} {err}");
    let huge = vec![b'h'; 17 << 20];
    let (ok, out, err) = put(&["--queue", "1"], &huge);
    assert!(!ok && out.is_empty() && err.contains("nothing was sent"), "{out} {err}");
    let mut lines = b"first\n".to_vec();
    lines.extend(std::iter::repeat_n(b'l', 5 << 20));
    lines.extend(b"\nthird\n");
    let (ok, out, err) = put(&["--queue", "2", "--lines"], &lines);
    assert!(!ok && out.lines().count() == 1, "{out} {err}");
    assert!(
        err.contains("(line 2)")
            && err.contains("MESSAGE_ILLEGAL")
            && err.contains("the 1 message(s) before"),
        "{err}"
    );
    // Nothing of the refused puts was stored: queues 1 and 3 are empty, queue 2 holds the
    // first line only.
    assert!(wait_until(Duration::from_secs(20), || get_bad(
        &addr,
        &["--queue", "2", "--offset", "0", "--body-only"]
    )
    .1 == "first\n"));
    for q in ["1", "3"] {
        let (ok, out, err) = get_bad(&addr, &["--queue", q, "--offset", "0"]);
        assert!(ok && out.is_empty(), "{out} {err}");
    }
    master.stop();
}

/// `--property UNIQ_KEY=x` was sent besides the UNIQ_KEY put adds: the broker stored x while
/// put printed its own uniqId, which finds no message; a TAGS or KEYS property besides
/// --tags or --keys, or a key given twice, was sent twice as well. Each is refused now.
#[test]
fn put_refuses_a_property_it_sets_itself() {
    let d = tempfile::tempdir().unwrap();
    let (master, addr) = master_with_two_messages(d.path());
    let put = |args: &[&str]| {
        let mut all = vec!["put", addr.as_str(), "--topic", "Bad", "--queue", "1"];
        all.extend_from_slice(args);
        rmqha(&all, b"x")
    };
    for (args, says) in [
        (&["--property", "UNIQ_KEY=mine"][..], "UNIQ_KEY is set by put"),
        (&["--tags", "a", "--property", "TAGS=b"][..], "TAGS is set by --tags"),
        (&["--keys", "a", "--property", "KEYS=b"][..], "KEYS is set by --keys"),
        (&["--property", "p=1", "--property", "p=2"][..], "p is set by an earlier --property"),
    ] {
        let (ok, out, err) = put(args);
        assert!(!ok && out.is_empty() && err.contains(says), "{args:?}: {out} {err}");
    }
    // A TAGS property alone is the tag; WAIT=false replaces the WAIT put sends by default.
    let (ok, out, err) = put(&["--property", "TAGS=t", "--property", "WAIT=false"]);
    assert!(ok, "{out} {err}");
    let uniq = common::field(&out, "uniqId");
    assert!(wait_until(Duration::from_secs(20), || {
        let out = get_bad(&addr, &["--queue", "1", "--offset", "0"]).1;
        out.contains(&format!("uniqId={uniq} tags=t "))
    }));
    master.stop();
}

/// `rmqha get --sql` reads with a SQL92 expression over the messages' properties from a
/// broker with `enablePropertyFilter=true`; an expression that does not compile is an error
/// giving the broker's reason.
#[test]
fn get_filters_by_a_sql92_expression() {
    let d = tempfile::tempdir().unwrap();
    let master = broker(
        "broker-a.properties",
        d.path(),
        &["brokerRole=ASYNC_MASTER".to_string(), "enablePropertyFilter=true".to_string()],
    );
    let addr = format!("127.0.0.1:{}", master.ports().0);
    for (i, color) in [(1, "red"), (2, "blue"), (3, "red"), (4, "green")] {
        let (n, c) = (format!("n={i}"), format!("color={color}"));
        let args = ["put", addr.as_str(), "--topic", "S", "--queue", "0", "--property", &n, "--property", &c];
        let (ok, out, err) = rmqha(&args, format!("m{i}").as_bytes());
        assert!(ok, "{out} {err}");
    }
    let get = |sql: &str| {
        rmqha(
            &["get", &addr, "--topic", "S", "--queue", "0", "--offset", "0", "--body-only", "--sql", sql],
            b"",
        )
    };
    assert!(wait_until(Duration::from_secs(20), || get("n > 0").1.lines().count() == 4));
    let (ok, out, err) = get("color = 'red' AND n > 1");
    assert!(ok, "{err}");
    assert_eq!(out, "m3\n");
    let (ok, out, err) = get("color IN ('blue', 'green') OR n IS NULL");
    assert!(ok, "{err}");
    assert_eq!(out, "m2\nm4\n");
    let (ok, out, err) = get("n >");
    assert!(!ok && out.is_empty() && err.contains("SUBSCRIPTION_PARSE_FAILED"), "{out} {err}");
    let (ok, _, err) = rmqha(
        &["get", &addr, "--topic", "S", "--queue", "0", "--offset", "0", "--tags", "A", "--sql", "n > 0"],
        b"",
    );
    assert!(!ok && err.contains("--sql"), "{err}");
    master.stop();
}

/// `put`, `get` and `status` sign their requests for a broker with `aclEnable=true` when given
/// an account's keys (`--access-key`, and the secret as RMQHA_SECRET_KEY); without them the
/// broker refuses each, and a wrong secret is named as such.
#[test]
fn commands_sign_their_requests_for_a_broker_with_acl() {
    let d = tempfile::tempdir().unwrap();
    let acl = d.path().join("plain_acl.yml");
    std::fs::write(
        &acl,
        "accounts:\n  - accessKey: cliAK0001\n    secretKey: cli-secret-0001\n    \
         defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: SUB\n",
    )
    .unwrap();
    let master = broker(
        "broker-a.properties",
        &d.path().join("store"),
        &[
            "brokerRole=ASYNC_MASTER".to_string(),
            "aclEnable=true".to_string(),
            format!("aclFilePath={}", acl.display()),
        ],
    );
    let (port, _) = master.ports();
    let addr = format!("127.0.0.1:{port}");
    let secret = [("RMQHA_SECRET_KEY", "cli-secret-0001")];
    let put = ["put", addr.as_str(), "--topic", "Signed", "--queue", "0"];
    let signed_put: Vec<&str> = put.iter().copied().chain(["--access-key", "cliAK0001"]).collect();

    let (ok, out, err) = rmqha(&put, b"unsigned");
    assert!(!ok && err.contains("No accessKey"), "{out} {err}");
    let (ok, out, err) = rmqha_env(&signed_put, b"wrong", &[("RMQHA_SECRET_KEY", "not-the-secret")]);
    assert!(!ok && err.contains("Check signature failed"), "{out} {err}");
    let (ok, out, err) = rmqha(&signed_put, b"half");
    assert!(!ok && err.contains("go together"), "{out} {err}");
    let (ok, out, err) = rmqha_env(&signed_put, b"signed-body", &secret);
    assert!(ok && out.contains("SEND_OK"), "{out} {err}");

    let get = ["get", addr.as_str(), "--topic", "Signed", "--queue", "0", "--offset", "0", "--body-only"];
    let (ok, out, err) = rmqha(&get, b"");
    assert!(!ok && err.contains("No accessKey"), "{out} {err}");
    let signed_get: Vec<&str> = get.iter().copied().chain(["--access-key", "cliAK0001"]).collect();
    assert!(
        wait_until(Duration::from_secs(20), || rmqha_env(&signed_get, b"", &secret).1 == "signed-body\n"),
        "{:?}",
        rmqha_env(&signed_get, b"", &secret)
    );

    let (ok, out, err) = rmqha(&["status", addr.as_str()], b"");
    assert!(!ok && err.contains("No accessKey"), "{out} {err}");
    let (ok, out, err) = rmqha_env(&["status", addr.as_str(), "--access-key", "cliAK0001"], b"", &secret);
    assert!(ok && out.contains("ASYNC_MASTER"), "{out} {err}");
    master.stop();
}

/// `rmqha progress`: a group's committed offsets against the queues' max offsets, as
/// GET_CONSUME_STATS answers them.
#[test]
fn progress_prints_a_groups_lag_per_queue() {
    let dir = tempfile::tempdir().unwrap();
    let (_master, addr) = master_with_two_messages(dir.path());
    let (ok, out, err) = rmqha(&["put", &addr, "--topic", "Bad", "--queue", "0"], b"c");
    assert!(ok, "{out} {err}");
    wait_dispatched_bad(&addr, 3);
    let c = RemotingClient::new(&addr, ClientConfig::default());
    let commit = RemotingCommand::request(15)
        .with_ext("consumerGroup", "lagging")
        .with_ext("topic", "Bad")
        .with_ext("queueId", 0)
        .with_ext("commitOffset", 1);
    assert_eq!(c.invoke_sync(commit, Duration::from_secs(5)).unwrap().code, 0);

    let (ok, out, err) = rmqha(&["progress", &addr, "--group", "lagging"], b"");
    assert!(ok, "{out} {err}");
    let row: Vec<&str> =
        out.lines().find(|l| l.starts_with("Bad ")).unwrap_or_default().split_whitespace().collect();
    // topic, queue, broker offset, consumer offset, lag, last consumed ("N s ago").
    assert_eq!(row[..5], ["Bad", "0", "3", "1", "2"], "{out}");
    assert_eq!(row[6..], ["s", "ago"], "the store time of the message at offset 0 is known: {out}");
    assert!(out.contains("total lag 2 over "), "{out}");

    let (ok, out, _) = rmqha(&["progress", &addr, "--group", "lagging", "--topic", "Bad", "--json"], b"");
    assert!(ok);
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!((first["queueId"].as_i64(), first["lag"].as_i64()), (Some(0), Some(2)), "{out}");

    let (ok, out, _) = rmqha(&["progress", &addr, "--group", "nobody"], b"");
    assert!(ok && out.contains("group nobody has no committed offsets"), "{out}");
}

/// `rmqha stats`: each topic's messages in and each consuming group's lag and messages out,
/// from VIEW_BROKER_STATS_DATA (snapshots every 10 s) and GET_CONSUME_STATS.
#[test]
fn stats_print_each_topics_messages_in_and_each_groups_lag_and_messages_out() {
    let dir = tempfile::tempdir().unwrap();
    let (_master, addr) = master_with_two_messages(dir.path());
    let (ok, out, err) = get_bad(&addr, &["--queue", "0", "--offset", "0", "--group", "reader"]);
    assert!(ok && out.lines().count() == 2, "{out} {err}");
    let c = RemotingClient::new(&addr, ClientConfig::default());
    let commit = RemotingCommand::request(15)
        .with_ext("consumerGroup", "reader")
        .with_ext("topic", "Bad")
        .with_ext("queueId", 0)
        .with_ext("commitOffset", 1);
    assert_eq!(c.invoke_sync(commit, Duration::from_secs(5)).unwrap().code, 0);
    // The topic and the group's first snapshot come within 10 s.
    let row = || {
        let (ok, out, err) = rmqha(&["stats", &addr, "--json"], b"");
        assert!(ok, "{out} {err}");
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["topic"] == "Bad" && v["group"] == "reader")
    };
    assert!(
        wait_until(Duration::from_secs(25), || row().is_some_and(|r| r["outMsg24Hour"] == 2)),
        "{:?}",
        row()
    );
    let r = row().unwrap();
    assert_eq!((r["inMsg24Hour"].as_u64(), r["lag"].as_i64()), (Some(2), Some(1)), "{r}");
    let (ok, out, err) = rmqha(&["stats", &addr], b"");
    assert!(ok, "{out} {err}");
    let cols: Vec<&str> =
        out.lines().find(|l| l.starts_with("Bad ")).unwrap_or_default().split_whitespace().collect();
    // topic, group, lag, in msgs/s, in last 24h, out msgs/s, out last 24h.
    assert_eq!((cols[0], cols[1], cols[2], cols[4], cols[6]), ("Bad", "reader", "1", "2", "2"), "{out}");
    let (ok, out, _) = rmqha(&["stats", &addr, "--topic", "Nothing"], b"");
    assert!(ok && out.lines().any(|l| l.starts_with("Nothing ") && l.contains(" - ")), "{out}");
}

/// `rmqha reset-offset`: a group's offsets moved to a store time, the end, and back.
#[test]
fn reset_offset_moves_a_groups_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (_master, addr) = master_with_two_messages(dir.path());
    let c = RemotingClient::new(&addr, ClientConfig::default());
    let commit = RemotingCommand::request(15)
        .with_ext("consumerGroup", "rewinding")
        .with_ext("topic", "Bad")
        .with_ext("queueId", 0)
        .with_ext("commitOffset", 2);
    assert_eq!(c.invoke_sync(commit, Duration::from_secs(5)).unwrap().code, 0);
    let committed = |queue: i32| -> i64 {
        let q = RemotingCommand::request(14)
            .with_ext("consumerGroup", "rewinding")
            .with_ext("topic", "Bad")
            .with_ext("queueId", queue);
        let r = c.invoke_sync(q, Duration::from_secs(5)).unwrap();
        assert_eq!(r.code, 0, "{r:?}");
        r.ext("offset").unwrap().parse().unwrap()
    };

    // Back to the first message stored at or after an hour ago: the start of queue 0.
    let (ok, out, err) =
        rmqha(&["reset-offset", &addr, "--group", "rewinding", "--topic", "Bad", "--ago", "1h"], b"");
    assert!(ok, "{out} {err}");
    assert!(out.contains("Bad queue 0: offset 0"), "{out}");
    assert!(out.contains("group rewinding reset on topic Bad to store time "), "{out}");
    assert!(err.contains("no consumer of group rewinding is online"), "{err}");
    assert_eq!(committed(0), 0);

    // To the end, as JSON lines; then a rewind-only reset to the end moves nothing back.
    let (ok, out, err) = rmqha(
        &["reset-offset", &addr, "--group", "rewinding", "--topic", "Bad", "--to", "end", "--json"],
        b"",
    );
    assert!(ok, "{out} {err}");
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!((first["queueId"].as_i64(), first["offset"].as_i64()), (Some(0), Some(2)), "{out}");
    assert_eq!(committed(0), 2);
    let (ok, out, err) = rmqha(
        &[
            "reset-offset",
            &addr,
            "--group",
            "rewinding",
            "--topic",
            "Bad",
            "--to",
            "2026-01-01T00:00:00Z",
            "--rewind-only",
        ],
        b"",
    );
    assert!(ok, "{out} {err}");
    assert_eq!(committed(0), 0, "every message is newer than 2026-01-01: the start");

    // Refusals name what was wrong and exit non-zero.
    let (ok, _, err) =
        rmqha(&["reset-offset", &addr, "--group", "nobody", "--topic", "Bad", "--to", "now"], b"");
    assert!(!ok && err.contains("the consumer group <nobody> has no committed offset"), "{err}");
    let (ok, _, err) =
        rmqha(&["reset-offset", &addr, "--group", "rewinding", "--topic", "Bad", "--to", "soon"], b"");
    assert!(!ok && err.contains("--to \"soon\" is not end, now"), "{err}");
}

/// `rmqha config`: the broker's settings, and `--set brokerPermission=4` draining its writes;
/// the broker writes the change into its properties file, so a restart keeps it.
#[test]
fn config_shows_settings_and_a_drain_outlives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("broker-a.properties");
    let original = std::fs::read_to_string(common::examples().join("broker-a.properties")).unwrap();
    std::fs::write(&conf, &original).unwrap();
    let store = dir.path().join("store");
    let sets = ["brokerRole=ASYNC_MASTER".to_string(), "haListenPort=0".to_string()];
    let master = Proc::broker_from(&conf, &store, &sets);
    let addr = format!("127.0.0.1:{}", master.ports().0);

    let (ok, out, err) = rmqha(&["config", &addr, "--key", "brokerPermission", "--key", "brokerName"], b"");
    assert!(ok, "{out} {err}");
    assert_eq!(out, "brokerName=broker-a\nbrokerPermission=6\n");
    let (ok, out, err) = rmqha(&["config", &addr, "--json"], b"");
    assert!(ok, "{out} {err}");
    let all: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(all["brokerRole"], "ASYNC_MASTER", "{out}");

    let (ok, out, err) = rmqha(&["config", &addr, "--set", "brokerPermission=4"], b"");
    assert!(ok, "{out} {err}");
    assert_eq!(out, "brokerPermission=4\n");
    let (ok, out, _) = rmqha(&["put", &addr, "--topic", "Drained", "--queue", "0"], b"x");
    assert!(!ok && out.is_empty(), "a drained broker takes no sends");
    // Refused keys are named, and change nothing.
    let (ok, out, err) =
        rmqha(&["config", &addr, "--set", "brokerPermission=6", "--set", "listenPort=1"], b"");
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("listenPort cannot change while the broker runs"), "{err}");
    let (ok, _, err) = rmqha(&["config", &addr, "--key", "noSuchKey"], b"");
    assert!(!ok && err.contains("has no setting noSuchKey"), "{err}");

    // The file now says 4, the rest of it as it was; a restart keeps the drain.
    let text = std::fs::read_to_string(&conf).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("brokerPermission")).collect();
    assert_eq!(lines, ["brokerPermission=4"], "{text}");
    assert_eq!(
        text.lines().filter(|l| !l.contains("brokerPermission")).collect::<Vec<_>>(),
        original.lines().filter(|l| !l.contains("brokerPermission")).collect::<Vec<_>>()
    );
    master.stop();
    let master = Proc::broker_from(&conf, &store, &sets);
    let addr = format!("127.0.0.1:{}", master.ports().0);
    let (ok, out, err) = rmqha(&["config", &addr, "--key", "brokerPermission"], b"");
    assert!(ok, "{out} {err}");
    assert_eq!(out, "brokerPermission=4\n");
    master.stop();
}
