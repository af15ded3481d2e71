//! `rmqha broker` processes started from the example properties files: they replicate,
//! `rmqha status` shows it, SIGTERM shuts down cleanly, and after a SIGKILL of a master whose
//! producer runs inside it, every message acknowledged PUT_OK is on the slave and, after
//! recovery, on the master. The demo passes.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Proc, RMQHA, examples, field, wait_until};

use rmqha_core::{Broker, BrokerConfig, Message, MessageStore, PutStatus};

fn commit_log_files(d: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    v.sort();
    v
}

fn status(port: &str) -> String {
    let out = Command::new(RMQHA).args(["status", &format!("127.0.0.1:{port}")]).output().unwrap();
    assert!(out.status.success(), "status failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn two_broker_processes_replicate_and_stop_cleanly() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut master = Proc::broker("broker-a.properties", md.path(), &["haListenPort=0".into()]);
    let line = master.wait_line("rmqha broker started", Duration::from_secs(20));
    let (mport, mha) = (field(&line, "listenPort"), field(&line, "haPort"));
    let mut slave = Proc::broker(
        "broker-a-s.properties",
        sd.path(),
        &[format!("haMasterAddress=127.0.0.1:{mha}"), format!("masterAddress=127.0.0.1:{mport}")],
    );
    let sline = slave.wait_line("rmqha broker started", Duration::from_secs(20));
    let sport = field(&sline, "listenPort");
    assert!(
        wait_until(Duration::from_secs(20), || status(&mport).contains("slaves   1")),
        "master status never showed the slave:\n{}",
        status(&mport)
    );
    let st = status(&sport);
    assert!(st.contains("SLAVE") && st.contains("connected: true"), "{st}");
    // The slave names its master's remoting address (config sync) and its HA address.
    assert!(
        st.contains(&format!("master   127.0.0.1:{mport} (HA 127.0.0.1:{mha}, connected: true)")),
        "{st}"
    );
    // Its own acks, not "slave-ack"; no HA port of its own.
    assert!(st.contains("  acked ") && !st.contains("slave-ack") && !st.contains("  HA 0"), "{st}");
    let mst = status(&mport);
    assert!(mst.contains("SYNC_MASTER"), "{mst}");
    // Into a pipe nobody reads (`rmqha status | head -1`): ended by SIGPIPE, not a panic.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(RMQHA)
        .args(["status", &format!("127.0.0.1:{mport}")])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&out.status), Some(libc::SIGPIPE), "{err}");
    // The disk line is df's Use% of the store's file system (other writers may move it by one).
    let df = Command::new("df").arg("--output=pcent").arg(md.path()).output().unwrap();
    let df_pct: i64 = String::from_utf8_lossy(&df.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    let disk = mst.lines().find(|l| l.starts_with("disk ")).unwrap_or_else(|| panic!("no disk line:\n{mst}"));
    let shown: i64 = disk.split_whitespace().nth(2).unwrap().trim_end_matches('%').parse().unwrap();
    assert!((shown - df_pct).abs() <= 1, "status says {disk:?}, df says {df_pct}%");
    assert!(!mst.contains("FULL"), "{mst}");
    // Messages through `rmqha put`: each SEND_OK from this SYNC_MASTER means the slave has it.
    let mut put = Command::new(RMQHA)
        .args(["put", &format!("127.0.0.1:{mport}"), "--topic", "TopicTest", "--queue", "0", "--lines"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: String = (0..50).map(|i| format!("line-{i}\n")).collect();
    put.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    let out = put.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "put failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().filter(|l| l.starts_with("SEND_OK")).count(), 50, "{stdout}");
    // The traffic line: the puts show in the rate once the broker sampled them (every second).
    let traffic = || {
        let st = status(&mport);
        st.lines()
            .find(|l| l.starts_with("traffic "))
            .unwrap_or_else(|| panic!("no traffic line:\n{st}"))
            .to_string()
    };
    assert!(
        wait_until(Duration::from_secs(10), || !traffic().starts_with("traffic  in 0.0 ")),
        "{}",
        traffic()
    );
    let out = Command::new(RMQHA).args(["status", &format!("127.0.0.1:{mport}"), "--json"]).output().unwrap();
    let table: std::collections::BTreeMap<String, String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(table["msgPutTotalTodayNow"], "50", "{table:?}");

    for p in [&mut slave, &mut master] {
        p.signal(libc::SIGTERM);
        let s = p.wait_exit(Duration::from_secs(20));
        assert!(s.success(), "exit status {s:?}");
    }
    assert!(!md.path().join("abort").exists(), "SIGTERM must leave no abort file");
    assert!(!sd.path().join("abort").exists());
    // The slave's CommitLog is the master's, byte for byte.
    let (m, s) = (commit_log_files(md.path()), commit_log_files(sd.path()));
    assert!(!m.is_empty() && m.iter().any(|(_, b)| b.windows(7).any(|w| w == b"line-49")));
    assert!(m == s, "the slave's CommitLog files differ from the master's");
    // The next start is a normal recovery.
    let mut c = BrokerConfig::default();
    c.set("storePathRootDir", md.path().to_str().unwrap()).unwrap();
    c.set("mappedFileSizeCommitLog", "1048576").unwrap();
    let store = MessageStore::open(c).unwrap();
    assert!(store.recovery().last_exit_ok);
}

/// Child mode: a SYNC_MASTER embedded in this process, putting forever and logging every
/// PUT_OK as `phy queue_offset i` to the file named by RMQHA_ACK_LOG.
fn embedded_producer(store: &str, log: &str) -> ! {
    let mut c = BrokerConfig::from_properties_file(examples().join("broker-a.properties")).unwrap();
    for (k, v) in [
        ("storePathRootDir", store),
        ("listenPort", "0"),
        ("haListenPort", "0"),
        ("bindAddress", "127.0.0.1"),
        ("brokerIP1", "127.0.0.1"),
        ("mappedFileSizeCommitLog", "1048576"),
        ("slaveTimeout", "1000"),
    ] {
        c.set(k, v).unwrap();
    }
    let broker = Broker::start_master(c).unwrap();
    println!("embedded master haPort={}", broker.ha_port());
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    for i in 0u64.. {
        let m = Message::new("KillTopic", format!("body-{i}").into_bytes()).with_queue((i % 4) as i32);
        let r = broker.put_message_sync(&m).unwrap();
        if r.status == PutStatus::PutOk {
            writeln!(out, "{} {} {}", r.phy_offset, r.queue_offset, i).unwrap();
            out.flush().unwrap();
        }
    }
    unreachable!()
}

#[test]
fn sigkill_of_master_loses_no_acknowledged_message() {
    if let (Ok(store), Ok(log)) = (std::env::var("RMQHA_CHILD_STORE"), std::env::var("RMQHA_ACK_LOG")) {
        embedded_producer(&store, &log);
    }
    let (md, ld) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (sd, sd2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = ld.path().join("acked.log");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "sigkill_of_master_loses_no_acknowledged_message",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RMQHA_CHILD_STORE", md.path())
    .env("RMQHA_ACK_LOG", &log)
    .env("RMQHA_LOG", "error");
    let mut master = Proc::spawn(cmd);
    let line = master.wait_line("embedded master", Duration::from_secs(30));
    let mha = field(&line, "haPort");
    // Two slave processes.
    let mut slaves: Vec<Proc> = [sd.path(), sd2.path()]
        .iter()
        .map(|d| {
            Proc::broker(
                "broker-a-s.properties",
                d,
                &[format!("haMasterAddress=127.0.0.1:{mha}"), "masterAddress=".into()],
            )
        })
        .collect();
    for s in &slaves {
        s.wait_line("rmqha broker started", Duration::from_secs(20));
    }
    let count = || std::fs::read_to_string(&log).map(|s| s.lines().count()).unwrap_or(0);
    assert!(wait_until(Duration::from_secs(30), || count() >= 3000), "producer acked only {}", count());
    master.signal(libc::SIGKILL);
    master.wait_exit(Duration::from_secs(10));
    for s in &mut slaves {
        s.signal(libc::SIGTERM);
        assert!(s.wait_exit(Duration::from_secs(20)).success());
    }

    let acked: Vec<(i64, i64, u64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().count() == 3) // a line cut by the kill is not an ack
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            (v[0].parse().unwrap(), v[1].parse().unwrap(), v[2].parse().unwrap())
        })
        .collect();
    assert!(acked.len() >= 3000);
    // Each acked message is on at least one slave (SYNC_MASTER waits for one ack). Both
    // slaves' logs are prefixes of the master's, so the longer one holds them all.
    let slave_end = |d: &Path| {
        let mut c = BrokerConfig::default();
        c.set("storePathRootDir", d.to_str().unwrap()).unwrap();
        c.set("mappedFileSizeCommitLog", "1048576").unwrap();
        MessageStore::open(c).unwrap().recovery().recovered_offset
    };
    let best = if slave_end(sd.path()) >= slave_end(sd2.path()) { sd.path() } else { sd2.path() };
    for d in [sd.path(), sd2.path()] {
        for (name, bytes) in commit_log_files(d) {
            let m =
                std::fs::read(md.path().join("commitlog").join(&name)).expect("master has the slave's file");
            let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            assert_eq!(&bytes[..end], &m[..end], "slave file {name} is not a prefix of the master's");
        }
    }
    for (name, dir) in [("slave", best), ("master", md.path())] {
        let mut c = BrokerConfig::default();
        c.set("storePathRootDir", dir.to_str().unwrap()).unwrap();
        c.set("mappedFileSizeCommitLog", "1048576").unwrap();
        let store = MessageStore::open(c).unwrap();
        if name == "master" {
            assert!(!store.recovery().last_exit_ok, "a SIGKILLed master recovers abnormally");
        }
        store.start().unwrap();
        for (phy, qo, i) in &acked {
            let m =
                store.message_at(*phy).unwrap_or_else(|| panic!("{name}: acked message {i} at {phy} lost"));
            assert_eq!(m.body, format!("body-{i}").into_bytes(), "{name}: message {i}");
            assert_eq!(m.queue_offset, *qo);
        }
        // The queues serve them too.
        let (phy, qo, i) = acked.last().unwrap();
        let q = (*i % 4) as i32;
        let got = store.get_messages("KillTopic", q, *qo, 1).messages();
        assert_eq!(got.first().map(|m| m.phy_offset), Some(*phy), "{name}: queue read");
        store.shutdown();
    }
}

#[test]
fn demo_passes() {
    let out = Command::new(RMQHA)
        .args(["demo", "--messages", "3000", "--body-size", "256", "--file-size", "1048576"])
        .env("RMQHA_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("byte-identical") && stdout.contains("demo OK"), "{stdout}");
}

/// Runs `rmqha broker` expecting it to fail at start-up; returns its stderr.
fn failing_start(args: &[String]) -> String {
    let out = Command::new(RMQHA)
        .arg("broker")
        .args(args)
        .env("RMQHA_LOG", "error")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "expected a start-up failure");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn start_up_errors_are_one_clear_line() {
    let d = tempfile::tempdir().unwrap();
    // A bad value: file, line, key and value.
    let bad = d.path().join("bad.properties");
    std::fs::write(&bad, "brokerName=x\n# comment\nlistenPort = nine\n").unwrap();
    let err = failing_start(&["-c".into(), bad.display().to_string()]);
    let last = err.lines().last().unwrap();
    assert!(
        last.contains("bad.properties:3") && last.contains("listenPort") && last.contains("nine"),
        "{err}"
    );
    // A rule between keys: the file, the key and why.
    let slave = d.path().join("slave0.properties");
    std::fs::write(&slave, "brokerRole=SLAVE\nbrokerId=0\nhaMasterAddress=127.0.0.1:1\n").unwrap();
    let err = failing_start(&["-c".into(), slave.display().to_string()]);
    let last = err.lines().last().unwrap();
    assert!(last.contains("slave0.properties") && last.contains("brokerId"), "{err}");
    // A missing file.
    let err = failing_start(&["-c".into(), d.path().join("nope.properties").display().to_string()]);
    assert!(err.contains("nope.properties"), "{err}");
    // A locked store: the second broker on the same directory names the lock.
    let store = d.path().join("store");
    let first = Proc::broker("broker-a.properties", &store, &["haListenPort=0".into()]);
    let line = first.wait_line("rmqha broker started", Duration::from_secs(20));
    let port = field(&line, "listenPort");
    let conf = examples().join("broker-a.properties").display().to_string();
    let set = |kv: String| ["--set".to_string(), kv];
    let mut args = vec!["-c".to_string(), conf.clone()];
    args.extend(set(format!("storePathRootDir={}", store.display())));
    args.extend(set("listenPort=0".into()));
    args.extend(set("haListenPort=0".into()));
    args.extend(set("bindAddress=127.0.0.1".into()));
    let err = failing_start(&args);
    // It names the process holding the lock.
    assert!(
        err.contains("lock") && err.contains(&format!("another broker (pid {})", first.child.id())),
        "{err}"
    );
    // A port in use: names the address.
    let mut args = vec!["-c".to_string(), conf];
    args.extend(set(format!("storePathRootDir={}", d.path().join("other").display())));
    args.extend(set(format!("listenPort={port}")));
    args.extend(set("haListenPort=0".into()));
    args.extend(set("bindAddress=127.0.0.1".into()));
    args.extend(set("fastListenEnable=false".into()));
    let err = failing_start(&args);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("rmqha:")).count(), 1, "{err}");
}

#[test]
fn overrides_fix_a_file_and_hang_up_or_a_closed_pipe_still_stop_cleanly() {
    let d = tempfile::tempdir().unwrap();
    // A file breaking a rule between keys (a SLAVE with brokerId 0, a listenPort that leaves
    // no default HA port) is fixed by --set: the rules are checked after the overrides.
    let conf = d.path().join("slave.properties");
    std::fs::write(&conf, "brokerRole=SLAVE\nbrokerId=0\nlistenPort=65535\nhaMasterAddress=127.0.0.1:1\n")
        .unwrap();
    let store = d.path().join("store");
    let mut cmd = Command::new(RMQHA);
    cmd.arg("broker").arg("-c").arg(&conf).env("RMQHA_LOG", "error");
    for kv in [
        "brokerId=1".to_string(),
        "listenPort=0".into(),
        "haListenPort=0".into(),
        "bindAddress=127.0.0.1".into(),
        format!("storePathRootDir={}", store.display()),
    ] {
        cmd.arg("--set").arg(kv);
    }
    // The test must not inherit an ignored SIGHUP (a run under `nohup`): the broker honours
    // that and would never stop.
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Read the start-up line, then close our end of its stdout (the reader of `| tee` gone).
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.starts_with("rmqha broker started"), "{line:?}");
    drop(out);
    assert!(store.join("abort").exists(), "a running broker has its abort file");
    // A hang-up (terminal or SSH session closed) is a clean shutdown, as SIGTERM is.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    assert!(wait_until(Duration::from_secs(20), || child.try_wait().unwrap().is_some()), "no exit");
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "exit {status:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!store.join("abort").exists(), "a clean shutdown removes the abort file");
}

/// `rmqha truncate` cuts a stopped store at a record start (what a divergence message
/// names), refuses a cut inside a record naming the record's start, and refuses a store a
/// broker is using.
#[test]
fn truncate_cuts_a_stopped_store_at_a_record_start() {
    let d = tempfile::tempdir().unwrap();
    let store_dir = d.path().join("store");
    let conf = examples().join("broker-a.properties").display().to_string();
    let set = |kv: String| ["--set".to_string(), kv];
    let mut cfg = BrokerConfig::read_properties_file(examples().join("broker-a.properties")).unwrap();
    cfg.set("storePathRootDir", store_dir.to_str().unwrap()).unwrap();
    cfg.set("brokerRole", "ASYNC_MASTER").unwrap();
    let store = MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    let mut ends = Vec::new();
    for i in 0..5 {
        let r =
            store.put_message_sync(&Message::new("T", format!("m{i}").into_bytes()).with_queue(0)).unwrap();
        ends.push(r.phy_offset + r.size as i64);
    }
    store.shutdown();
    drop(store);
    {
        let tables = rmqha_core::metadata::ConfigTables::open(&store_dir).unwrap();
        tables.consumer_offsets().commit("g", "T", 0, 5);
        tables.consumer_offsets().commit("h", "T", 0, 2);
        tables.consumer_offsets().persist().unwrap();
    }
    let truncate = |offset: i64| {
        let mut args = vec!["truncate".to_string(), "-c".into(), conf.clone()];
        args.extend(set(format!("storePathRootDir={}", store_dir.display())));
        args.extend(["--offset".to_string(), offset.to_string()]);
        Command::new(RMQHA).args(&args).env("RMQHA_LOG", "error").stdin(Stdio::null()).output().unwrap()
    };
    let inside = truncate(ends[2] + 5);
    assert!(!inside.status.success());
    let err = String::from_utf8_lossy(&inside.stderr);
    assert!(err.contains("not where a record starts") && err.contains(&ends[2].to_string()), "{err}");
    let cut = truncate(ends[2]);
    assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
    // It says what it cut: bytes, and the messages of each queue.
    let said = String::from_utf8_lossy(&cut.stdout);
    let dropped = format!(
        "cut at {} (it ended at {}; {} bytes, 2 messages dropped)",
        ends[2],
        ends[4],
        ends[4] - ends[2]
    );
    assert!(said.contains(&dropped), "{said}");
    assert!(said.contains("\n  T queue 0: 2 messages, queue offsets 3 to 4\n"), "{said}");
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    assert_eq!(store.max_offset(), ends[2]);
    assert_eq!(store.queue_max_offset("T", 0), 3);
    // A consumer offset past the cut goes back to the queue's end; one before it stays.
    let tables = rmqha_core::metadata::ConfigTables::open(&store_dir).unwrap();
    assert_eq!(tables.consumer_offsets().query("g", "T", 0), Some(3));
    assert_eq!(tables.consumer_offsets().query("h", "T", 0), Some(2));
    // In use: the lock names it.
    let busy = truncate(ends[1]);
    assert!(!busy.status.success());
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("lock"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    store.shutdown();
}

/// A stop that could not persist the config tables said "stopped" and exited 0: a service
/// manager or a script took it for a clean stop. It now says UNCLEANLY, why, and exits 1.
#[test]
fn a_stop_that_loses_config_exits_non_zero() {
    let d = tempfile::tempdir().unwrap();
    let mut p = Proc::broker("broker-a.properties", d.path(), &["haListenPort=0".into()]);
    p.wait_line("rmqha broker started", Duration::from_secs(20));
    // The delay offsets' temporary file cannot be made: a directory holds its name.
    std::fs::create_dir_all(d.path().join("config").join("delayOffset.json.tmp")).unwrap();
    p.signal(libc::SIGTERM);
    let status = p.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{status:?}");
    p.wait_line("rmqha broker stopped UNCLEANLY", Duration::from_secs(5));
}

/// One HTTP request over a fresh connection; the whole answer.
fn http(addr: &str, request: &[u8]) -> String {
    use std::io::Read;
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(request).unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

/// `--metrics-listen`: Prometheus text at /metrics, counting what the broker was sent; other
/// paths and methods are refused, and a client that never finishes its request holds up no
/// scrape.
#[test]
fn metrics_are_served_over_http() {
    let store = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(RMQHA);
    cmd.args(["broker", "-c"]).arg(examples().join("broker-a.properties"));
    for s in [
        format!("storePathRootDir={}", store.path().display()),
        "listenPort=0".into(),
        "haListenPort=0".into(),
        "bindAddress=127.0.0.1".into(),
        "brokerIP1=127.0.0.1".into(),
        "brokerRole=ASYNC_MASTER".into(),
        "mappedFileSizeCommitLog=1048576".into(),
    ] {
        cmd.arg("--set").arg(s);
    }
    cmd.args(["--metrics-listen", "127.0.0.1:0"]).env("RMQHA_LOG", "warn");
    let p = Proc::spawn(cmd);
    let line = p.wait_line("rmqha broker started", Duration::from_secs(20));
    let url = field(&line, "metrics");
    let addr = url.strip_prefix("http://").and_then(|u| u.strip_suffix("/metrics")).unwrap().to_string();
    let port = field(&line, "listenPort");

    // A client that sends half a request and waits: scrapes go on beside it.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /metr").unwrap();

    let out = Command::new(RMQHA)
        .args(["put", "--topic", "TopicTest", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"hello")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "put failed: {}", String::from_utf8_lossy(&out.stderr));

    let answer = http(&addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    assert!(body.contains("role=\"ASYNC_MASTER\""), "{body}");
    assert!(body.lines().any(|l| l == "rmqha_puts_stored_total 1"), "{body}");
    assert!(body.lines().any(|l| l == "rmqha_ha_slaves 0"), "{body}");

    assert!(http(&addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
    assert!(http(&addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
    assert!(http(&addr, &[0u8; 9000]).starts_with("HTTP/1.1 431 "));
    drop(slow);
    p.stop();
}

/// Runs `rmqha truncate -c CONF --offset 0 --set ...`; returns success, stdout and stderr.
fn truncate_at_0(conf: &Path, sets: &[String]) -> (bool, String, String) {
    let mut cmd = Command::new(RMQHA);
    cmd.arg("truncate").arg("-c").arg(conf).args(["--offset", "0"]);
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    let out = cmd.env("RMQHA_LOG", "error").stdin(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A properties file naming a store directory that does not exist (yet).
fn conf_with_store(d: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let conf = d.join("broker.properties");
    let file_store = d.join("file-store");
    std::fs::write(&conf, format!("brokerRole=ASYNC_MASTER\nstorePathRootDir={}\n", file_store.display()))
        .unwrap();
    (conf, file_store)
}

/// `rmqha truncate` on a path that holds no store made one there (the store's directories,
/// lock and checkpoint) and reported the "cut" as done, while the store meant kept its
/// diverged tail. It is refused now, naming the path, and nothing is created.
#[test]
fn truncate_refuses_a_path_that_is_no_store() {
    let d = tempfile::tempdir().unwrap();
    let (conf, _) = conf_with_store(d.path());
    // A path with nothing there.
    let typo = d.path().join("no-such-store");
    let (ok, out, err) = truncate_at_0(&conf, &[format!("storePathRootDir={}", typo.display())]);
    assert!(!ok, "{out}");
    assert!(err.contains("not a broker's store") && err.contains(&typo.display().to_string()), "{err}");
    assert!(!typo.exists(), "truncate made a store where there was none");
    // A directory that is no store (no CommitLog directory in it).
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (ok, out, err) = truncate_at_0(&conf, &[format!("storePathRootDir={}", empty.display())]);
    assert!(!ok, "{out}");
    assert!(err.contains(&empty.join("commitlog").display().to_string()), "{err}");
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "truncate wrote into a directory that is no store"
    );
    // A store over two CommitLog directories, one of which is missing (a disk not mounted):
    // the answer says so, not that the store is none, and nothing is made.
    let store = d.path().join("two-dirs");
    let (a, b) = (store.join("cl-a"), store.join("cl-b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::write(a.join("00000000000000000000"), vec![0u8; 4096]).unwrap();
    let (ok, out, err) = truncate_at_0(
        &conf,
        &[
            format!("storePathRootDir={}", store.display()),
            format!("storePathCommitLog={};{}", a.display(), b.display()),
        ],
    );
    assert!(!ok, "{out}");
    assert!(!err.contains("not a broker's store"), "{err}");
    assert!(err.contains(&b.display().to_string()) && err.contains("not mounted"), "{err}");
    assert!(!b.exists(), "truncate made the missing directory");
}

/// A mistyped `--set` key was ignored with a warning, so `truncate` cut the file's store
/// instead of the one named (and `broker` ran on the file's value); `--set =5` likewise.
/// Both are refused now, naming the key meant.
#[test]
fn a_mistyped_set_key_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (conf, file_store) = conf_with_store(d.path());
    let other = d.path().join("other");
    let (ok, out, err) = truncate_at_0(&conf, &[format!("storePathRootdir={}", other.display())]);
    assert!(!ok, "{out}");
    assert!(err.contains("storePathRootdir") && err.contains("did you mean storePathRootDir"), "{err}");
    let (ok, out, err) = truncate_at_0(&conf, &["=5".to_string()]);
    assert!(!ok && err.contains("\"=5\""), "{out} {err}");
    assert!(!file_store.exists(), "truncate went to the file's store");
    let err =
        failing_start(&["-c".into(), conf.display().to_string(), "--set".into(), "listenport=0".into()]);
    assert!(err.contains("did you mean listenPort"), "{err}");
    assert!(!file_store.exists(), "the broker started on the file's store");
    // A RocketMQ key rmqha does not implement is still taken, with a warning.
    let mut cmd = Command::new(RMQHA);
    cmd.arg("truncate").arg("-c").arg(&conf).args(["--offset", "0", "--set", "brokerPermission=6"]);
    let out = cmd.env("RMQHA_LOG", "error").stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("unknown config key"), "{err}");
}
