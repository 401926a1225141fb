//! GPU fragmentation of a node measured against the typical workload mix (FGD,
//! "Beware of Fragmentation", USENIX ATC'23, section 4).
//!
//! For one shape m, F_n(m) is all of n's idle GPU room when m cannot run on n at
//! all (CPU-only shape, GPU model not allowed, not enough CPU, too few GPUs with
//! room), otherwise the idle room on the GPUs too small for m. The node's
//! fragmentation is the frequency-weighted sum. Amounts are in milli-GPUs.
//!
//! A [`FragTable`] pre-resolves the mix against one node state (model checks and
//! per-GPU needs), so evaluating a hypothetical state after a placement is a few
//! integer comparisons per shape and GPU.
use super::state::NodeState;
use super::types::Demand;

/// Marks a GPU the shape can never use (wrong model, or asks more than it has).
const NEVER: u16 = u16::MAX;

#[derive(Debug, Clone)]
struct Row {
    weight: f64,
    count: u32,
    cpu: u64,
    memory: u64,
    /// Per canonical GPU position: milli-GPUs needed there (1000 = must be idle).
    need: Vec<u16>,
}

/// The mix resolved against one node; see the module comment.
#[derive(Debug, Clone, Default)]
pub struct FragTable {
    rows: Vec<Row>,
    /// Summed weight of shapes that can never run here: they see all idle room.
    always: f64,
    /// Also require memory to fit for a shape to count as runnable.
    check_memory: bool,
    /// Count, per shape, the idle room left over after packing the node with as
    /// many copies of the shape as its GPUs, CPU and memory allow (Caldera),
    /// instead of FGD's one-copy test.
    capacity: bool,
}

impl FragTable {
    /// Resolve `shapes` (demand, weight) against `state`'s GPUs.
    pub fn build<'a>(
        state: &NodeState,
        shapes: impl IntoIterator<Item = (&'a Demand, f64)>,
        check_memory: bool,
    ) -> Self {
        let mut table = FragTable {
            rows: Vec::new(),
            always: 0.0,
            check_memory,
            capacity: false,
        };
        for (d, weight) in shapes {
            let count = d.gpu.count();
            if count == 0 || state.gpus.len() < count as usize {
                table.always += weight;
                continue;
            }
            let need: Vec<u16> = state
                .gpus
                .iter()
                .map(|g| {
                    if !d.allows_model(&g.model) {
                        return NEVER;
                    }
                    d.gpu.need_milli(g.capacity).map_or(NEVER, |m| m as u16)
                })
                .collect();
            if need.iter().filter(|n| **n != NEVER).count() < count as usize {
                table.always += weight;
                continue;
            }
            table.rows.push(Row {
                weight,
                count,
                cpu: d.cpu_milli,
                memory: d.memory_mib,
                need,
            });
        }
        table
    }

    /// Switch to capacity fragmentation (see the field `capacity`): for each
    /// shape, `idle - copies * gpu_per_copy`, where `copies` is the most copies
    /// of the shape the node could still host, limited by GPU room, CPU and
    /// memory. It sees CPU or memory that runs out before the GPUs do, which
    /// FGD's one-copy test cannot.
    pub fn with_capacity(mut self) -> Self {
        self.capacity = true;
        self
    }

    /// Fragmentation (milli-GPUs) of a state with per-position free room `free`
    /// (milli-GPUs, canonical positions of the table's node), `cpu_free` and
    /// `memory_free`.
    pub fn frag(&self, free: &[u16], cpu_free: u64, memory_free: u64) -> f64 {
        let idle: u64 = free.iter().map(|&f| f as u64).sum();
        if idle == 0 {
            return 0.0;
        }
        let mut total = self.always * idle as f64;
        if self.capacity {
            for row in &self.rows {
                total +=
                    row.weight * self.capacity_frag(row, free, idle, cpu_free, memory_free) as f64;
            }
            return total;
        }
        for row in &self.rows {
            let starved = cpu_free < row.cpu || (self.check_memory && memory_free < row.memory);
            if starved {
                total += row.weight * idle as f64;
                continue;
            }
            let mut usable = 0u32;
            let mut stranded = 0u64;
            for (&f, &n) in free.iter().zip(row.need.iter()) {
                if f >= n && n != NEVER {
                    usable += 1;
                } else {
                    stranded += f as u64;
                }
            }
            total += row.weight * if usable >= row.count { stranded } else { idle } as f64;
        }
        total
    }
}

impl FragTable {
    fn capacity_frag(
        &self,
        row: &Row,
        free: &[u16],
        idle: u64,
        cpu_free: u64,
        memory_free: u64,
    ) -> u64 {
        let limit = |have: u64, need: u64| have.checked_div(need).unwrap_or(u64::MAX);
        let mut copies = limit(cpu_free, row.cpu);
        if self.check_memory {
            copies = copies.min(limit(memory_free, row.memory));
        }
        // GPU-limited copies: sharing shapes stack on one GPU, whole-GPU shapes
        // need `count` idle GPUs each.
        let (gpu_copies, per_copy) =
            if row.count == 1 && row.need.iter().any(|&n| n != NEVER && n < 1000) {
                let fits: u64 = free
                    .iter()
                    .zip(row.need.iter())
                    .filter(|(_, &n)| n != NEVER && n > 0)
                    .map(|(&f, &n)| f as u64 / n as u64)
                    .sum();
                let per = row
                    .need
                    .iter()
                    .copied()
                    .filter(|&n| n != NEVER)
                    .min()
                    .unwrap_or(1000) as u64;
                (fits, per)
            } else {
                let idle_gpus = free
                    .iter()
                    .zip(row.need.iter())
                    .filter(|(&f, &n)| n != NEVER && f >= n)
                    .count() as u64;
                (idle_gpus / row.count as u64, 1000 * row.count as u64)
            };
        let used = copies.min(gpu_copies).saturating_mul(per_copy);
        idle.saturating_sub(used)
    }
}

/// Per-position free room of `state` in milli-GPUs.
pub fn free_vector(state: &NodeState) -> Vec<u16> {
    state
        .gpus
        .iter()
        .map(|g| g.free_milli().min(1000) as u16)
        .collect()
}

/// Free vector after taking `takes` (position, units) from `state`.
pub fn free_after(state: &NodeState, takes: &[(usize, u64)]) -> Vec<u16> {
    let mut free = free_vector(state);
    for &(p, units) in takes {
        if let (Some(f), Some(g)) = (free.get_mut(p), state.gpus.get(p)) {
            let left = g.free.saturating_sub(units);
            *f = super::types::to_milli(left, g.capacity).min(1000) as u16;
        }
    }
    free
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::state::GpuState;
    use crate::placement::types::GpuDemand;

    fn node(free: &[u64], cpu_free: u64) -> NodeState {
        NodeState {
            healthy: true,
            cordoned: false,
            exclusive_held: false,
            in_use: false,
            labels: Default::default(),
            container_runtime: false,
            cpu_capacity: 96_000,
            cpu_free,
            memory_capacity: 1 << 20,
            memory_free: 1 << 20,
            disk_capacity: 0,
            disk_free: 0,
            gpus: free
                .iter()
                .map(|&f| GpuState {
                    model: "G2".into(),
                    capacity: 1000,
                    free: f,
                })
                .collect(),
            kinds: vec![],
        }
    }

    #[test]
    fn fragmentation_follows_the_paper_cases() {
        let share = Demand {
            gpu: GpuDemand::Share { milli: 500 },
            cpu_milli: 4000,
            ..Demand::default()
        };
        let whole = Demand {
            gpu: GpuDemand::Whole { count: 1 },
            cpu_milli: 8000,
            ..Demand::default()
        };
        let cpu_only = Demand {
            cpu_milli: 1000,
            ..Demand::default()
        };
        let n = node(&[1000, 300, 600], 96_000);
        let shapes = [(&share, 0.5), (&whole, 0.3), (&cpu_only, 0.2)];
        let t = FragTable::build(&n, shapes, false);
        // idle = 1900. share 0.5: only the 300 GPU is too small -> 0.5*300 = 150
        // whole 0.3: 300 and 600 are not idle -> 0.3*900 = 270
        // cpu-only 0.2: cannot use GPUs at all -> 0.2*1900 = 380. Sum 800.
        let f = t.frag(&free_vector(&n), n.cpu_free, n.memory_free);
        assert!((f - 800.0).abs() < 1e-9, "{f}");
        // Without CPU every GPU shape is starved: all 1900 idle counts -> 1900.
        let f = t.frag(&free_vector(&n), 1000, n.memory_free);
        assert!((f - 1900.0).abs() < 1e-9, "{f}");
    }
}
