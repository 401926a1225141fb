//! `caldera sim --models K ...`: the cache replay (cache-aware placement off
//! and on, side by side); see `caldera_sim::cache`.
use std::path::Path;
use std::time::Instant;

use caldera_sim::cache::{self, CacheConfig};
use caldera_sim::report::Published;
use caldera_sim::{load_nodes, load_tasks, Trace};

use super::super::CliError;

/// Options of the cache replay (it runs when `--models` is given).
#[derive(clap::Args, Debug)]
pub struct CacheArgs {
    /// Cache replay: number of model versions the inference tasks serve
    /// (turns the cache replay on).
    #[arg(long)]
    models: Option<u32>,
    /// Cache replay: version sizes, GB, uniform in `A..B`.
    #[arg(long, default_value = "4..40")]
    model_size_gb: String,
    /// Cache replay: Zipf skew of version popularity (0 = uniform).
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    /// Cache replay: weight cache per node, GB.
    #[arg(long, default_value_t = 100.0)]
    cache_gb: f64,
    /// Cache replay: share of each cache filled at the start with versions
    /// drawn by popularity, unused (0 = cold caches).
    #[arg(long, default_value_t = 1.0)]
    prefill: f64,
    /// Cache replay: origin bandwidth, MB/s, shared by concurrent readers.
    #[arg(long, default_value_t = 1000.0)]
    origin_mbps: f64,
    /// Cache replay: bandwidth of one peer-to-peer transfer, MB/s.
    #[arg(long, default_value_t = 1000.0)]
    peer_mbps: f64,
    /// Cache replay: disk read rate when verifying a cached copy, MB/s.
    #[arg(long, default_value_t = 2000.0)]
    disk_mbps: f64,
    /// Cache replay: milliseconds between two task arrivals.
    #[arg(long, default_value_t = 1000)]
    arrival_ms: u64,
    /// Cache replay: the cache term's bound in the "on" column, in the
    /// policy's score units (0 = both columns off).
    #[arg(long, default_value_t = caldera_scheduling::placement::score::weights::DEFAULT_BOUND)]
    cache_bound: f64,
}

impl CacheArgs {
    /// Whether the cache replay was asked for.
    pub fn wanted(&self) -> bool {
        self.models.is_some()
    }
}

/// What the cache replay takes from `caldera sim`'s other options.
pub struct Common<'a> {
    pub nodes: &'a Path,
    pub tasks: &'a Path,
    pub data_dir: &'a Path,
    pub policy: &'a str,
    pub seeds: Vec<u64>,
    pub inflate: f64,
    pub inference_share: f64,
    pub threads: usize,
    pub json: bool,
}

/// Runs the cache replay and prints the side-by-side table (or JSON).
pub fn run(a: &CacheArgs, c: Common) -> Result<(), CliError> {
    let policy = c
        .policy
        .parse()
        .map_err(|e: caldera_scheduling::placement::UnknownPolicy| {
            CliError::Usage(e.to_string())
        })?;
    let cfg = CacheConfig {
        policy,
        models: a.models.unwrap_or(0),
        size_gb: parse_range(&a.model_size_gb)?,
        zipf: a.zipf,
        cache_gb: a.cache_gb,
        prefill: a.prefill,
        origin_mbps: a.origin_mbps,
        peer_mbps: a.peer_mbps,
        disk_mbps: a.disk_mbps,
        inference_share: c.inference_share,
        arrival_s: a.arrival_ms as f64 / 1000.0,
        inflate: c.inflate,
        bound: a.cache_bound,
    };
    cfg.check().map_err(|e| CliError::Usage(e.to_string()))?;
    let nodes = load_nodes(c.nodes).map_err(|e| super::trace_failed(e, "--nodes"))?;
    let tasks = load_tasks(c.tasks).map_err(|e| super::trace_failed(e, "--tasks"))?;
    let trace = Trace {
        name: super::trace_name(c.tasks),
        nodes,
        tasks,
    };
    let started = Instant::now();
    let report = cache::run(&trace, &cfg, &c.seeds, c.threads);
    if c.json {
        let out = serde_json::to_string(&report).map_err(|e| CliError::Failed(e.to_string()))?;
        println!("{out}");
        return Ok(());
    }
    print!("{}", report.text());
    let published =
        Published::load(&c.data_dir.join("published_alloc_shared.csv")).unwrap_or_default();
    if let (Some(p100), Some(p130)) = (
        published.get(&trace.name, 100, "fgd"),
        published.get(&trace.name, 130, "fgd"),
    ) {
        println!(
            "{:<40} {:>16}",
            "FGD published alloc % @100% / @130%",
            format!("{p100:.2} / {p130:.2}")
        );
    }
    println!("time taken: {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `A..B` (or one number) as a pair of GB.
fn parse_range(raw: &str) -> Result<(f64, f64), CliError> {
    let bad = || {
        CliError::Usage(format!(
            "--model-size-gb: expected `A..B` (GB), got `{raw}`"
        ))
    };
    let (a, b) = raw.split_once("..").unwrap_or((raw, raw));
    let a: f64 = a.trim().parse().map_err(|_| bad())?;
    let b: f64 = b.trim().parse().map_err(|_| bad())?;
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_range_reads_as_two_numbers_or_one() {
        assert_eq!(parse_range("4..40").ok(), Some((4.0, 40.0)));
        assert_eq!(parse_range("8").ok(), Some((8.0, 8.0)));
        assert!(parse_range("4-40").is_err());
    }
}
