//! A TCP proxy the test controls, standing for the network between an agent
//! and the control plane. [`Proxy::cut`] is a network cut as the two ends see
//! it: nothing is refused or reset, bytes simply stop arriving (existing
//! connections go silent both ways, new ones are accepted and never answered),
//! so each side can only find out by its own timeouts. [`Proxy::heal`] drops
//! the connections that were silenced (as a reset would once the path is
//! back) and forwards new ones again. Real sockets, plain threads.
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy's threads share.
#[derive(Default)]
struct State {
    cut: AtomicBool,
    /// Bumped on every cut: a connection of an older generation forwards nothing.
    generation: AtomicU64,
    /// Every socket accepted or opened upstream, to drop on heal.
    open: Mutex<Vec<TcpStream>>,
    /// Connections accepted (forwarded or not), for tests to see reconnects.
    accepted: AtomicU64,
}

/// A listening proxy to one upstream address.
pub struct Proxy {
    pub addr: String,
    state: Arc<State>,
}

impl Proxy {
    /// Listens on a fresh 127.0.0.1 port and forwards every connection to `upstream`.
    pub fn start(upstream: &str) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let state = Arc::new(State::default());
        let s = state.clone();
        let upstream = upstream.to_string();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                s.accepted.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                let upstream = upstream.clone();
                std::thread::spawn(move || serve(conn, &upstream, &s));
            }
        });
        Ok(Proxy { addr, state })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Silences every connection and every new one (see the module doc).
    pub fn cut(&self) {
        self.state.generation.fetch_add(1, Ordering::SeqCst);
        self.state.cut.store(true, Ordering::SeqCst);
    }

    /// Drops the silenced connections and forwards again (a no-op unless cut).
    pub fn heal(&self) {
        if !self.state.cut.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut open) = self.state.open.lock() {
            for s in open.drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        self.state.cut.store(false, Ordering::SeqCst);
    }

    /// How many connections the proxy has accepted so far.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }
}

fn remember(s: &State, stream: &TcpStream) {
    if let (Ok(mut open), Ok(c)) = (s.open.lock(), stream.try_clone()) {
        open.push(c);
    }
}

/// One connection: held silent while cut, else forwarded both ways.
fn serve(client: TcpStream, upstream: &str, s: &Arc<State>) {
    let generation = s.generation.load(Ordering::SeqCst);
    remember(s, &client);
    if s.cut.load(Ordering::SeqCst) {
        // Accepted, read and never answered: a blackhole until heal drops it.
        discard(client);
        return;
    }
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    remember(s, &server);
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let st = s.clone();
    std::thread::spawn(move || pump(c2, s2, generation, &st));
    pump(server, client, generation, s);
}

/// Copies `from` to `to` while the connection's generation is current; after
/// a cut, reads on and throws the bytes away (they are lost in the network).
fn pump(mut from: TcpStream, mut to: TcpStream, generation: u64, s: &State) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if s.generation.load(Ordering::SeqCst) != generation {
            continue;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    if s.generation.load(Ordering::SeqCst) == generation {
        let _ = to.shutdown(Shutdown::Both);
    }
}

fn discard(mut conn: TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(3600)));
    let mut buf = [0u8; 16 * 1024];
    while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
}
