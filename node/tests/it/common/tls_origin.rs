//! An `https://` weights origin for the TLS fetch tests: the harness's
//! test CA ([`caldera_chaos_tests::tls`]) and a small blocking server (std
//! TcpListener + rustls) that serves one file whole or from a
//! `Range: bytes=N-` offset.
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

pub struct TlsOrigin {
    /// `https://127.0.0.1:<port>/<name>` of the served file.
    pub uri: String,
    /// The CA's certificate (PEM), what `--origin-ca` is given.
    pub ca_pem: PathBuf,
}

/// Serves `file` over TLS until the test process ends.
pub fn start(dir: &Path, file: &Path) -> TlsOrigin {
    let ca = caldera_chaos_tests::tls::authority_for_localhost();
    let ca_pem = dir.join("origin-ca.pem");
    std::fs::write(&ca_pem, &ca.ca_pem).unwrap();
    let config = ca.server;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = std::fs::read(file).unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (config, body) = (config.clone(), body.clone());
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let _ = answer(&mut tls, &body);
            });
        }
    });
    let name = file.file_name().unwrap().to_string_lossy();
    TlsOrigin {
        uri: format!("https://127.0.0.1:{port}/{name}"),
        ca_pem,
    }
}

/// Reads one request head and answers it (206 for `Range: bytes=N-`).
fn answer<S: std::io::Read + Write>(stream: &mut S, body: &[u8]) -> std::io::Result<()> {
    let mut from = 0usize;
    {
        let mut reader = BufReader::new(&mut *stream);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(r) = lower.strip_prefix("range: bytes=") {
                from = r.trim().trim_end_matches('-').parse().unwrap_or(0);
            }
        }
    }
    let head = if from > 0 {
        format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {from}-{}/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len() - 1,
            body.len(),
            body.len() - from
        )
    } else {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
    };
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body[from..])?;
    stream.flush()
}
