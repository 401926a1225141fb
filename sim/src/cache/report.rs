//! The cache replay's report: the term off and on, side by side.
use serde::Serialize;

use super::catalogue::GB;
use super::replay::CacheRun;
use super::CacheConfig;

/// One column: every seed of one setting of the term, summed or averaged.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Column {
    /// The term's bound (0: off).
    pub bound: f64,
    pub seeds: usize,
    /// Means per seed.
    pub alloc_pct_at_100: f64,
    pub alloc_pct_at_130: f64,
    pub unallocated_gpus_at_130: f64,
    pub served_per_seed: f64,
    /// Shares of the placed inference tasks.
    pub hit_rate: f64,
    pub join_rate: f64,
    pub peer_rate: f64,
    pub origin_rate: f64,
    /// Placements explained by the term (`weights cached` or `warming`).
    pub noted_rate: f64,
    pub origin_gb_per_seed: f64,
    pub peer_gb_per_seed: f64,
    /// Tasks that found no node because no cache could take their weights.
    pub refused_for_cache_per_seed: f64,
    pub evictions_per_seed: f64,
    /// Time to ready over every placed inference task of every seed, s.
    pub ready_p50_s: f64,
    pub ready_p90_s: f64,
    pub ready_p99_s: f64,
    pub ready_max_s: f64,
}

/// See the module comment.
#[derive(Debug, Clone, Serialize)]
pub struct CacheReport {
    pub trace: String,
    pub config: CacheConfig,
    pub off: Column,
    pub on: Column,
    pub per_seed: Vec<CacheRun>,
}

impl CacheReport {
    /// Split `runs` by bound into the two columns.
    pub fn new(trace: &str, cfg: &CacheConfig, mut runs: Vec<CacheRun>) -> Self {
        runs.sort_by(|a, b| a.bound.total_cmp(&b.bound).then(a.seed.cmp(&b.seed)));
        let (off, on): (Vec<&CacheRun>, Vec<&CacheRun>) = runs.iter().partition(|r| r.bound == 0.0);
        // With `--cache-bound 0` both columns are the term off.
        let on = if on.is_empty() { off.clone() } else { on };
        CacheReport {
            trace: trace.to_string(),
            config: cfg.clone(),
            off: Column::of(&off, 0.0),
            on: Column::of(&on, cfg.bound),
            per_seed: runs,
        }
    }

    /// The side-by-side table a person reads.
    pub fn text(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "cache replay, trace {}, policy {}, {} seeds: {} versions of {}-{} GB, Zipf {}, \
             cache {} GB per node ({}% prefilled), origin {} MB/s shared, peer {} MB/s, \
             disk {} MB/s;\n{}% of tasks serve a model (drawn among sharing tasks of at most \
             0.5 GPU: the trace has no task types), one arrival every {} s\n",
            self.trace,
            c.policy,
            self.off.seeds,
            c.models,
            c.size_gb.0,
            c.size_gb.1,
            c.zipf,
            c.cache_gb,
            (c.prefill * 100.0).round(),
            c.origin_mbps,
            c.peer_mbps,
            c.disk_mbps,
            (c.inference_share * 100.0).round(),
            c.arrival_s
        );
        let (a, b) = (&self.off, &self.on);
        let head = format!("term on (bound {})", b.bound);
        out += &format!("{:<40} {:>16} {:>22}\n", "", "term off", head);
        let pct = |x: f64| format!("{:.1}%", 100.0 * x);
        let rows: Vec<(&str, String, String)> = vec![
            (
                "inference tasks placed / seed",
                f1(a.served_per_seed),
                f1(b.served_per_seed),
            ),
            ("cache hit rate", pct(a.hit_rate), pct(b.hit_rate)),
            (
                "joined a fetch in flight",
                pct(a.join_rate),
                pct(b.join_rate),
            ),
            ("fetched from a peer", pct(a.peer_rate), pct(b.peer_rate)),
            (
                "read from the origin",
                pct(a.origin_rate),
                pct(b.origin_rate),
            ),
            (
                "GB read from the origin / seed",
                f1(a.origin_gb_per_seed),
                f1(b.origin_gb_per_seed),
            ),
            (
                "GB read from peers / seed",
                f1(a.peer_gb_per_seed),
                f1(b.peer_gb_per_seed),
            ),
            (
                "time to ready p50 / p90 (s)",
                ready(a.ready_p50_s, a.ready_p90_s),
                ready(b.ready_p50_s, b.ready_p90_s),
            ),
            (
                "time to ready p99 / max (s)",
                ready(a.ready_p99_s, a.ready_max_s),
                ready(b.ready_p99_s, b.ready_max_s),
            ),
            (
                "GPU alloc % @100% arrivals",
                f2(a.alloc_pct_at_100),
                f2(b.alloc_pct_at_100),
            ),
            (
                "GPU alloc % @130% arrivals",
                f2(a.alloc_pct_at_130),
                f2(b.alloc_pct_at_130),
            ),
            (
                "unallocated GPUs @130%",
                f1(a.unallocated_gpus_at_130),
                f1(b.unallocated_gpus_at_130),
            ),
            (
                "placed where the term counted",
                pct(a.noted_rate),
                pct(b.noted_rate),
            ),
            (
                "tasks refused, no cache room / seed",
                f1(a.refused_for_cache_per_seed),
                f1(b.refused_for_cache_per_seed),
            ),
            (
                "evictions / seed",
                f1(a.evictions_per_seed),
                f1(b.evictions_per_seed),
            ),
        ];
        for (name, x, y) in rows {
            out += &format!("{name:<40} {x:>16} {y:>22}\n");
        }
        if let Some(first) = self.per_seed.iter().find(|r| r.bound > 0.0) {
            out += &format!("first placements, term on, seed {}:\n", first.seed);
            for line in &first.explained {
                out += &format!("  {line}\n");
            }
        }
        out
    }
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

fn f2(x: f64) -> String {
    format!("{x:.2}")
}

fn ready(a: f64, b: f64) -> String {
    format!("{a:.1} / {b:.1}")
}

impl Column {
    fn of(runs: &[&CacheRun], bound: f64) -> Self {
        let n = runs.len().max(1) as f64;
        let mean = |f: &dyn Fn(&CacheRun) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n;
        let served: u32 = runs.iter().map(|r| r.served).sum();
        let share = |f: &dyn Fn(&CacheRun) -> u32| {
            runs.iter().map(|r| f(r)).sum::<u32>() as f64 / served.max(1) as f64
        };
        let mut ready: Vec<f64> = runs
            .iter()
            .flat_map(|r| r.ready_s.iter().copied())
            .collect();
        ready.sort_by(f64::total_cmp);
        Column {
            bound,
            seeds: runs.len(),
            alloc_pct_at_100: mean(&|r| r.alloc_pct_at_100),
            alloc_pct_at_130: mean(&|r| r.alloc_pct_at_end),
            unallocated_gpus_at_130: mean(&|r| r.unallocated_gpus_at_end),
            served_per_seed: served as f64 / n,
            hit_rate: share(&|r| r.hits),
            join_rate: share(&|r| r.joins),
            peer_rate: share(&|r| r.from_peer),
            origin_rate: share(&|r| r.from_origin),
            noted_rate: share(&|r| r.noted),
            origin_gb_per_seed: mean(&|r| r.origin_bytes as f64 / GB),
            peer_gb_per_seed: mean(&|r| r.peer_bytes as f64 / GB),
            refused_for_cache_per_seed: mean(&|r| {
                let f = &r.failed_by_reason;
                let get = |k: &str| f.get(k).copied().unwrap_or(0) as f64;
                get("weights_room") + get("no_weight_cache")
            }),
            evictions_per_seed: mean(&|r| r.evictions as f64),
            ready_p50_s: quantile(&ready, 0.50),
            ready_p90_s: quantile(&ready, 0.90),
            ready_p99_s: quantile(&ready, 0.99),
            ready_max_s: ready.last().copied().unwrap_or(0.0),
        }
    }
}

/// The `q` quantile of sorted `xs` (nearest rank); 0 when empty.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    xs[rank - 1]
}
