//! Averaging seeds into per-policy reports, and printing them: plain text, JSON,
//! and the Markdown table (`docs/benchmarks/placement.md`) next to the paper's
//! published numbers.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::replay::SeedRun;
use super::trace::TraceError;
use super::waste::{self, WasteLine};
use caldera_scheduling::placement::PolicyName;

/// One policy on one trace, averaged over seeds.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyReport {
    /// Trace name.
    pub trace: String,
    /// Policy name.
    pub policy: String,
    /// Mean GPU allocation % when arrivals reach 100%.
    pub alloc_pct_at_100: f64,
    /// Mean GPU allocation % at the end (arrivals at the inflation target, 130%).
    pub alloc_pct_at_130: f64,
    /// Mean unallocated GPUs at the end.
    pub unallocated_gpus_at_130: f64,
    /// Mean failed tasks per seed, by reason.
    pub failed_by_reason: BTreeMap<String, f64>,
    /// Mean unallocated GPUs at the end by what the GPU holds, largest first.
    pub unallocated_by_contents: Vec<WasteLine>,
    /// Replay time summed over seeds, seconds.
    pub seconds: f64,
    /// Every seed's outcome.
    pub per_seed: Vec<SeedRun>,
    /// Mean (arrived %, allocated %) curve on a 1% grid.
    #[serde(skip)]
    pub curve: Vec<(f64, f64)>,
}

impl PolicyReport {
    /// Average `runs` (capacity in milli-GPUs, for the unallocated count).
    pub fn new(
        trace: &str,
        policy: PolicyName,
        runs: Vec<SeedRun>,
        seconds: f64,
        capacity_milli: u64,
    ) -> Self {
        let n = runs.len().max(1) as f64;
        let mean = |f: fn(&SeedRun) -> f64| runs.iter().map(f).sum::<f64>() / n;
        let at_end = mean(|r| r.alloc_pct_at_end);
        let mut failed: BTreeMap<String, f64> = BTreeMap::new();
        for r in &runs {
            for (k, v) in &r.failed_by_reason {
                *failed.entry(k.clone()).or_insert(0.0) += *v as f64 / n;
            }
        }
        PolicyReport {
            trace: trace.to_string(),
            policy: policy.to_string(),
            alloc_pct_at_100: mean(|r| r.alloc_pct_at_100),
            alloc_pct_at_130: at_end,
            unallocated_gpus_at_130: (100.0 - at_end) * capacity_milli as f64 / 100_000.0,
            failed_by_reason: failed,
            unallocated_by_contents: waste::mean(
                &runs.iter().map(|r| r.waste.as_slice()).collect::<Vec<_>>(),
            ),
            seconds,
            curve: mean_curve(&runs),
            per_seed: runs,
        }
    }

    /// Human-readable block.
    pub fn text(&self) -> String {
        let failed: Vec<String> = self
            .failed_by_reason
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect();
        format!(
            "{:<14} alloc@100% {:6.2}%  alloc@130% {:6.2}%  unallocated GPUs {:6.1}  failed/seed [{}]  {:.1}s ({} seeds)",
            self.policy,
            self.alloc_pct_at_100,
            self.alloc_pct_at_130,
            self.unallocated_gpus_at_130,
            failed.join(", "),
            self.seconds,
            self.per_seed.len()
        )
    }

    /// The `top` largest lines of [`PolicyReport::unallocated_by_contents`],
    /// one per line, for `caldera sim --waste`.
    pub fn waste_text(&self, top: usize) -> String {
        let mut out = String::new();
        for l in self.unallocated_by_contents.iter().take(top) {
            let _ = writeln!(
                out,
                "  {:>7.1} GPUs unallocated on {:>6.1} GPUs holding {}",
                l.unallocated_gpus, l.gpus, l.contents
            );
        }
        let rest: f64 = self
            .unallocated_by_contents
            .iter()
            .skip(top)
            .map(|l| l.unallocated_gpus)
            .sum();
        if rest > 0.0 {
            let _ = writeln!(out, "  {rest:>7.1} GPUs unallocated elsewhere");
        }
        out
    }
}

fn mean_curve(runs: &[SeedRun]) -> Vec<(f64, f64)> {
    let end = runs
        .iter()
        .map(|r| r.arrived_pct_at_end)
        .fold(f64::INFINITY, f64::min);
    if runs.is_empty() || !end.is_finite() {
        return Vec::new();
    }
    (0..=end.floor() as usize)
        .map(|x| {
            let x = x as f64;
            let sum: f64 = runs
                .iter()
                .map(|r| {
                    r.curve
                        .iter()
                        .take_while(|(a, _)| *a <= x + 1e-9)
                        .last()
                        .map(|p| p.1)
                        .unwrap_or(0.0)
                })
                .sum();
            (x, sum / runs.len() as f64)
        })
        .collect()
}

/// The paper's published allocation numbers (`published_alloc_shared.csv`).
#[derive(Debug, Clone, Default)]
pub struct Published {
    rows: BTreeMap<(String, u32), BTreeMap<String, f64>>,
}

impl Published {
    /// Load `trace,arrived_pct,Random,DotProd,...`.
    pub fn load(path: &Path) -> Result<Self, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut lines = text.lines();
        let header: Vec<String> = lines
            .next()
            .unwrap_or("")
            .split(',')
            .map(|h| h.trim().to_lowercase())
            .collect();
        let mut rows = BTreeMap::new();
        for (i, line) in lines.enumerate() {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 3 {
                continue;
            }
            let bad = |field: &'static str, value: &str| TraceError::Field {
                path: path.to_path_buf(),
                line: i + 2,
                field,
                value: value.to_string(),
                reason: "not a number",
            };
            let arrived: u32 = f[1].parse().map_err(|_| bad("arrived_pct", f[1]))?;
            let mut by_policy = BTreeMap::new();
            for (h, v) in header.iter().zip(f.iter()).skip(2) {
                by_policy.insert(
                    h.clone(),
                    v.parse::<f64>().map_err(|_| bad("policy value", v))?,
                );
            }
            rows.insert((f[0].to_string(), arrived), by_policy);
        }
        Ok(Published { rows })
    }

    /// Published allocation % of `policy` on `trace` at `arrived` (100 or 130).
    pub fn get(&self, trace: &str, arrived: u32, policy: &str) -> Option<f64> {
        self.rows
            .get(&(trace.to_string(), arrived))
            .and_then(|r| r.get(&policy.to_lowercase()))
            .copied()
    }
}

/// The Markdown table: one row per (trace, policy), ours next to the paper's.
pub fn markdown_table(reports: &[PolicyReport], published: &Published) -> String {
    let mut out = String::from(
        "| trace | policy | alloc % @100% | paper @100% | alloc % @130% | paper @130% | unallocated GPUs @130% | beats paper FGD |\n|---|---|---:|---:|---:|---:|---:|:---:|\n",
    );
    for r in reports {
        let p100 = published.get(&r.trace, 100, &r.policy);
        let p130 = published.get(&r.trace, 130, &r.policy);
        let fgd = (
            published.get(&r.trace, 100, "fgd"),
            published.get(&r.trace, 130, "fgd"),
        );
        let beats = match fgd {
            (Some(a), Some(b)) if r.policy == "caldera" || r.policy == "fgd" => {
                if r.alloc_pct_at_100 > a && r.alloc_pct_at_130 > b {
                    "yes"
                } else {
                    "no"
                }
            }
            _ => "",
        };
        let fmt = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {} | {:.2} | {} | {:.1} | {} |",
            r.trace,
            r.policy,
            r.alloc_pct_at_100,
            fmt(p100),
            r.alloc_pct_at_130,
            fmt(p130),
            r.unallocated_gpus_at_130,
            beats
        );
    }
    out
}
