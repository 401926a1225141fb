//! `bench portal`: a control plane with 100 fake nodes
//! (simulated GPUs, real WebSockets, heartbeating) and 1,000 tasks in mixed
//! states — running, queued, finished — then each portal page fetched as a
//! logged-in operator: bytes on the wire (with `Accept-Encoding: gzip`, as a
//! browser asks, and without), the server's own render time (the
//! `Server-Timing: render;dur=` header) and loopback wall time, median and
//! p95; and the control plane's RSS before and after the portal is
//! exercised. Targets: < 200 KB and < 50 ms a page; the portal adds nothing
//! to the memory target (`docs/benchmarks/control-plane.md`, "Control plane RSS").
use super::stats::rss_kib;
use super::Setup;
use crate::fake_node;
use crate::portal::Browser;
use crate::process::wait_until;
use crate::{JOIN_TOKEN, OPERATOR_TOKEN};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Nodes a heartbeat thread serves.
const NODES_PER_THREAD: usize = 25;
/// Task ids with this prefix exit (code 0) as soon as they start: finished.
const DONE: &str = "done-";

/// One node's session: it heartbeats, and answers each `start` with the
/// events of a workload that starts (and, for a `done-` task, exits).
fn serve(s: &mut TcpStream, epoch: u64) -> std::io::Result<()> {
    fake_node::heartbeat(s, epoch)?;
    s.set_read_timeout(Some(Duration::from_millis(3)))?;
    while let Ok(m) = fake_node::read_json(s) {
        if m["type"] != "start" {
            continue;
        }
        let (a, t) = (
            m["allocation_id"].as_str().unwrap_or_default(),
            m["task_id"].as_str().unwrap_or_default(),
        );
        let kinds = [
            serde_json::json!({"kind": "preparing"}),
            serde_json::json!({"kind": "ready", "isolation": "none (fake node)"}),
            serde_json::json!({"kind": "started", "pid": null}),
        ];
        for k in kinds {
            fake_node::event(s, epoch, a, t, k)?;
        }
        if t.contains(DONE) {
            let exit =
                serde_json::json!({"kind": "exited", "code": 0, "signal": null, "stopped": false});
            fake_node::event(s, epoch, a, t, exit)?;
        }
    }
    s.set_read_timeout(None)
}

/// Joins `names` and serves them once a second until `stop`.
fn fleet(addr: String, names: Vec<String>, stop: Arc<AtomicBool>) {
    let mut live: Vec<(TcpStream, u64)> = names
        .iter()
        .filter_map(|n| fake_node::join(&addr, JOIN_TOKEN, n, 8).ok())
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let round = Instant::now();
        for (s, epoch) in live.iter_mut() {
            let _ = serve(s, *epoch);
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(round.elapsed()));
    }
    live.clear();
}

/// One page fetched: bytes of its body as sent, render and wall time.
struct Fetch {
    bytes: usize,
    encoding: Option<String>,
    render_ms: Option<f64>,
    wall_ms: f64,
    status: u16,
}

/// GET `path` with `cookie`, on a fresh connection, counting the body's
/// bytes as they came over the wire (de-chunked, not decompressed).
fn fetch(addr: &str, path: &str, cookie: &str, gzip: bool) -> std::io::Result<Fetch> {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let enc = if gzip {
        "Accept-Encoding: gzip\r\n"
    } else {
        ""
    };
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: caldera_session={cookie}\r\n{enc}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let body = raw.get(split + 4..).unwrap_or_default();
    let header = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    let bytes = match header("transfer-encoding") {
        Some(te) if te.contains("chunked") => dechunked_len(body),
        _ => body.len(),
    };
    let render_ms = header("server-timing")
        .and_then(|v| v.split("dur=").nth(1).map(str::to_string))
        .and_then(|v| v.split([',', ';']).next()?.trim().parse().ok());
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok(Fetch {
        bytes,
        encoding: header("content-encoding"),
        render_ms,
        wall_ms,
        status,
    })
}

/// The payload length of a chunked body.
fn dechunked_len(mut b: &[u8]) -> usize {
    let mut n = 0;
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        n += size;
        b = b.get(eol + 2 + size + 2..).unwrap_or_default();
    }
    n
}

/// The `p`-th percentile (0..=1) of `v` (sorted here).
fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n => v[((n - 1) as f64 * p).round() as usize],
    }
}

/// Submits `n` tasks of one GPU as `tenant` with ids `prefix0..`.
fn submit(api: &crate::http::Api, prefix: &str, n: usize) -> usize {
    (0..n)
        .filter(|i| {
            let body = format!(
                r#"{{"task_id":"{prefix}{i}","task_type":"training","duration":"01:00:00",
                   "resources":{{"gpu":{{"count":1}},"cpu":{{"cores":1}}}}}}"#
            );
            api.post("/v1/tasks", &body).status == 201
        })
        .count()
}

/// Tasks in `state`, counted over the operator's pages.
fn count(api: &crate::http::Api, state: &str) -> usize {
    let mut n = 0;
    let mut cursor = String::new();
    loop {
        let r = api.get(&format!(
            "/v1/tasks?state={state}&limit=1000&cursor={cursor}"
        ));
        n += r.data()["tasks"].as_array().map_or(0, Vec::len);
        match r.data()["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => return n,
        }
    }
}

/// `bench portal`.
pub fn run(setup: &Setup, nodes: usize, requests: usize) -> Result<(), String> {
    let dir = setup.scratch("portal");
    let cp = setup.control_plane(&dir, &[]);
    let pid = cp.pid().unwrap_or(0);
    let op = cp.operator();
    let stop = Arc::new(AtomicBool::new(false));
    let names: Vec<String> = (0..nodes).map(|i| format!("fake-{i:03}")).collect();
    let threads: Vec<_> = names
        .chunks(NODES_PER_THREAD)
        .map(|c| {
            let (addr, c, stop) = (cp.addr.clone(), c.to_vec(), stop.clone());
            std::thread::spawn(move || fleet(addr, c, stop))
        })
        .collect();
    let joined = wait_until(Duration::from_secs(60), || {
        crate::process::nodes_connected(&cp) >= nodes
    });
    println!(
        "portal: {} of {nodes} fake nodes connected",
        crate::process::nodes_connected(&cp)
    );
    // 4 tenants x (150 running + 50 finished); a fifth held to 1 GPU by its
    // quota, so 199 of its 200 wait in the queue.
    let mut submitted = 0;
    for t in ["alpha", "bravo", "charlie", "delta"] {
        let api = cp.api(&cp.tenant(t));
        submitted += submit(&api, "run-", 150) + submit(&api, DONE, 50);
    }
    let capped = cp.api(&cp.tenant("queued"));
    let quota = r#"{"guaranteed":{"gpus":1},"borrowing_limit":{"gpus":0}}"#;
    let q = op.put("/v1/tenants/queued/quota", quota);
    if q.status != 200 {
        return Err(format!("quota: {} {}", q.status, q.body));
    }
    submitted += submit(&capped, "wait-", 200);
    let settled = wait_until(setup.deadline.min(Duration::from_secs(60)), || {
        count(&op, "running") >= 601 && count(&op, "finished") >= 200
    });
    let states: Vec<String> = [
        "running",
        "queued",
        "finished",
        "scheduled",
        "preparing",
        "failed",
    ]
    .iter()
    .map(|s| format!("{s} {}", count(&op, s)))
    .collect();
    println!(
        "portal: {submitted} tasks submitted (all settled: {settled}, nodes joined: {joined}): {}",
        states.join(", ")
    );
    std::thread::sleep(Duration::from_secs(2));
    let before = rss_kib(pid).map_or(0, |r| r.0);

    let b = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);
    let cookie = b
        .cookies
        .get("caldera_session")
        .cloned()
        .unwrap_or_default();
    let pages = [
        ("overview", "/".to_string()),
        ("submit", "/submit".into()),
        ("tasks", "/tasks".into()),
        ("task", "/tasks/run-0?tenant=alpha".into()),
        ("nodes", "/nodes".into()),
        ("tenants", "/tenants".into()),
        ("models", "/models".into()),
        ("events", "/events".into()),
    ];
    println!("\n| page | status | raw KB | gzip KB (encoding) | render median / p95 ms | wall median / p95 ms | targets |");
    println!("|---|---|---|---|---|---|---|");
    let mut worst: (f64, f64) = (0.0, 0.0);
    for (name, path) in &pages {
        let mut render = Vec::new();
        let mut wall = Vec::new();
        let mut raw = Fetch {
            bytes: 0,
            encoding: None,
            render_ms: None,
            wall_ms: 0.0,
            status: 0,
        };
        for _ in 0..requests.max(1) {
            raw = fetch(&cp.addr, path, &cookie, false).map_err(|e| format!("{path}: {e}"))?;
            render.extend(raw.render_ms);
            wall.push(raw.wall_ms);
        }
        let gz = fetch(&cp.addr, path, &cookie, true).map_err(|e| format!("{path}: {e}"))?;
        let (r50, r95) = (pct(&mut render, 0.5), pct(&mut render, 0.95));
        let (w50, w95) = (pct(&mut wall, 0.5), pct(&mut wall, 0.95));
        let sent_kb = gz.bytes as f64 / 1000.0;
        worst = (worst.0.max(sent_kb), worst.1.max(r95));
        let ok = sent_kb < 200.0 && r95 < 50.0;
        println!(
            "| {name} | {} | {:.1} | {sent_kb:.1} ({}) | {r50:.1} / {r95:.1} | {w50:.1} / {w95:.1} | {} |",
            raw.status,
            raw.bytes as f64 / 1000.0,
            gz.encoding.as_deref().unwrap_or("identity"),
            if ok { "met" } else { "MISSED" }
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let (after, hwm) = rss_kib(pid).unwrap_or_default();
    println!(
        "\nportal: {requests} requests a page; largest page {:.1} KB sent, largest render p95 {:.1} ms",
        worst.0, worst.1
    );
    println!(
        "portal: control plane VmRSS {:.1} MiB before the portal, {:.1} MiB after (+{:.1} MiB; VmHWM {:.1} MiB)",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after as f64 - before as f64) / 1024.0,
        hwm as f64 / 1024.0
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    setup.clean(&dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_counts_its_payload_only() {
        // "hello" (5) + " world" (6) = 11 bytes of payload.
        assert_eq!(dechunked_len(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), 11);
        assert_eq!(dechunked_len(b"0\r\n\r\n"), 0);
        // Percentiles of 1..=20: the median rounds to the 11th, p95 the 19th.
        let mut v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!((pct(&mut v, 0.5), pct(&mut v, 0.95)), (11.0, 19.0));
    }
}
