//! The typical workload mix: the most frequent request shapes that together cover
//! a share (95%) of requests, with their frequencies. Fragmentation is measured
//! against it (FGD, ATC'23). Built from a trace up front, or online from the
//! demands the live scheduler sees.
use std::collections::HashMap;

use super::types::{Demand, GpuDemand};

/// Share of requests the typical shapes must cover (the paper's 95%).
pub const DEFAULT_COVERAGE: f64 = 0.95;

/// How many observations between rebuilds of the shape list in online use.
const REBUILD_EVERY: u64 = 64;

/// Observations after which old counts are halved, so the mix follows drift.
const DECAY_WINDOW: f64 = 20_000.0;

/// One typical shape: its demand (memory = mean of its members) and frequency.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// The request shape (labels, disk and exclusivity dropped).
    pub demand: Demand,
    /// Share of requests with this shape, among typical shapes (sums to 1).
    pub freq: f64,
}

/// Shape key: the paper keys shapes by (CPU, GPU request, GPU models), not memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ShapeKey {
    gpu: GpuDemand,
    models: Vec<String>,
    cpu_milli: u64,
}

#[derive(Debug, Clone, Default)]
struct Tally {
    count: f64,
    memory_sum: f64,
    first_seen: u64,
}

/// The typical mix; see the module comment.
#[derive(Debug, Clone)]
pub struct WorkloadMix {
    shapes: Vec<Shape>,
    tallies: HashMap<ShapeKey, Tally>,
    coverage: f64,
    observed: u64,
    version: u64,
}

impl Default for WorkloadMix {
    /// A built-in mix shaped like the Alibaba 2023 trace (sharing tasks around
    /// half a GPU, single whole GPUs, a few multi-GPU jobs, CPU-only tasks),
    /// used until real demands have been observed.
    fn default() -> Self {
        let shape = |gpu: GpuDemand, cores: u64, gib: u64, freq: f64| Shape {
            demand: Demand {
                gpu,
                cpu_milli: cores * 1000,
                memory_mib: gib * 1024,
                ..Demand::default()
            },
            freq,
        };
        let shapes = vec![
            shape(GpuDemand::Whole { count: 1 }, 8, 32, 0.40),
            shape(GpuDemand::Share { milli: 500 }, 6, 16, 0.20),
            shape(GpuDemand::Share { milli: 250 }, 4, 8, 0.10),
            shape(GpuDemand::None, 4, 8, 0.13),
            shape(GpuDemand::Whole { count: 2 }, 16, 64, 0.08),
            shape(GpuDemand::Whole { count: 4 }, 32, 128, 0.05),
            shape(GpuDemand::Whole { count: 8 }, 64, 256, 0.04),
        ];
        WorkloadMix {
            shapes,
            tallies: HashMap::new(),
            coverage: DEFAULT_COVERAGE,
            observed: 0,
            version: 0,
        }
    }
}

impl WorkloadMix {
    /// The paper's typical shapes of `demands`: sort shapes by count (ties by
    /// larger request first), keep the top ones until `coverage` of all requests
    /// is reached, renormalise their frequencies.
    pub fn from_demands<'a>(demands: impl IntoIterator<Item = &'a Demand>, coverage: f64) -> Self {
        let mut mix = WorkloadMix {
            shapes: Vec::new(),
            tallies: HashMap::new(),
            coverage,
            observed: 0,
            version: 0,
        };
        for d in demands {
            mix.tally(d);
        }
        mix.rebuild();
        mix
    }

    /// Typical shapes with their frequencies.
    pub fn shapes(&self) -> &[Shape] {
        &self.shapes
    }

    /// Changes whenever the shape list changes (caches keyed on the mix use it).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Online update from a demand the scheduler saw. The shape list is rebuilt
    /// every few observations; returns whether it changed.
    pub fn observe(&mut self, demand: &Demand) -> bool {
        self.tally(demand);
        if self.observed % REBUILD_EVERY == 1 || self.observed < REBUILD_EVERY {
            let before = self.shapes.clone();
            self.rebuild();
            return before != self.shapes;
        }
        false
    }

    fn tally(&mut self, d: &Demand) {
        self.observed += 1;
        let key = ShapeKey {
            gpu: d.gpu.clone(),
            models: d.gpu_models.clone(),
            cpu_milli: d.cpu_milli,
        };
        let seen = self.observed;
        let t = self.tallies.entry(key).or_insert_with(|| Tally {
            first_seen: seen,
            ..Tally::default()
        });
        t.count += 1.0;
        t.memory_sum += d.memory_mib as f64;
        let total: f64 = if self.observed.is_multiple_of(1024) {
            self.tallies.values().map(|t| t.count).sum()
        } else {
            0.0
        };
        if total > DECAY_WINDOW {
            for t in self.tallies.values_mut() {
                t.count /= 2.0;
                t.memory_sum /= 2.0;
            }
            self.tallies.retain(|_, t| t.count >= 0.5);
        }
    }

    fn rebuild(&mut self) {
        let total: f64 = self.tallies.values().map(|t| t.count).sum();
        if total <= 0.0 {
            return;
        }
        let mut list: Vec<(&ShapeKey, &Tally)> = self.tallies.iter().collect();
        // Most frequent first; equal counts: larger request first (the paper's
        // reverse sort), then first seen, so the order never depends on hashing.
        list.sort_by(|a, b| {
            b.1.count
                .total_cmp(&a.1.count)
                .then_with(|| size_key(b.0).cmp(&size_key(a.0)))
                .then_with(|| a.1.first_seen.cmp(&b.1.first_seen))
        });
        let mut kept = Vec::new();
        let mut cum = 0.0;
        for (key, t) in list {
            if cum >= self.coverage * total {
                break;
            }
            cum += t.count;
            kept.push((key, t));
        }
        self.shapes = kept
            .into_iter()
            .map(|(k, t)| Shape {
                demand: Demand {
                    gpu: k.gpu.clone(),
                    gpu_models: k.models.clone(),
                    cpu_milli: k.cpu_milli,
                    memory_mib: (t.memory_sum / t.count).round() as u64,
                    ..Demand::default()
                },
                freq: t.count / cum,
            })
            .collect();
        self.version += 1;
    }
}

fn size_key(k: &ShapeKey) -> (u64, u64, u32, Vec<String>) {
    let (milli, count) = match k.gpu {
        GpuDemand::None => (0, 0),
        GpuDemand::Share { milli } => (milli as u64, 1),
        GpuDemand::Memory { count, per_gpu } => (per_gpu, count),
        GpuDemand::Whole { count } => (1000, count),
    };
    (k.cpu_milli, milli, count, k.models.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(cpu: u64, gpu: GpuDemand) -> Demand {
        Demand {
            gpu,
            cpu_milli: cpu,
            ..Demand::default()
        }
    }

    #[test]
    fn keeps_top_shapes_until_coverage() {
        // 6 x A, 3 x B, 1 x C; coverage 0.8: A (60%) then B (90% >= 80%) kept.
        let a = d(1000, GpuDemand::Share { milli: 500 });
        let b = d(2000, GpuDemand::Whole { count: 1 });
        let c = d(3000, GpuDemand::None);
        let all: Vec<Demand> = [vec![a.clone(); 6], vec![b.clone(); 3], vec![c]].concat();
        let mix = WorkloadMix::from_demands(&all, 0.8);
        assert_eq!(mix.shapes().len(), 2);
        assert!((mix.shapes()[0].freq - 6.0 / 9.0).abs() < 1e-12);
        assert_eq!(mix.shapes()[1].demand.gpu, GpuDemand::Whole { count: 1 });
    }

    #[test]
    fn observe_replaces_the_default_mix() {
        let mut mix = WorkloadMix::default();
        assert!(mix.shapes().len() > 3);
        assert!(mix.observe(&d(1000, GpuDemand::Share { milli: 300 })));
        assert_eq!(mix.shapes().len(), 1);
    }
}
