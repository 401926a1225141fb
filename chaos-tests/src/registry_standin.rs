//! A stand-in image registry on loopback, for the pull tests: it answers
//! the way a registry that lacks the image (404 `MANIFEST_UNKNOWN`) or is
//! failing (500) does, or accepts connections and never answers a byte,
//! and counts what it was asked, so a test can tell one pull from a retry
//! storm. A TLS hello (podman tries https first) is counted as a
//! connection and dropped, as a plain-http registry would.
//!
//! [`StandinRegistry::registries_conf`] writes a registries.conf that sends
//! a name prefix to it; an agent started with `CONTAINERS_REGISTRIES_CONF`
//! pointing at that file (or podman given `--registries-conf`) pulls from
//! it. The prefix must be one the host's registries.conf.d drop-ins do not
//! map (they are read whatever the main file says): not `registry.internal`.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the stand-in answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `/v2/` is 200; every manifest or blob is 404 `MANIFEST_UNKNOWN`.
    NotFound,
    /// Every request is 500.
    ServerError,
    /// Accepts connections, reads nothing, answers nothing.
    Silent,
}

/// A running stand-in; stops (and drops held connections) when dropped.
pub struct StandinRegistry {
    pub addr: String,
    connections: Arc<AtomicU64>,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl StandinRegistry {
    /// Listens on 127.0.0.1 (a free port) and answers with `answer`.
    pub fn start(answer: Answer) -> std::io::Result<StandinRegistry> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?.to_string();
        let reg = StandinRegistry {
            addr,
            connections: Arc::default(),
            requests: Arc::default(),
            stop: Arc::default(),
            held: Arc::default(),
        };
        let (connections, requests, stop, held) = (
            reg.connections.clone(),
            reg.requests.clone(),
            reg.stop.clone(),
            reg.held.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        connections.fetch_add(1, Ordering::SeqCst);
                        if answer == Answer::Silent {
                            if let Ok(mut h) = held.lock() {
                                h.push(conn);
                            }
                            continue;
                        }
                        let requests = requests.clone();
                        std::thread::spawn(move || serve(conn, answer, &requests));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(reg)
    }

    /// Connections accepted so far (TLS attempts included).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// HTTP requests answered so far, as `METHOD /path`.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Writes `dir/registries.conf` sending names under `prefix` to this
    /// stand-in (plain http), and answers its path.
    pub fn registries_conf(&self, dir: &Path, prefix: &str) -> std::io::Result<PathBuf> {
        let path = dir.join("registries.conf");
        let body = format!(
            "[[registry]]\nprefix = \"{prefix}\"\nlocation = \"{addr}\"\ninsecure = true\n\n\
             [[registry]]\nlocation = \"{addr}\"\ninsecure = true\n",
            addr = self.addr
        );
        std::fs::write(&path, body)?;
        Ok(path)
    }
}

impl Drop for StandinRegistry {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(mut h) = self.held.lock() {
            h.clear();
        }
    }
}

/// Answers requests on one connection until it closes.
fn serve(mut conn: TcpStream, answer: Answer, requests: &Mutex<Vec<String>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if buf.is_empty() && chunk[0] == 0x16 {
            return; // a TLS hello: this registry speaks plain http
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let line = head.lines().next().unwrap_or("").to_string();
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or("").to_string();
            let path = parts.next().unwrap_or("").to_string();
            if let Ok(mut r) = requests.lock() {
                r.push(format!("{method} {path}"));
            }
            let (status, body) = match answer {
                Answer::NotFound if path == "/v2/" || path == "/v2" => ("200 OK", "{}".to_string()),
                Answer::NotFound => (
                    "404 Not Found",
                    r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#
                        .to_string(),
                ),
                _ => ("500 Internal Server Error", "oops".to_string()),
            };
            let body = if method == "HEAD" {
                String::new()
            } else {
                body
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                 Docker-Distribution-API-Version: registry/2.0\r\nContent-Length: {}\r\n\r\n{body}",
                if method == "HEAD" { 0 } else { body.len() }
            );
            if conn.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
