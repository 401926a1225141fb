//! Where the unallocated GPUs are at the end of a replay, grouped by what each
//! GPU holds: `idle` (nothing placed: its node ran out of CPU or memory, or no
//! request of its model came), or the sorted shares of the sharing tasks on it
//! (`0.81`, `0.47+0.47`). Whole-GPU tasks leave nothing free, so every
//! unallocated milli-GPU is on one of these lines.
//!
//! Why: the allocation figure alone cannot say whether a policy lost GPUs to
//! stranded CPU, to idle GPUs of a scarce model, or to holes on shared GPUs
//! that no request size fits, and each has a different remedy.
use std::collections::BTreeMap;

use serde::Serialize;

use caldera_scheduling::placement::hash::FxHashMap;
use caldera_scheduling::placement::{NodeId, Placement, Pool};

/// Unallocated room on GPUs holding the same contents, in one replay or
/// averaged over seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WasteLine {
    /// `idle`, or the shares on the GPU, largest first (`0.47+0.32`).
    pub contents: String,
    /// GPUs with these contents and some room free.
    pub gpus: f64,
    /// Their free room, in GPUs.
    pub unallocated_gpus: f64,
}

/// Shares (milli) placed on each shared GPU during a replay.
#[derive(Debug, Default)]
pub struct GpuContents {
    shares: FxHashMap<(NodeId, u32), Vec<u32>>,
}

impl GpuContents {
    /// Record a placed sharing request of `milli` (whole-GPU requests fill
    /// their GPUs and need no record).
    pub fn record(&mut self, placement: &Placement, milli: u64) {
        if let [(gpu, _)] = placement.gpus.as_slice() {
            if milli < 1000 {
                self.shares
                    .entry((placement.node, *gpu))
                    .or_default()
                    .push(milli as u32);
            }
        }
    }

    /// The pool's free GPU room grouped by contents, largest loss first.
    pub fn summarise(&self, pool: &Pool) -> Vec<WasteLine> {
        let mut lines: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for (id, node) in pool.nodes() {
            for g in &node.gpus {
                let free = caldera_scheduling::placement::types::to_milli(g.free, g.capacity);
                if free == 0 {
                    continue;
                }
                let contents = match self.shares.get(&(id, g.index)) {
                    Some(shares) if !g.is_idle() => label(shares),
                    _ => "idle".to_string(),
                };
                let line = lines.entry(contents).or_insert((0.0, 0.0));
                line.0 += 1.0;
                line.1 += free as f64 / 1000.0;
            }
        }
        sorted(lines)
    }
}

/// Average per-seed lines (missing lines count as zero in a seed).
pub fn mean(runs: &[&[WasteLine]]) -> Vec<WasteLine> {
    let n = runs.len().max(1) as f64;
    let mut lines: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for run in runs {
        for l in *run {
            let e = lines.entry(l.contents.clone()).or_insert((0.0, 0.0));
            e.0 += l.gpus / n;
            e.1 += l.unallocated_gpus / n;
        }
    }
    sorted(lines)
}

fn sorted(lines: BTreeMap<String, (f64, f64)>) -> Vec<WasteLine> {
    let mut out: Vec<WasteLine> = lines
        .into_iter()
        .map(|(contents, (gpus, unallocated_gpus))| WasteLine {
            contents,
            gpus,
            unallocated_gpus,
        })
        .collect();
    out.sort_by(|a, b| {
        b.unallocated_gpus
            .total_cmp(&a.unallocated_gpus)
            .then_with(|| a.contents.cmp(&b.contents))
    });
    out
}

fn label(shares: &[u32]) -> String {
    let mut s = shares.to_vec();
    s.sort_unstable_by(|a, b| b.cmp(a));
    s.iter()
        .map(|m| format!("{:.2}", *m as f64 / 1000.0))
        .collect::<Vec<_>>()
        .join("+")
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_scheduling::placement::{GpuSlot, GpuUnit, NodeView};

    #[test]
    fn groups_free_room_by_what_the_gpu_holds() {
        let mut pool = Pool::new(GpuUnit::Milli);
        let gpu = |index| GpuSlot {
            index,
            model: "G2".into(),
            capacity: 1000,
            free: 1000,
        };
        let id = pool.upsert_node(NodeView {
            name: "n".into(),
            healthy: true,
            cordoned: false,
            gpus: vec![gpu(0), gpu(1), gpu(2)],
            cpu_capacity_milli: 8000,
            cpu_free_milli: 8000,
            memory_capacity_mib: 8192,
            memory_free_mib: 8192,
            ..NodeView::default()
        });
        let mut contents = GpuContents::default();
        let mut put = |gpu: u32, milli: u64| {
            let p = Placement {
                node: id,
                gpus: vec![(gpu, milli)],
            };
            let d = caldera_scheduling::placement::Demand {
                gpu: caldera_scheduling::placement::GpuDemand::Share {
                    milli: milli as u32,
                },
                cpu_milli: 100,
                ..Default::default()
            };
            pool.commit(&d, &p).expect("fits");
            contents.record(&p, milli);
        };
        put(0, 470);
        put(0, 320);
        put(1, 810);
        let lines = contents.summarise(&pool);
        // GPU 2 idle (1.0 free), GPU 0 0.21 free, GPU 1 0.19 free.
        let got: Vec<(&str, f64)> = lines
            .iter()
            .map(|l| (l.contents.as_str(), l.unallocated_gpus))
            .collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].0, "idle");
        assert!((got[0].1 - 1.0).abs() < 1e-9);
        assert_eq!(got[1].0, "0.47+0.32");
        assert!((got[1].1 - 0.21).abs() < 1e-9);
        assert_eq!(got[2].0, "0.81");
        assert!((got[2].1 - 0.19).abs() < 1e-9);
        // Averaging two seeds, one without the idle GPU.
        let other = vec![lines[2].clone()];
        let m = mean(&[&lines, &other]);
        assert_eq!(m[0].contents, "idle");
        assert!((m[0].gpus - 0.5).abs() < 1e-9);
        assert_eq!(m[1].contents, "0.81");
        assert!((m[1].unallocated_gpus - 0.19).abs() < 1e-9);
    }
}
