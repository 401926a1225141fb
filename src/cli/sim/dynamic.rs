//! `caldera sim --dynamic`: the dynamic replay (static split vs one shared
//! pool) through the real scheduling core; see `caldera_sim::dynamic`.
use std::path::Path;

use caldera_scheduling::placement::PolicyName;
use caldera_sim::dynamic::{self, DynamicConfig};

use super::super::CliError;

/// Options of `caldera sim --dynamic`.
#[derive(clap::Args, Debug)]
pub struct DynamicArgs {
    /// --dynamic: GPUs of the sampled cluster (0 = the whole node list; the
    /// trace's pods then use well under 1% of it).
    #[arg(long, default_value_t = 64)]
    gpus: u32,
    /// --dynamic and --models: share of all tasks marked inference (high
    /// priority; serving a model in the cache replay), drawn among sharing
    /// pods of at most half a GPU.
    #[arg(long, default_value_t = 0.3)]
    pub(super) inference_share: f64,
    /// --dynamic: each tenant's borrowing limit, as a share of its pool's GPUs.
    #[arg(long, default_value_t = 0.5)]
    borrow: f64,
    /// --dynamic: training checkpoints every this many seconds of run time.
    #[arg(long, default_value_t = 600)]
    checkpoint_every: u64,
    /// --dynamic: stop grace of a preemption victim, seconds.
    #[arg(long, default_value_t = 30)]
    grace: u64,
    /// --dynamic: replay only pods alive from this trace second on.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// --dynamic: ... and until this trace second.
    #[arg(long)]
    until: Option<u64>,
}

/// Runs the replay and prints the table (or JSON).
pub fn run(
    a: &DynamicArgs,
    nodes: &Path,
    tasks: &Path,
    policy: &str,
    seeds: &str,
    json: bool,
) -> Result<(), CliError> {
    let policy: PolicyName = policy
        .split(',')
        .next()
        .unwrap_or("caldera")
        .parse()
        .map_err(|e: caldera_scheduling::placement::UnknownPolicy| {
            CliError::Usage(e.to_string())
        })?;
    let seed: u64 = seeds
        .split(['-', ','])
        .next()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| CliError::Usage(format!("--seeds: no seed in `{seeds}`")))?;
    if !(0.0..=1.0).contains(&a.inference_share) || !(0.0..=10.0).contains(&a.borrow) {
        return Err(CliError::Usage(
            "--inference-share must be in [0, 1] and --borrow in [0, 10]".into(),
        ));
    }
    for (path, flag) in [(nodes, "--nodes"), (tasks, "--tasks")] {
        if !path.exists() {
            return Err(CliError::Failed(format!(
                "{}: no such file: pass {flag} with the path of the Alibaba GPU trace (openb) file; \
                 the defaults are relative to the working directory",
                path.display()
            )));
        }
    }
    let cfg = DynamicConfig {
        nodes: nodes.to_path_buf(),
        tasks: tasks.to_path_buf(),
        policy,
        seed,
        gpus: a.gpus,
        inference_share: a.inference_share,
        borrow: a.borrow,
        checkpoint_every_s: a.checkpoint_every,
        stop_grace_s: a.grace,
        from_s: a.from,
        until_s: a.until,
        ..DynamicConfig::default()
    };
    let report = dynamic::run(&cfg).map_err(|e| CliError::Failed(e.to_string()))?;
    if json {
        let out = serde_json::to_string(&report).map_err(|e| CliError::Failed(e.to_string()))?;
        println!("{out}");
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
