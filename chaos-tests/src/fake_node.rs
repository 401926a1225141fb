//! A fake node agent speaking the real wire protocol over a hand-rolled
//! WebSocket client: enough to hold a session open and heartbeat, so that a
//! benchmark can put a thousand nodes in front of one control plane.
//! It runs no workloads; its hello says every GPU is simulated. Tests use it
//! as a rogue or impostor agent: it says exactly what a test tells it to.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The wire protocol version this fake speaks (`caldera_spec::wire::PROTOCOL_VERSION`).
pub const PROTOCOL: u32 = 6;

/// Opens a session as `name` with `gpus` simulated 80 GB GPUs; returns the socket and the epoch.
pub fn join(addr: &str, token: &str, name: &str, gpus: u32) -> std::io::Result<(TcpStream, u64)> {
    let indices: Vec<u32> = (0..gpus).collect();
    join_with_gpus(addr, token, name, &indices)
}

/// Opens a session as `name` whose hello lists one simulated 80 GB GPU per
/// entry of `indices`, with that index (a test may list one twice). An error
/// carries the control plane's answer when it is not a welcome.
pub fn join_with_gpus(
    addr: &str,
    token: &str,
    name: &str,
    indices: &[u32],
) -> std::io::Result<(TcpStream, u64)> {
    let (s, reply) = hello_listing(addr, token, name, indices, None, None)?;
    let epoch = reply["epoch"]
        .as_u64()
        .ok_or_else(|| std::io::Error::other(format!("no welcome: {reply}")))?;
    Ok((s, epoch))
}

/// Upgrades to the node WebSocket, says hello as `name` (presenting `secret`
/// when given, data dir `/tmp/fake-node/<name>`) and returns the socket with
/// the control plane's first answer: a welcome, or a refusal.
pub fn hello(
    addr: &str,
    token: &str,
    name: &str,
    gpus: u32,
    secret: Option<&str>,
) -> std::io::Result<(TcpStream, serde_json::Value)> {
    let indices: Vec<u32> = (0..gpus).collect();
    hello_listing(addr, token, name, &indices, secret, None)
}

/// [`hello`] (no GPUs, no secret) with `extra`'s top-level fields in place
/// of the hello's own: `{"inventory": {...}}` says whatever inventory a test
/// needs, a rogue agent's impossible one included.
pub fn hello_with(
    addr: &str,
    token: &str,
    name: &str,
    extra: &serde_json::Value,
) -> std::io::Result<(TcpStream, serde_json::Value)> {
    hello_listing(addr, token, name, &[], None, Some(extra))
}

/// [`hello`] with one GPU per entry of `indices`.
fn hello_listing(
    addr: &str,
    token: &str,
    name: &str,
    indices: &[u32],
    secret: Option<&str>,
    extra: Option<&serde_json::Value>,
) -> std::io::Result<(TcpStream, serde_json::Value)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    write!(
        s,
        "GET /v1/nodes/connect HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
    )?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte)?;
        head.push(byte[0]);
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&head).to_string(),
        ));
    }
    let mut hello = serde_json::json!({"type": "hello", "protocol": PROTOCOL, "node_name": name, "agent_version": "fake-node",
        "node_secret": secret, "data_dir": data_dir(name),
        "inventory": inventory(name, indices),
        "workloads": []});
    if let (Some(obj), Some(serde_json::Value::Object(more))) = (hello.as_object_mut(), extra) {
        obj.extend(more.clone());
    }
    send_text(&mut s, &hello.to_string())?;
    let reply = read_json(&mut s)?;
    Ok((s, reply))
}

/// Opens a session as `name` with `gpus` simulated 80 GB GPUs whose
/// inventory lists `runtimes` (each a `RuntimeInfo`: `{"kind": "container",
/// "engine": "podman", "version": "4.3.1", "up": true}`); an empty list is
/// what an agent without a container runtime up reports.
pub fn join_with_runtimes(
    addr: &str,
    token: &str,
    name: &str,
    gpus: u32,
    runtimes: serde_json::Value,
) -> std::io::Result<(TcpStream, u64)> {
    let indices: Vec<u32> = (0..gpus).collect();
    let mut inventory = inventory(name, &indices);
    inventory["runtimes"] = runtimes;
    let extra = serde_json::json!({ "inventory": inventory });
    let (s, reply) = hello_listing(addr, token, name, &[], None, Some(&extra))?;
    let epoch = reply["epoch"]
        .as_u64()
        .ok_or_else(|| std::io::Error::other(format!("no welcome: {reply}")))?;
    Ok((s, epoch))
}

/// The inventory a fake node's hello declares: one simulated 80 GB A100
/// per entry of `indices`, 96 cores, 1 TiB of memory.
fn inventory(name: &str, indices: &[u32]) -> serde_json::Value {
    let gpu_list: Vec<serde_json::Value> = indices
        .iter()
        .enumerate()
        .map(|(n, i)| {
            serde_json::json!({"index": i, "uuid": format!("GPU-SIM-{name}-{n}"), "model": "A100", "memory_total_mb": 81920,
                "memory_used_mb": 0, "utilization_pct": 0, "simulated": true})
        })
        .collect();
    serde_json::json!({"hostname": name, "gpus": gpu_list, "cpu_cores": 96, "memory_total_mb": 1048576, "disks": [],
        "disk_offered_mb": 4194304, "labels": {}, "simulated_host": true, "isolation": "none (fake node)", "gpu_source": "simulated"})
}

/// Opens a session as `name` (`gpus` simulated GPUs) whose hello reports a
/// weight cache of `capacity_bytes` holding verified copies of `cached`
/// (SHA-256s of `size_bytes` each), served to peers at `peer_url`.
pub fn join_with_cache(
    addr: &str,
    token: &str,
    name: &str,
    gpus: u32,
    cache: &WeightCache,
) -> std::io::Result<(TcpStream, u64)> {
    let indices: Vec<u32> = (0..gpus).collect();
    let extra = serde_json::json!({"cache": cache.report(), "peer_url": cache.peer_url});
    let (s, reply) = hello_listing(addr, token, name, &indices, None, Some(&extra))?;
    let epoch = reply["epoch"]
        .as_u64()
        .ok_or_else(|| std::io::Error::other(format!("no welcome: {reply}")))?;
    Ok((s, epoch))
}

/// What a fake node says its weight cache holds (protocol 4's `CacheReport`).
#[derive(Debug, Clone, Default)]
pub struct WeightCache {
    pub capacity_bytes: u64,
    /// Verified copies, each obtained for an operator's (shared) version:
    /// (sha256, size_bytes).
    pub cached: Vec<(String, u64)>,
    pub peer_url: Option<String>,
}

impl WeightCache {
    /// The cache report as the hello and heartbeats carry it.
    pub fn report(&self) -> serde_json::Value {
        let entries: Vec<serde_json::Value> = self
            .cached
            .iter()
            .map(|(sha, size)| {
                // Copies the operator's (shared) versions brought.
                serde_json::json!({"sha256": sha, "size_bytes": size, "last_used_ms": 1, "pinned": false, "in_use": 0, "shared": true})
            })
            .collect();
        let used: u64 = self.cached.iter().map(|(_, s)| s).sum();
        serde_json::json!({"capacity_bytes": self.capacity_bytes, "used_bytes": used,
            "entries": entries, "fetching": [], "counters": {}})
    }
}

/// Sends one warmup report on `sha256`: `progress` is its tagged body, e.g.
/// `{"kind": "verified", "source": "origin", "bytes_fetched": 5, "seconds": 0.1}`.
pub fn warmup(
    s: &mut TcpStream,
    epoch: u64,
    sha256: &str,
    progress: serde_json::Value,
) -> std::io::Result<()> {
    let msg = serde_json::json!({"type": "warmup", "epoch": epoch, "sha256": sha256, "at_ms": 1,
        "progress": progress});
    send(s, &msg)
}

/// The label a warm command's source has in reports (`origin`, `peer NODE`).
pub fn source_label(warm: &serde_json::Value) -> String {
    match warm["source"]["kind"].as_str() {
        Some("peer") => format!(
            "peer {}",
            warm["source"]["node"].as_str().unwrap_or_default()
        ),
        _ => "origin".to_string(),
    }
}

/// Answers a `warm` command as a cache that fetched it: progress halfway,
/// then verified, both naming the command's source.
pub fn answer_warm(s: &mut TcpStream, epoch: u64, warm: &serde_json::Value) -> std::io::Result<()> {
    let sha = warm["sha256"].as_str().unwrap_or_default();
    let size = warm["size_bytes"].as_u64().unwrap_or(0);
    let source = source_label(warm);
    warmup(
        s,
        epoch,
        sha,
        serde_json::json!({"kind": "fetching", "source": source,
        "bytes_done": size / 2, "size_bytes": size, "rate_bytes_per_s": 1_000_000}),
    )?;
    warmup(
        s,
        epoch,
        sha,
        serde_json::json!({"kind": "verified", "source": source,
        "bytes_fetched": size, "seconds": 0.5}),
    )
}

/// The data dir a fake node's hello declares.
pub fn data_dir(name: &str) -> String {
    format!("/tmp/fake-node/{name}")
}

/// Sends one message (any JSON the agent could send).
pub fn send(s: &mut TcpStream, msg: &serde_json::Value) -> std::io::Result<()> {
    send_text(s, &msg.to_string())
}

/// Sends one workload event: `kind` is the event's tagged body, e.g.
/// `{"kind": "exited", "code": 0, "signal": null, "stopped": false}`.
pub fn event(
    s: &mut TcpStream,
    epoch: u64,
    allocation_id: &str,
    task_id: &str,
    kind: serde_json::Value,
) -> std::io::Result<()> {
    let msg = serde_json::json!({"type": "event", "allocation_id": allocation_id, "task_id": task_id,
        "epoch": epoch, "at_ms": 1, "kind": kind});
    send(s, &msg)
}

/// Reads the next message of the control plane's whose `type` is `kind`,
/// skipping others, waiting at most `timeout`.
pub fn expect(
    s: &mut TcpStream,
    kind: &str,
    timeout: Duration,
) -> std::io::Result<serde_json::Value> {
    s.set_read_timeout(Some(timeout))?;
    let found = loop {
        let m = read_json(s)?;
        if m["type"] == kind {
            break m;
        }
    };
    s.set_read_timeout(None)?;
    Ok(found)
}

/// Reads one text frame as JSON.
pub fn read_json(s: &mut TcpStream) -> std::io::Result<serde_json::Value> {
    let text = read_text(s)?;
    serde_json::from_str(&text).map_err(std::io::Error::other)
}

/// Sends one heartbeat with empty metrics.
pub fn heartbeat(s: &mut TcpStream, epoch: u64) -> std::io::Result<()> {
    let hb = format!(
        r#"{{"type":"heartbeat","epoch":{epoch},"metrics":{{"gpus":[],"cpu_used_pct":0.0,"memory_used_mb":0,"disk_free_mb":0,"disk_read_bytes_per_s":0,"disk_write_bytes_per_s":0}},"workloads":[]}}"#
    );
    send_text(s, &hb)
}

/// Reads and drops whatever the control plane sent, without blocking long.
pub fn drain(s: &mut TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(1)));
    let mut buf = [0u8; 65536];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    let _ = s.set_read_timeout(None);
}

fn send_text(s: &mut TcpStream, text: &str) -> std::io::Result<()> {
    let p = text.as_bytes();
    let mut frame = vec![0x81u8];
    match p.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n < 65536 => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    frame.extend_from_slice(&mask);
    frame.extend(p.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    s.write_all(&frame)
}

fn read_text(s: &mut TcpStream) -> std::io::Result<String> {
    let mut h = [0u8; 2];
    s.read_exact(&mut h)?;
    let len = match h[1] & 0x7f {
        126 => {
            let mut b = [0u8; 2];
            s.read_exact(&mut b)?;
            u16::from_be_bytes(b) as usize
        }
        127 => {
            let mut b = [0u8; 8];
            s.read_exact(&mut b)?;
            u64::from_be_bytes(b) as usize
        }
        n => n as usize,
    };
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).to_string())
}
