//! Helpers shared by the tests that run `rmqha` processes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const RMQHA: &str = env!("CARGO_BIN_EXE_rmqha");

/// The example properties files of the repository.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A child process killed when dropped (continued first, if a test stopped it), with its
/// stdout lines on a channel.
pub struct Proc {
    pub child: Child,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    pub fn spawn(mut cmd: Command) -> Proc {
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

    /// `rmqha broker -c examples/<conf>` on `store`, on 127.0.0.1 with a free listen port and
    /// 1 MiB CommitLog files; `extra` are more `--set KEY=VALUE` overrides.
    pub fn broker(conf: &str, store: &Path, extra: &[String]) -> Proc {
        Self::broker_from(&examples().join(conf), store, extra)
    }

    /// [`Proc::broker`] with the properties file at `conf`.
    pub fn broker_from(conf: &Path, store: &Path, extra: &[String]) -> Proc {
        let mut cmd = Command::new(RMQHA);
        cmd.arg("broker").arg("-c").arg(conf);
        for s in [
            format!("storePathRootDir={}", store.display()),
            "listenPort=0".into(),
            "bindAddress=127.0.0.1".into(),
            "brokerIP1=127.0.0.1".into(),
            "mappedFileSizeCommitLog=1048576".into(),
        ]
        .iter()
        .chain(extra)
        {
            cmd.arg("--set").arg(s);
        }
        cmd.env("RMQHA_LOG", "warn");
        Proc::spawn(cmd)
    }

    /// Waits for a stdout line containing `prefix`.
    pub fn wait_line(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(prefix) => return l,
                Ok(_) => continue,
                Err(e) => panic!("no line starting with {prefix:?}: {e}"),
            }
        }
    }

    /// The `listenPort=` and `haPort=` of a broker's start-up line.
    pub fn ports(&self) -> (u16, u16) {
        let line = self.wait_line("rmqha broker started", Duration::from_secs(30));
        (field(&line, "listenPort").parse().unwrap(), field(&line, "haPort").parse().unwrap())
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Stops the process with SIGSTOP and waits until every one of its threads is stopped
    /// (kill(2) only queues the signal; a thread on another CPU runs on for a moment).
    pub fn freeze(&self) {
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

    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "process did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then a clean exit within 20 s.
    pub fn stop(mut self) {
        self.signal(libc::SIGTERM);
        let s = self.wait_exit(Duration::from_secs(20));
        assert!(s.success(), "exit status {s:?}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of `key=` in a `key=value ...` line.
pub fn field(line: &str, key: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} not in {line:?}"))
        .to_string()
}

/// Polls `f` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}
