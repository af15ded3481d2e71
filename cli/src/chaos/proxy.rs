//! A TCP proxy between the slave and the master's HA port. Its listening address stays the
//! same while the master behind it restarts on a new port (`retarget`), and it can cut every
//! connection or stall forwarding in both directions.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Proxy {
    addr: SocketAddr,
    st: Arc<State>,
}

struct State {
    target: Mutex<Option<SocketAddr>>,
    stalled: AtomicBool,
    stopping: AtomicBool,
    /// Live pairs: id, client side, server side.
    conns: Mutex<Vec<(u64, TcpStream, TcpStream)>>,
    next_id: AtomicU64,
    /// Connections forwarded to a target so far.
    forwarded: AtomicU64,
}

impl Proxy {
    pub fn start() -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let st = Arc::new(State {
            target: Mutex::new(None),
            stalled: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            forwarded: AtomicU64::new(0),
        });
        let s = st.clone();
        std::thread::Builder::new().name("chaos-proxy-accept".into()).spawn(move || accept(listener, s))?;
        Ok(Proxy { addr, st })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// New connections go to `target` from now on (existing ones are cut).
    pub fn retarget(&self, target: SocketAddr) {
        *self.st.target.lock().unwrap_or_else(|e| e.into_inner()) = Some(target);
        self.cut();
    }

    /// Connections forwarded so far (a reconnect after a cut raises it).
    pub fn forwarded(&self) -> u64 {
        self.st.forwarded.load(Ordering::SeqCst)
    }

    /// Live forwarded connections.
    pub fn live(&self) -> usize {
        self.st.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Closes every forwarded connection, both ways.
    pub fn cut(&self) {
        for (_, a, b) in self.st.conns.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }

    /// Stops (or resumes) forwarding; bytes wait in the proxy and the socket buffers.
    pub fn stall(&self, on: bool) {
        self.st.stalled.store(on, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.st.stopping.store(true, Ordering::SeqCst);
        self.stall(false);
        self.cut();
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

fn accept(listener: TcpListener, st: Arc<State>) {
    for c in listener.incoming() {
        if st.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = c else { continue };
        let target = *st.target.lock().unwrap_or_else(|e| e.into_inner());
        let Some(target) = target else { continue };
        // A master that is down refuses at once: the slave sees its connection close.
        let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(1)) else { continue };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let id = st.next_id.fetch_add(1, Ordering::SeqCst);
        let pair = (|| Some((client.try_clone().ok()?, server.try_clone().ok()?)))();
        let Some((c2, s2)) = pair else { continue };
        st.conns.lock().unwrap_or_else(|e| e.into_inner()).push((id, c2, s2));
        st.forwarded.fetch_add(1, Ordering::SeqCst);
        for (from, to) in [(client.try_clone(), server.try_clone()), (server.try_clone(), client.try_clone())]
        {
            let (Ok(from), Ok(to)) = (from, to) else { continue };
            let st = st.clone();
            let _ = std::thread::Builder::new()
                .name("chaos-proxy-pump".into())
                .spawn(move || pump(id, from, to, st));
        }
    }
}

fn pump(id: u64, mut from: TcpStream, mut to: TcpStream, st: Arc<State>) {
    let mut buf = vec![0u8; 64 * 1024];
    let held = |st: &State| {
        // A test proxy may poll: it only has to hold bytes while stalled.
        while st.stalled.load(Ordering::SeqCst) && !st.stopping.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    loop {
        held(&st);
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        held(&st);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    st.conns.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _, _)| *i != id);
}
