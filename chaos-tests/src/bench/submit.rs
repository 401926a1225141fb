//! Acknowledged, durable submissions per second through HTTP. Every 201
//! counted here came back only after the task's record was flushed to disk
//! (the gateway answers after the group-commit flush that covers it).
use super::stats::{loadavg, ms, rss_line, Sample};
use super::Setup;
use crate::keepalive::KeepAlive;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The task every submission asks for: one 20 GB slice of any GPU, 4 cores,
/// an hour. With no nodes it stays queued, which is what a burst looks like.
pub fn task_body(id: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1,"memory_gb":20}},"cpu":{{"cores":4}}}},"duration":"01:00:00"}}"#
    )
}

/// What one burst of submissions did.
#[derive(Debug)]
pub struct Burst {
    pub latencies: Sample,
    /// Requests that got anything but a 201 (or no answer).
    pub errors: usize,
    /// Requests never sent because the deadline passed.
    pub skipped: usize,
    pub wall: Duration,
}

impl Burst {
    pub fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    pub fn describe(&self) -> String {
        format!(
            "{} acknowledged in {:.2} s = {:.0}/s; latency {}; errors {}, not sent (deadline) {}",
            self.latencies.len(),
            self.wall.as_secs_f64(),
            self.rate(),
            self.latencies.describe(),
            self.errors,
            self.skipped
        )
    }
}

/// Submits tasks `{prefix}-0` .. `{prefix}-{n-1}` over `concurrency`
/// keep-alive connections, each sending its next request when the previous
/// one is answered (a closed loop). Stops sending at `deadline`.
pub fn burst(
    addr: &str,
    token: &str,
    prefix: &str,
    n: usize,
    concurrency: usize,
    deadline: Duration,
) -> Burst {
    let concurrency = concurrency.max(1);
    let started = Instant::now();
    let shared = Arc::new((addr.to_string(), token.to_string(), prefix.to_string()));
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let (addr, token, prefix) = &*shared;
                let mut lat = Vec::with_capacity(n / concurrency + 1);
                let (mut errors, mut skipped) = (0usize, 0usize);
                let mut conn = KeepAlive::open(addr, token).ok();
                for i in (w..n).step_by(concurrency) {
                    if started.elapsed() > deadline {
                        skipped += 1;
                        continue;
                    }
                    let body = task_body(&format!("{prefix}-{i}"));
                    let t = Instant::now();
                    let answer = match conn.as_mut() {
                        Some(c) => c.post("/v1/tasks", &body),
                        None => Err(std::io::Error::other("not connected")),
                    };
                    match answer {
                        Ok(a) if a.status == 201 => lat.push(t.elapsed()),
                        Ok(_) => errors += 1,
                        Err(_) => {
                            errors += 1;
                            conn = KeepAlive::open(addr, token).ok();
                        }
                    }
                }
                (lat, errors, skipped)
            })
        })
        .collect();
    let (mut all, mut errors, mut skipped) = (Vec::with_capacity(n), 0, 0);
    for w in workers {
        if let Ok((l, e, s)) = w.join() {
            all.extend(l);
            errors += e;
            skipped += s;
        }
    }
    Burst {
        latencies: Sample::new(all),
        errors,
        skipped,
        wall: started.elapsed(),
    }
}

/// `bench submit`: one fresh control plane per concurrency level, `requests`
/// submissions each; prints a line per level and the best level that keeps
/// p99 under 50 ms.
pub fn run(setup: &Setup, requests: usize, levels: &[usize]) -> Result<(), String> {
    let mut rows = Vec::new();
    for &c in levels {
        let dir = setup.scratch(&format!("submit-c{c}"));
        let cp = setup.control_plane(&dir, &[]);
        let token = cp.tenant("load");
        let before = loadavg();
        let b = burst(&cp.addr, &token, "load", requests, c, setup.deadline);
        let rss = cp.pid().map(rss_line).unwrap_or_default();
        println!(
            "submit concurrency {c}: {}; server RSS {rss}; load before {before}, after {}",
            b.describe(),
            loadavg()
        );
        rows.push((c, b));
        drop(cp);
        setup.clean(&dir);
    }
    println!("\n| concurrency | acknowledged/s | p50 | p99 | max | errors |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for (c, b) in &rows {
        println!(
            "| {c} | {:.0} | {} | {} | {} | {} |",
            b.rate(),
            ms(b.latencies.pct(50.0)),
            ms(b.latencies.pct(99.0)),
            ms(b.latencies.max()),
            b.errors
        );
    }
    let best = rows
        .iter()
        .filter(|(_, b)| b.latencies.pct(99.0) < Duration::from_millis(50) && b.errors == 0)
        .max_by(|a, b| a.1.rate().total_cmp(&b.1.rate()));
    match best {
        Some((c, b)) => println!(
            "\nbest level with p99 < 50 ms: concurrency {c}, {:.0}/s, p50 {}, p99 {}",
            b.rate(),
            ms(b.latencies.pct(50.0)),
            ms(b.latencies.pct(99.0))
        ),
        None => println!("\nno level kept p99 under 50 ms without errors"),
    }
    Ok(())
}
