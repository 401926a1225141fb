//! Restart with many persisted tasks: fill a control plane through HTTP (no
//! nodes, so every task stays queued), kill -9 it, start it again, and time
//! until `/healthz` answers and until a task's own status answers.
use super::stats::{dir_bytes, loadavg, ms, rss_line, Sample};
use super::submit::burst;
use super::Setup;
use crate::http::Api;
use std::time::{Duration, Instant};

/// How often the client knocks while the server boots.
const KNOCK: Duration = Duration::from_millis(5);
/// Give up on one restart after this long.
const BOOT_LIMIT: Duration = Duration::from_secs(120);

/// Polls `path` until it answers 200; the time since `from`, if it did.
fn answered(api: &Api, path: &str, from: Instant) -> Option<Duration> {
    while from.elapsed() < BOOT_LIMIT {
        if api.get(path).status == 200 {
            return Some(from.elapsed());
        }
        std::thread::sleep(KNOCK);
    }
    None
}

/// `line` without ANSI colour escapes (the server colours its log).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip up to and including the escape's final letter.
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `bench restart`.
pub fn run(setup: &Setup, tasks: usize, restarts: usize, concurrency: usize) -> Result<(), String> {
    let dir = setup.scratch("restart");
    let mut cp = setup.control_plane(&dir, &[]);
    let token = cp.tenant("restart");
    let fill = burst(&cp.addr, &token, "fill", tasks, concurrency, setup.deadline);
    println!("fill: {}", fill.describe());
    let stored = fill.latencies.len();
    let pid = cp.pid().unwrap_or(0);
    println!(
        "server RSS holding {stored} tasks: {}; data dir {:.1} MiB",
        rss_line(pid),
        dir_bytes(&cp.data_dir) as f64 / (1024.0 * 1024.0)
    );
    let tenant = cp.api(&token);
    let (first, last) = ("/v1/tasks/fill-0", format!("/v1/tasks/fill-{}", tasks - 1));
    let (mut health, mut task) = (Vec::new(), Vec::new());
    for r in 0..restarts {
        let before = loadavg();
        cp.relaunch();
        let t0 = Instant::now();
        let h = answered(&cp.operator(), "/healthz", t0)
            .ok_or(format!("restart {r}: no /healthz within {BOOT_LIMIT:?}"))?;
        let t = answered(&tenant, &last, t0).ok_or(format!(
            "restart {r}: {last} not answered within {BOOT_LIMIT:?}"
        ))?;
        let first_ok = tenant.get(first).status == 200;
        let pid = cp.pid().unwrap_or(0);
        let rss_at_answer = rss_line(pid);
        std::thread::sleep(Duration::from_secs(3));
        println!(
            "restart {r}: /healthz after {}, GET {last} after {} (fill-0 there too: {first_ok}); RSS at answer {rss_at_answer}, 3 s later {}; load before {before}",
            ms(h),
            ms(t),
            rss_line(pid)
        );
        health.push(h);
        task.push(t);
    }
    let (health, task) = (Sample::new(health), Sample::new(task));
    println!("\n| {stored} tasks, kill -9 then start | median | max |");
    println!("|---|---:|---:|");
    println!(
        "| until /healthz answers | {} | {} |",
        ms(health.pct(50.0)),
        ms(health.max())
    );
    println!(
        "| until GET /v1/tasks/<id> answers | {} | {} |",
        ms(task.pct(50.0)),
        ms(task.max())
    );
    let boot = std::fs::read_to_string(&cp.log).unwrap_or_default();
    if let Some(line) = boot
        .lines()
        .rev()
        .find(|l| l.contains("control plane booted"))
    {
        println!("last boot, server log: {}", plain(line));
    }
    drop(cp);
    setup.clean(&dir);
    Ok(())
}
