//! Submission load generator: acknowledged, durable submissions per second
//! through HTTP, with latency percentiles. Every 201 counted here came back only
//! after the task's record was flushed to disk.
//!
//! `cargo run --release -p caldera-chaos-tests --bin loadgen -- --bin target/release/caldera --requests 20000 --concurrency 32`
use caldera_chaos_tests::{ControlPlane, OPERATOR_TOKEN};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Args {
    bin: PathBuf,
    requests: usize,
    concurrency: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        bin: PathBuf::from("target/release/caldera"),
        requests: 20_000,
        concurrency: 32,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--bin" => a.bin = PathBuf::from(v),
            "--requests" => {
                a.requests = v
                    .parse()
                    .map_err(|_| format!("--requests: not a number: {v}"))?
            }
            "--concurrency" => {
                a.concurrency = v
                    .parse()
                    .map_err(|_| format!("--concurrency: not a number: {v}"))?
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

/// One keep-alive connection: send a request, read one response.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn open(addr: &str) -> std::io::Result<Conn> {
        let w = TcpStream::connect(addr)?;
        w.set_nodelay(true)?;
        Ok(Conn {
            r: BufReader::new(w.try_clone()?),
            w,
        })
    }

    fn post(&mut self, addr: &str, token: &str, path: &str, body: &str) -> std::io::Result<u16> {
        write!(
            self.w,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let mut line = String::new();
        self.r.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut len = 0usize;
        loop {
            line.clear();
            self.r.read_line(&mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut buf = vec![0; len];
        self.r.read_exact(&mut buf)?;
        Ok(status)
    }
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(2);
        }
    };
    let dir = std::env::temp_dir().join(format!("caldera-loadgen-{}", std::process::id()));
    let cp = ControlPlane::start(&args.bin, &dir, &[("CALDERA_HTTP_WORKERS", "2")]);
    let token = cp.tenant("load");
    let addr = cp.addr.clone();
    let per = args.requests / args.concurrency;
    let started = Instant::now();
    let workers: Vec<_> = (0..args.concurrency)
        .map(|w| {
            let (addr, token) = (addr.clone(), token.clone());
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(per);
                let mut errors = 0usize;
                let Ok(mut c) = Conn::open(&addr) else { return (lat, per) };
                for i in 0..per {
                    let body = format!(
                        r#"{{"task_id":"load-{w}-{i}","task_type":"training","resources":{{"gpu":{{"count":1,"memory_gb":20}},"cpu":{{"cores":4}}}},"duration":"01:00:00"}}"#
                    );
                    let t = Instant::now();
                    match c.post(&addr, &token, "/v1/tasks", &body) {
                        Ok(201) => lat.push(t.elapsed()),
                        _ => {
                            errors += 1;
                            if let Ok(n) = Conn::open(&addr) {
                                c = n;
                            }
                        }
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let mut all: Vec<Duration> = Vec::new();
    let mut errors = 0;
    for w in workers {
        if let Ok((l, e)) = w.join() {
            all.extend(l);
            errors += e;
        }
    }
    let wall = started.elapsed();
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "acknowledged durable submissions: {} in {:.2}s = {:.0}/s; p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; errors {errors}; concurrency {}",
        all.len(),
        wall.as_secs_f64(),
        all.len() as f64 / wall.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        all.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        args.concurrency
    );
    let _ = OPERATOR_TOKEN;
    drop(cp);
    let _ = std::fs::remove_dir_all(&dir);
}
