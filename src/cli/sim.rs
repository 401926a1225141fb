//! `caldera sim`: replay the Alibaba GPU trace through the placement engine (the
//! same code the Scheduler actor runs) and print allocation quality per policy.
use std::path::{Path, PathBuf};
use std::time::Instant;

use caldera_scheduling::placement::PolicyName;
use caldera_sim::report::{markdown_table, Published};
use caldera_sim::{
    load_nodes, load_tasks, plot, run_policies, PolicyReport, RunSpec, Trace, TraceError,
};

use super::CliError;

mod cache;
mod dynamic;

/// Lines of `--waste` output per policy.
const WASTE_LINES: usize = 12;

const DATA_DIR: &str = "../shared/data/alibaba-gpu-v2023";
const NODES: &str = "../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv";
const TASKS: &str = "../shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv";

/// Arguments of `caldera sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Node list CSV (`sn,cpu_milli,memory_mib,gpu,model`).
    #[arg(long, default_value = NODES)]
    nodes: PathBuf,
    /// Task list CSV (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...`).
    #[arg(long, default_value = TASKS)]
    tasks: PathBuf,
    /// Policy: random, dotprod, bestfit, gpupacking, gpuclustering, fgd, caldera,
    /// a comma-separated list, or `all`.
    #[arg(long, default_value = "caldera")]
    policy: String,
    /// Seeds: a range `42-51` or a list `42,43`.
    #[arg(long, default_value = "42-51")]
    seeds: String,
    /// Inflate the task list to this multiple of the cluster's GPUs.
    #[arg(long, default_value_t = 1.3)]
    inflate: f64,
    /// Print one JSON object (an array of them for several policies).
    #[arg(long)]
    json: bool,
    /// Draw allocation % against arrived % per policy into this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Also print where the unallocated GPUs are at the end, by what each GPU
    /// holds (`idle`, or the shares of the sharing tasks on it), mean per seed.
    #[arg(long)]
    waste: bool,
    /// Run every trace of --data-dir with every policy, next to the published numbers.
    #[arg(long)]
    table: bool,
    /// Folder of the traces and `published_alloc_shared.csv` (for --table).
    #[arg(long, default_value = DATA_DIR)]
    data_dir: PathBuf,
    /// Print the --table as Markdown (for a docs page).
    #[arg(long)]
    markdown: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Score at most this many distinct node states per decision (Nomad-style
    /// bounded search); the default searches the trace cluster exhaustively.
    #[arg(long, default_value_t = caldera_scheduling::placement::placer::DEFAULT_SEARCH_LIMIT)]
    search_limit: usize,
    /// Dynamic replay (arrivals and departures) through the scheduling core:
    /// a static training/inference split against one shared pool.
    #[arg(long)]
    dynamic: bool,
    #[command(flatten)]
    dynamic_args: dynamic::DynamicArgs,
    #[command(flatten)]
    cache_args: cache::CacheArgs,
}

/// Run `caldera sim`.
pub fn run(args: SimArgs) -> Result<(), CliError> {
    if args.dynamic {
        let a = &args;
        return dynamic::run(
            &a.dynamic_args,
            &a.nodes,
            &a.tasks,
            &a.policy,
            &a.seeds,
            a.json,
        );
    }
    let policies = parse_policies(&args.policy, args.table)?;
    let seeds = parse_seeds(&args.seeds)?;
    if !(args.inflate > 0.0 && args.inflate <= 10.0) {
        return Err(CliError::Usage(format!(
            "--inflate must be in (0, 10], got {}",
            args.inflate
        )));
    }
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if args.cache_args.wanted() {
        let a = &args;
        return cache::run(
            &a.cache_args,
            cache::Common {
                nodes: &a.nodes,
                tasks: &a.tasks,
                data_dir: &a.data_dir,
                policy: &a.policy,
                seeds,
                inflate: a.inflate,
                inference_share: a.dynamic_args.inference_share,
                threads,
                json: a.json,
            },
        );
    }
    let spec = RunSpec {
        policies,
        seeds,
        inflate: args.inflate,
        threads,
        search_limit: args.search_limit,
    };
    let started = Instant::now();
    if args.table {
        return table(&args, &spec, started);
    }
    let nodes = load_nodes(&args.nodes).map_err(|e| trace_failed(e, "--nodes"))?;
    let tasks = load_tasks(&args.tasks).map_err(|e| trace_failed(e, "--tasks"))?;
    let trace = Trace {
        name: trace_name(&args.tasks),
        nodes,
        tasks,
    };
    let reports = run_policies(std::slice::from_ref(&trace), &spec);
    if let Some(path) = &args.plot {
        plot::draw(
            path,
            &format!("GPU allocation, trace {}", trace.name),
            &reports,
        )
        .map_err(|e| CliError::Failed(e.to_string()))?;
    }
    if args.json {
        let out = if reports.len() == 1 {
            serde_json::to_string(&reports[0])
        } else {
            serde_json::to_string(&reports)
        };
        println!("{}", out.map_err(|e| CliError::Failed(e.to_string()))?);
    } else {
        println!(
            "trace {} ({} nodes, {} GPUs, {} tasks), seeds {}, inflate {}",
            trace.name,
            trace.nodes.len(),
            trace.capacity_milli() / 1000,
            trace.tasks.len(),
            args.seeds,
            args.inflate
        );
        for r in &reports {
            println!("{}", r.text());
            if args.waste {
                print!("{}", r.waste_text(WASTE_LINES));
            }
        }
        println!("time taken: {:.1}s", started.elapsed().as_secs_f64());
    }
    Ok(())
}

/// A trace that cannot be loaded, named with the flag that points at it: the
/// defaults are relative to the working directory (`../shared/data/...`, as
/// laid out beside this repository), so from anywhere else the file is simply
/// not there and a bare "No such file or directory" says nothing useful.
pub fn trace_failed(e: TraceError, flag: &str) -> CliError {
    match &e {
        TraceError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            CliError::Failed(format!(
                "{e} [{}]: pass {flag} with the path of the Alibaba GPU trace (openb) files; \
                 the defaults are relative to the working directory ({DATA_DIR})",
                e.name()
            ))
        }
        _ => CliError::Failed(format!("{e} [{}]", e.name())),
    }
}

fn table(args: &SimArgs, spec: &RunSpec, started: Instant) -> Result<(), CliError> {
    let dir = &args.data_dir;
    let nodes = load_nodes(&dir.join("openb_node_list_gpu_node.csv"))
        .map_err(|e| trace_failed(e, "--data-dir"))?;
    let published = Published::load(&dir.join("published_alloc_shared.csv")).unwrap_or_default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| CliError::Failed(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("openb_pod_list_") && n.ends_with(".csv"))
        })
        .collect();
    // The default trace first, then the variants by name.
    files.sort_by_key(|p| (trace_name(p) != "default", trace_name(p)));
    let mut traces = Vec::new();
    for f in &files {
        let tasks = load_tasks(f).map_err(|e| trace_failed(e, "--data-dir"))?;
        traces.push(Trace {
            name: trace_name(f),
            nodes: nodes.clone(),
            tasks,
        });
    }
    let reports = run_policies(&traces, spec);
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&reports).map_err(|e| CliError::Failed(e.to_string()))?
        );
    } else if args.markdown {
        print!("{}", markdown_table(&reports, &published));
        println!(
            "\n{} traces x {} policies x {} seeds in {secs:.0}s ({} threads)",
            traces.len(),
            spec.policies.len(),
            spec.seeds.len(),
            spec.threads
        );
    } else {
        print_text_table(&reports, &published);
        println!("time taken: {secs:.1}s");
    }
    if let Some(path) = &args.plot {
        let first: Vec<PolicyReport> = reports
            .iter()
            .filter(|r| r.trace == "default")
            .cloned()
            .collect();
        plot::draw(path, "GPU allocation, trace default", &first)
            .map_err(|e| CliError::Failed(e.to_string()))?;
    }
    Ok(())
}

fn print_text_table(reports: &[PolicyReport], published: &Published) {
    for r in reports {
        let paper = |a| {
            published
                .get(&r.trace, a, &r.policy)
                .map(|v| format!("{v:6.2}"))
                .unwrap_or_else(|| "     -".into())
        };
        println!(
            "{:<11} {:<14} @100% {:6.2} (paper {})  @130% {:6.2} (paper {})  unallocated {:6.1}",
            r.trace,
            r.policy,
            r.alloc_pct_at_100,
            paper(100),
            r.alloc_pct_at_130,
            paper(130),
            r.unallocated_gpus_at_130
        );
    }
}

fn trace_name(path: &Path) -> String {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");
    stem.strip_prefix("openb_pod_list_")
        .unwrap_or(stem)
        .to_string()
}

fn parse_policies(raw: &str, table: bool) -> Result<Vec<PolicyName>, CliError> {
    if raw.eq_ignore_ascii_case("all") || (table && raw == "caldera") {
        return Ok(PolicyName::ALL.to_vec());
    }
    raw.split(',')
        .map(|p| {
            p.parse::<PolicyName>()
                .map_err(|e| CliError::Usage(e.to_string()))
        })
        .collect()
}

fn parse_seeds(raw: &str) -> Result<Vec<u64>, CliError> {
    let bad = || CliError::Usage(format!("--seeds: expected `42-51` or `42,43`, got `{raw}`"));
    let seeds: Vec<u64> = if let Some((a, b)) = raw.split_once('-') {
        let (a, b): (u64, u64) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if b < a || b - a > 10_000 {
            return Err(bad());
        }
        (a..=b).collect()
    } else {
        raw.split(',')
            .map(|s| s.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?
    };
    if seeds.is_empty() {
        return Err(bad());
    }
    Ok(seeds)
}

#[cfg(test)]
mod trace_error_tests {
    use super::*;

    #[test]
    fn a_missing_trace_names_the_flag_that_points_at_it() {
        let e = load_nodes(std::path::Path::new("/nowhere/nodes.csv")).unwrap_err();
        let CliError::Failed(msg) = trace_failed(e, "--nodes") else {
            panic!("a failure, not a usage error");
        };
        assert!(msg.contains("/nowhere/nodes.csv"), "{msg}");
        assert!(msg.contains("pass --nodes"), "{msg}");
        assert!(msg.contains("[trace_io]"), "{msg}");
    }
}
