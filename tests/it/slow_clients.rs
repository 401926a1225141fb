//! Slow clients must not exhaust the server: requests
//! that declare a body and never send it are answered and closed after the
//! client request timeout, a client holding too many requests at once is
//! refused, and meanwhile `/healthz` answers and a node joins. Real server
//! process, real sockets.
use caldera_chaos_tests::{fake_node, ControlPlane, JOIN_TOKEN};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// Opens a connection and sends the head of a POST with a body it never sends.
fn stall(addr: &str, token: &str) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    write!(
        s,
        "POST /v1/tasks HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{{\"task_id\":"
    )?;
    Ok(s)
}

/// The status line the server answered `s` with, or what happened instead.
fn answer(s: &mut TcpStream, wait: Duration) -> String {
    let _ = s.set_read_timeout(Some(wait));
    let mut buf = [0u8; 512];
    match s.read(&mut buf) {
        Ok(0) => "closed without an answer".into(),
        Ok(n) => String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_string(),
        Err(e) => format!("no answer: {e}"),
    }
}

fn slow_clients(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(
        Path::new(BIN),
        &dir.path().join("cp"),
        &[("CALDERA_CLIENT_REQUEST_TIMEOUT_MS", "1500")],
    );
    let token = cp.tenant("slow");
    let mut stalled = Vec::new();
    for _ in 0..n {
        match stall(&cp.addr, &token) {
            Ok(s) => stalled.push(s),
            Err(e) => panic!("could not open slow client {}: {e}", stalled.len()),
        }
    }
    // While they hang: the health check answers and a node joins.
    let health = caldera_chaos_tests::Api::new(&cp.addr, None).get("/healthz");
    assert_eq!(health.status, 200, "{}", health.body);
    let joined = fake_node::join(&cp.addr, JOIN_TOKEN, "node-during-stall", 1);
    assert!(joined.is_ok(), "a node could not join: {:?}", joined.err());
    // Every stalled request gets an answer — 408 after the timeout, or 429
    // at once for those past the per-client limit — rather than hanging on.
    let started = Instant::now();
    let mut answers = std::collections::BTreeMap::<String, usize>::new();
    for s in &mut stalled {
        let left = Duration::from_secs(20).saturating_sub(started.elapsed());
        let a = answer(s, left.max(Duration::from_millis(100)));
        let key = if a.starts_with("HTTP/1.1 408") || a.starts_with("HTTP/1.1 429") {
            a[..12].to_string()
        } else {
            a
        };
        *answers.entry(key).or_default() += 1;
    }
    let answered: usize = answers
        .iter()
        .filter(|(k, _)| k.starts_with("HTTP/1.1 4"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(answered, n, "answers to {n} stalled requests: {answers:?}");
    assert!(answers.contains_key("HTTP/1.1 408"), "{answers:?}");
}

#[test]
fn stalled_bodies_are_answered_and_the_server_stays_available() {
    slow_clients(300);
}

/// The figure: 2,000 slow clients. `cargo test --test it slow_clients:: -- --ignored`
#[test]
#[ignore]
fn two_thousand_slow_clients() {
    slow_clients(2000);
}
