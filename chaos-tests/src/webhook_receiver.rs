//! A webhook receiver the tests start in-process: a small HTTP/1.1 server
//! that keeps every request it gets (headers and body) and answers each
//! with the next status of a script (then a default), or never answers
//! (a hung receiver). It checks signatures the way
//! `docs/how-to/subscribe-to-webhooks.md` tells a receiver to, so a test asserts what a real receiver would see.
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The status it was answered with.
    pub answered: u16,
    /// When its body had arrived (Unix ms).
    pub at_ms: u64,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::http::find_header(&self.headers, name)
    }

    /// The body as JSON (Null when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_default()
    }

    /// Whether `Caldera-Signature: t=T,v1=HEX` is HMAC-SHA256(secret,
    /// "T.body") and T equals `Caldera-Timestamp`.
    pub fn signed_with(&self, secret: &str) -> bool {
        let Some(sig) = self.header("caldera-signature") else {
            return false;
        };
        let mut t = None;
        let mut v1 = None;
        for part in sig.split(',') {
            match part.split_once('=') {
                Some(("t", x)) => t = Some(x),
                Some(("v1", x)) => v1 = Some(x),
                _ => {}
            }
        }
        let (Some(t), Some(v1)) = (t, v1) else {
            return false;
        };
        if self.header("caldera-timestamp") != Some(t) {
            return false;
        }
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(format!("{t}.{}", self.body).as_bytes());
        let want: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        want == v1
    }
}

#[derive(Default)]
struct State {
    got: Vec<Received>,
    script: VecDeque<u16>,
    then: u16,
    /// Read requests, answer none.
    hung: bool,
}

/// A running receiver on 127.0.0.1.
#[derive(Clone)]
pub struct Receiver {
    pub port: u16,
    state: Arc<Mutex<State>>,
    /// Served over TLS: the CA's PEM that vouches for it.
    pub ca_pem: Option<String>,
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

impl Receiver {
    /// Answers the first requests with `script`, the rest with `then`.
    pub fn start(script: &[u16], then: u16) -> Receiver {
        Self::serve(script, then, false, None)
    }

    /// [`Receiver::start`] over TLS (`https://`), its certificate signed by
    /// a CA of its own ([`Receiver::ca_pem`]).
    pub fn start_tls(script: &[u16], then: u16) -> Receiver {
        Self::serve(
            script,
            then,
            false,
            Some(crate::tls::authority_for_localhost()),
        )
    }

    /// Accepts connections, reads each request, never answers (until
    /// [`Receiver::answer`]).
    pub fn hung() -> Receiver {
        Self::serve(&[], 0, true, None)
    }

    fn serve(script: &[u16], then: u16, hung: bool, tls: Option<crate::tls::TestCa>) -> Receiver {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a receiver port");
        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
        let state = Arc::new(Mutex::new(State {
            got: Vec::new(),
            script: script.iter().copied().collect(),
            then,
            hung,
        }));
        let shared = state.clone();
        let ca_pem = tls.as_ref().map(|t| t.ca_pem.clone());
        let server = tls.map(|t| t.server);
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let st = shared.clone();
                let server = server.clone();
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                std::thread::spawn(move || match server {
                    None => serve_one(s, &st),
                    Some(config) => {
                        if let Ok(conn) = rustls::ServerConnection::new(config) {
                            serve_one(rustls::StreamOwned::new(conn, s), &st);
                        }
                    }
                });
            }
        });
        Receiver {
            port,
            state,
            ca_pem,
        }
    }

    /// `http://127.0.0.1:<port><path>` (`https://` for a TLS receiver).
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// Every request so far (a hung receiver keeps them too).
    pub fn received(&self) -> Vec<Received> {
        lock(&self.state).got.clone()
    }

    /// From now on, answer with `status` (a hung receiver too; requests it
    /// already holds stay unanswered).
    pub fn answer(&self, status: u16) {
        let mut s = lock(&self.state);
        s.script.clear();
        s.then = status;
        s.hung = false;
    }
}

fn serve_one<S: Read + Write>(mut s: S, state: &Mutex<State>) {
    let (path, headers, body) = {
        let mut r = BufReader::new(&mut s);
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(n, _): &&(String, String)| n == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        (path, headers, String::from_utf8_lossy(&body).into_owned())
    };
    let (answered, hung) = {
        let mut st = lock(state);
        let hung = st.hung;
        let status = if hung {
            0
        } else {
            let then = st.then;
            st.script.pop_front().unwrap_or(then)
        };
        st.got.push(Received {
            path,
            headers,
            body,
            answered: status,
            at_ms: crate::wall_ms(),
        });
        (status, hung)
    };
    if hung {
        // Hold the connection open, answering nothing, until the sender gives up.
        let mut sink = [0u8; 64];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        return;
    }
    let _ = write!(
        s,
        "HTTP/1.1 {answered} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    let _ = s.flush();
}
