//! The control plane's benchmarks against real processes on 127.0.0.1 (figures and
//! how to read them: docs/benchmarks/README.md). Build with
//! `cargo build --release -p caldera -p caldera-chaos-tests`, then e.g.
//!
//! ```text
//! bench submit --requests 20000 --concurrency 8,16,32,64
//! bench start-latency --tasks 200
//! bench node-loss --trials 10
//! bench restart --tasks 100000
//! bench fleet --nodes 1000 --tasks 100000
//! bench agent-memory --workloads 4
//! bench warmup --nodes 8 --size-mib 1024 --origin-mbps 100
//! bench swap --replicas 4 --size-mib 4 --server target/debug/infer-server
//! bench portal --nodes 100 --requests 20
//! ```
//!
//! Common flags: `--bin PATH` (the caldera binary; default
//! `target/release/caldera`), `--dir PATH` (scratch; default a temp dir),
//! `--env KEY=VALUE` (server environment, repeatable), `--deadline-s N`
//! (longest load phase, default 600), `--keep` (keep logs and sled files).
use caldera_chaos_tests::bench::{self, Setup};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str =
    "usage: bench <submit|start-latency|node-loss|restart|fleet|agent-memory|warmup|swap|portal> [flags]
  submit        --requests N (20000) --concurrency C[,C..] (8,16,32,64)
  start-latency --tasks N (200) [--reservation] [--image IMAGE: alternate with container tasks]
  node-loss     --trials N (10)
  restart       --tasks N (100000) --restarts R (3) --concurrency C (32)
  fleet         --nodes N (1000) --tasks N (100000) --threads T (4) --concurrency C (32) --hold-s S (0)
  agent-memory  --workloads N (4)
  warmup        --nodes N (8) --size-mib M (1024) --origin-mbps R (100: the emulated shared
                storage's cap, MB/s) --rounds K (1) --warm-starts W (5)
  swap          --replicas N (4) --size-mib M (4) --server PATH (target/debug/infer-server:
                the test fixture, built by `cargo test --test it hot_swap:: --no-run`)
  portal        --nodes N (100) --requests R (20: per page); 1,000 tasks
common: --bin PATH --dir PATH --env KEY=VALUE --deadline-s N --keep";

/// Flags that take no value.
const SWITCHES: &[&str] = &["--keep", "--reservation"];

/// Flags after the subcommand: `--name value`, or `--name` alone for a switch.
struct Flags {
    values: HashMap<String, String>,
    env: Vec<(String, String)>,
    switches: Vec<String>,
}

impl Flags {
    fn parse(args: impl Iterator<Item = String>) -> Result<Flags, String> {
        let mut f = Flags {
            values: HashMap::new(),
            env: Vec::new(),
            switches: Vec::new(),
        };
        let mut it = args;
        while let Some(k) = it.next() {
            if SWITCHES.contains(&k.as_str()) {
                f.switches.push(k);
                continue;
            }
            if !k.starts_with("--") {
                return Err(format!("unexpected argument {k}"));
            }
            let v = it.next().ok_or(format!("{k} needs a value"))?;
            if k == "--env" {
                let (key, value) = v
                    .split_once('=')
                    .ok_or(format!("--env wants KEY=VALUE, got {v}"))?;
                f.env.push((key.to_string(), value.to_string()));
            } else {
                f.values.insert(k, v);
            }
        }
        Ok(f)
    }

    fn number(&mut self, name: &str, default: usize) -> Result<usize, String> {
        match self.values.remove(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("{name}: not a number: {v}")),
        }
    }

    fn numbers(&mut self, name: &str, default: &[usize]) -> Result<Vec<usize>, String> {
        match self.values.remove(name) {
            None => Ok(default.to_vec()),
            Some(v) => v
                .split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .map_err(|_| format!("{name}: not a number: {n}"))
                })
                .collect(),
        }
    }

    fn text(&mut self, name: &str) -> Option<String> {
        self.values.remove(name)
    }

    fn switch(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }

    /// Errors on any flag the subcommand did not take.
    fn done(self) -> Result<(), String> {
        match self.values.keys().next() {
            Some(k) => Err(format!("unknown flag {k}")),
            None => Ok(()),
        }
    }
}

fn setup(f: &mut Flags) -> Result<Setup, String> {
    let bin = PathBuf::from(
        f.values
            .remove("--bin")
            .unwrap_or_else(|| "target/release/caldera".into()),
    );
    if !bin.exists() {
        return Err(format!("no caldera binary at {}", bin.display()));
    }
    let base = f
        .values
        .remove("--dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("caldera-bench-{}", std::process::id()))
        });
    let deadline = Duration::from_secs(f.number("--deadline-s", 600)? as u64);
    Ok(Setup {
        bin,
        base,
        env: f.env.clone(),
        deadline,
        keep: f.switch("--keep"),
    })
}

fn run(cmd: &str, mut f: Flags) -> Result<(), String> {
    let s = setup(&mut f)?;
    if f.switch("--reservation") && cmd != "start-latency" {
        return Err("--reservation belongs to start-latency".into());
    }
    let result = match cmd {
        "submit" => {
            let requests = f.number("--requests", 20_000)?;
            let levels = f.numbers("--concurrency", &[8, 16, 32, 64])?;
            f.done()?;
            bench::submit::run(&s, requests, &levels)
        }
        "start-latency" => {
            let tasks = f.number("--tasks", 200)?;
            let reservation = f.switch("--reservation");
            let image = f.text("--image");
            f.done()?;
            bench::start_latency::run(&s, tasks, reservation, image.as_deref())
        }
        "node-loss" => {
            let trials = f.number("--trials", 10)?;
            f.done()?;
            bench::node_loss::run(&s, trials)
        }
        "restart" => {
            let tasks = f.number("--tasks", 100_000)?.max(1);
            let restarts = f.number("--restarts", 3)?;
            let concurrency = f.number("--concurrency", 32)?;
            f.done()?;
            bench::restart::run(&s, tasks, restarts, concurrency)
        }
        "fleet" => {
            let nodes = f.number("--nodes", 1000)?;
            let tasks = f.number("--tasks", 100_000)?;
            let threads = f.number("--threads", 4)?;
            let concurrency = f.number("--concurrency", 32)?;
            let hold = Duration::from_secs(f.number("--hold-s", 0)? as u64);
            f.done()?;
            bench::fleet::run(&s, nodes, tasks, threads, concurrency, hold)
        }
        "agent-memory" => {
            let workloads = f.number("--workloads", 4)?;
            f.done()?;
            bench::fleet::agent_memory(&s, workloads)
        }
        "warmup" => {
            let run = bench::warmup::WarmupRun {
                nodes: f.number("--nodes", 8)?.max(1),
                size_bytes: (f.number("--size-mib", 1024)?.max(1) as u64) << 20,
                origin_bytes_per_s: f.number("--origin-mbps", 100)? as u64 * 1_000_000,
                rounds: f.number("--rounds", 1)?.max(1),
                warm_starts: f.number("--warm-starts", 5)?,
            };
            f.done()?;
            bench::warmup::run(&s, &run)
        }
        "swap" => {
            let run = bench::swap::SwapRun {
                replicas: f.number("--replicas", 4)?.max(1),
                size_bytes: (f.number("--size-mib", 4)?.max(1) as u64) << 20,
                server: f
                    .values
                    .remove("--server")
                    .unwrap_or_else(|| "target/debug/infer-server".into()),
            };
            f.done()?;
            bench::swap::run(&s, &run)
        }
        "portal" => {
            let nodes = f.number("--nodes", 100)?.max(1);
            let requests = f.number("--requests", 20)?.max(1);
            f.done()?;
            bench::portal::run(&s, nodes, requests)
        }
        other => Err(format!("unknown subcommand {other}")),
    };
    if !s.keep {
        let _ = std::fs::remove_dir_all(&s.base);
    }
    result
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(cmd) = args.next().filter(|c| c != "--help" && c != "-h") else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let outcome = Flags::parse(args).and_then(|f| run(&cmd, f));
    if let Err(e) = outcome {
        eprintln!("bench {cmd}: {e}\n{USAGE}");
        std::process::exit(1);
    }
}
