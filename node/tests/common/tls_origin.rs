//! An `https://` weights origin for the TLS fetch tests: a CA and a
//! certificate for 127.0.0.1 made with rcgen, and a small blocking server
//! (std TcpListener + rustls) that serves one file whole or from a
//! `Range: bytes=N-` offset.
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct TlsOrigin {
    /// `https://127.0.0.1:<port>/<name>` of the served file.
    pub uri: String,
    /// The CA's certificate (PEM), what `--origin-ca` is given.
    pub ca_pem: PathBuf,
}

/// Serves `file` over TLS until the test process ends.
pub fn start(dir: &Path, file: &Path) -> TlsOrigin {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let ca_pem = dir.join("origin-ca.pem");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.der().to_vec())],
            PrivateKeyDer::from_pem_slice(leaf_key.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap();
    let config = Arc::new(config);
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
