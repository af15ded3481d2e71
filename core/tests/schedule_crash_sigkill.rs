//! A master killed with SIGKILL while its scheduler delivers a backlog of delayed messages:
//! after the restart every delayed message is delivered (some perhaps twice), none lost.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{broker_config, wait_until};
use rmqha_core::{Broker, BrokerConfig, Message};

const ENV_DIR: &str = "RMQHA_SCHEDULE_CRASH_DIR";
const N: usize = 30_000;

fn config(dir: &Path) -> BrokerConfig {
    broker_config(
        dir,
        "ASYNC_MASTER",
        &[
            ("messageDelayLevel", "1s"),
            ("flushCommitLogThoroughInterval", "50"),
            ("flushConsumerOffsetInterval", "50"),
        ],
    )
}

fn progress(dir: &Path) -> std::path::PathBuf {
    dir.with_extension("delivered")
}

#[test]
#[ignore = "the child process of the SIGKILL test, which runs it"]
fn schedule_crash_child() {
    let dir = std::env::var_os(ENV_DIR).expect("run by the SIGKILL test");
    let dir = Path::new(&dir);
    let b = Broker::start_master(config(dir)).unwrap();
    for i in 0..N {
        let m = Message::new("Orders", format!("m{i}").into_bytes()).with_property("DELAY", "1");
        b.put_message_sync(&m).unwrap();
    }
    loop {
        std::fs::write(progress(dir), b.queue_max_offset("Orders", 0).to_string()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_kill_while_delivering_loses_no_delayed_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "schedule_crash_child", "--ignored", "--test-threads", "1", "--nocapture"])
        .env(ENV_DIR, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let delivered = || {
        std::fs::read_to_string(progress(dir.path()))
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(0)
    };
    let midway = wait_until(Duration::from_secs(60), || delivered() >= N / 3);
    child.kill().unwrap();
    child.wait().unwrap();
    eprintln!("killed with {} of {N} delivered", delivered());
    assert!(midway, "the child delivered {} of {N}", delivered());
    let b = Broker::start_master(config(dir.path())).unwrap();
    let all = |b: &Broker| {
        let mut seen = std::collections::HashSet::new();
        let mut off = 0;
        loop {
            let got = b.get_messages("Orders", 0, off, 32).messages();
            if got.is_empty() {
                break;
            }
            off += got.len() as i64;
            seen.extend(got.into_iter().map(|m| m.body));
        }
        seen.len()
    };
    assert!(wait_until(Duration::from_secs(60), || all(&b) == N), "delivered {} distinct of {N}", all(&b));
    b.shutdown();
}
