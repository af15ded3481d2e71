//! A broker stops in a process that has run out of file descriptors. Stopping used to wake
//! each thread blocked in `accept()` by connecting to its own port; without a descriptor for
//! that socket the connect failed and the join that followed waited forever.
//!
//! Its own test binary: RLIMIT_NOFILE is process-wide, so nothing else may run beside it.

#![cfg(target_os = "linux")]

mod common;

use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::{broker_config, store_config};
use rmqha_core::ha::{HaMaster, HaMasterOptions};
use rmqha_core::{Broker, MessageStore};

fn nofile_limit() -> libc::rlimit {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct we pass.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

fn set_nofile_limit(lim: &libc::rlimit) {
    // SAFETY: setrlimit reads the struct we pass.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, lim) }, 0, "{}", io::Error::last_os_error());
}

/// The highest descriptor open now.
fn highest_fd() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap()
}

/// Lowers the soft limit to the descriptors in use and fills the gaps below it, so the next
/// descriptor anyone asks for fails with EMFILE. Returns the filler files.
fn exhaust_descriptors(limit: &libc::rlimit) -> Vec<File> {
    set_nofile_limit(&libc::rlimit { rlim_cur: highest_fd() + 1, rlim_max: limit.rlim_max });
    let mut fillers = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(f) => fillers.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                return fillers;
            }
        }
    }
}

/// Runs `stop` on a thread while no descriptor is free and asserts it returns within 10 s;
/// the limit and the descriptors are given back either way.
fn assert_stops_out_of_descriptors(probe: std::net::SocketAddr, stop: impl FnOnce() + Send + 'static) {
    let limit = nofile_limit();
    let fillers = exhaust_descriptors(&limit);
    // What the old shutdown did to wake an acceptor now fails.
    let connect = std::net::TcpStream::connect_timeout(&probe, Duration::from_secs(1));
    let connect_errno = connect.as_ref().err().and_then(|e| e.raw_os_error());
    let (tx, rx) = mpsc::channel();
    let stopper = std::thread::spawn(move || {
        stop();
        let _ = tx.send(());
    });
    let stopped = rx.recv_timeout(Duration::from_secs(10));
    drop(fillers);
    set_nofile_limit(&limit);
    assert_eq!(connect_errno, Some(libc::EMFILE), "the process was not out of descriptors: {connect:?}");
    assert!(stopped.is_ok(), "shutdown did not return within 10 s with no descriptor free");
    stopper.join().unwrap();
}

/// The limit is the process's: one test at a time (libtest runs them on parallel threads).
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn a_broker_stops_when_the_process_is_out_of_descriptors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let probe = format!("127.0.0.1:{}", master.listen_port()).parse().unwrap();
    let m = master.clone();
    assert_stops_out_of_descriptors(probe, move || m.shutdown());
    drop(master);
    // The store was let go: the same directory opens again.
    let again = Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    again.shutdown();
}

/// The HA service alone: in a broker, the remoting server stops first and closes its
/// listeners, which frees descriptors for the HA acceptor's wake-up.
#[test]
fn the_ha_master_stops_when_the_process_is_out_of_descriptors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    let opts = HaMasterOptions {
        heartbeat_interval: Duration::from_secs(5),
        housekeeping_interval: Duration::from_secs(20),
        transfer_batch_size: 32 * 1024,
        slave_fallbehind_max: 256 * 1024 * 1024,
        slave_timeout: Duration::from_secs(3),
        sync_slave_count: 1,
        sync_from_last_file: false,
        verify_slave_tail: true,
        linger: Duration::ZERO,
        auth_secret: None,
    };
    let ha =
        Arc::new(HaMaster::start("127.0.0.1:0".parse().unwrap(), store.commit_log().clone(), opts).unwrap());
    let h = ha.clone();
    assert_stops_out_of_descriptors(ha.local_addr(), move || h.shutdown());
    store.shutdown();
}
