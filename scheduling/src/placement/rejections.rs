//! Why nodes were turned down, counted by named reason (Nomad's "constraint
//! filtered" counters), so "why is my task pending" is answered from data.
use super::types::{Demand, GpuDemand, GpuUnit, NodeWeights};

/// Node is not healthy.
pub const UNHEALTHY: &str = "unhealthy";
/// Node is cordoned or drained: no new placements.
pub const CORDONED: &str = "cordoned";
/// The demand runs in a container and the node has no container runtime up.
pub const NO_CONTAINER_RUNTIME: &str = "no_container_runtime";
/// Node's GPUs are not of an allowed model (or it has none).
pub const GPU_MODEL: &str = "gpu_model";
/// No (or too few) single GPUs with enough free room.
pub const GPU_ROOM: &str = "gpu_room";
/// Too few entirely free GPUs.
pub const WHOLE_GPUS: &str = "whole_gpus";
/// Not enough free CPU.
pub const CPU: &str = "cpu";
/// Not enough free memory.
pub const MEMORY: &str = "memory";
/// Not enough free disk.
pub const DISK: &str = "disk";
/// Node lacks a required label.
pub const LABELS: &str = "labels";
/// Node is held exclusively, or the request is exclusive and the node is in use.
pub const EXCLUSIVE: &str = "exclusive";

/// Node has no weight cache (`--cache-gb 0`) and the demand serves a model.
pub const NO_WEIGHT_CACHE: &str = "no_weight_cache";
/// Node's cache cannot make room for the demand's weights (what is in use or
/// pinned is never evicted).
pub const WEIGHTS_ROOM: &str = "weights_room";

/// Every GPU with room on the node already serves a replica of the same
/// service (replicas never share a GPU; see `placement::spread`).
pub const REPLICA_GPU: &str = "replica_gpu";
/// The node already holds `max_replicas_per_node` replicas of the service.
pub const REPLICA_NODE: &str = "replica_node";

/// Every reason code, in the order filters run.
pub const ALL_REASONS: [&str; 15] = [
    UNHEALTHY,
    CORDONED,
    NO_CONTAINER_RUNTIME,
    EXCLUSIVE,
    LABELS,
    GPU_MODEL,
    GPU_ROOM,
    WHOLE_GPUS,
    CPU,
    MEMORY,
    DISK,
    NO_WEIGHT_CACHE,
    WEIGHTS_ROOM,
    REPLICA_GPU,
    REPLICA_NODE,
];

/// Count of rejected nodes per reason (each node counted once, under the first
/// filter that turned it down).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejections {
    counts: [u32; ALL_REASONS.len()],
    unit: GpuUnit,
    /// Largest cache room (bytes) among the nodes rejected for [`WEIGHTS_ROOM`],
    /// with that cache's capacity: what the explanation quotes.
    weights_room: Option<(u64, u64)>,
    /// Nodes considered in all.
    pub nodes: u32,
    /// The service's replicas-per-node limit, when replica spread applied
    /// (what the [`REPLICA_NODE`] explanation quotes).
    pub spread_limit: Option<u32>,
}

impl Rejections {
    /// Empty counters; `unit` decides how GPU amounts are worded.
    pub fn new(unit: GpuUnit) -> Self {
        Rejections {
            counts: [0; ALL_REASONS.len()],
            unit,
            weights_room: None,
            nodes: 0,
            spread_limit: None,
        }
    }

    /// Count one node rejected for [`WEIGHTS_ROOM`], remembering its room if
    /// it is the largest seen (a person asks "how close was it?").
    pub fn add_weights_room(&mut self, cache: &NodeWeights) {
        self.add(WEIGHTS_ROOM, 1);
        let seen = (cache.evictable_room_bytes, cache.capacity_bytes);
        if self.weights_room.is_none_or(|best| seen > best) {
            self.weights_room = Some(seen);
        }
    }

    /// Count `n` nodes rejected for `reason` (one of the constants above).
    pub fn add(&mut self, reason: &'static str, n: u32) {
        if let Some(i) = ALL_REASONS.iter().position(|r| *r == reason) {
            self.counts[i] += n;
        }
    }

    /// Move one node counted under `from` to `to` (a filter saw a node that
    /// replica spread had masked: spread is the real reason).
    pub fn recount(&mut self, from: &str, to: &'static str) {
        let Some(i) = ALL_REASONS.iter().position(|r| *r == from) else {
            return;
        };
        if self.counts[i] > 0 {
            self.counts[i] -= 1;
            self.add(to, 1);
        }
    }

    /// `(reason code, count)` for every reason with a non-zero count, largest first.
    pub fn counts(&self) -> Vec<(&'static str, u32)> {
        let mut out: Vec<(&'static str, u32)> = ALL_REASONS
            .iter()
            .zip(self.counts.iter())
            .filter(|(_, c)| **c > 0)
            .map(|(r, c)| (*r, *c))
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.1));
        out
    }

    /// Number of rejected nodes for one reason.
    pub fn count(&self, reason: &str) -> u32 {
        ALL_REASONS
            .iter()
            .position(|r| *r == reason)
            .map(|i| self.counts[i])
            .unwrap_or(0)
    }

    /// A sentence for a person, e.g. `3 nodes: 2 no single GPU with 20 GB free, 1
    /// GPU model is not A100`.
    pub fn summary(&self, demand: &Demand) -> String {
        let parts: Vec<String> = self
            .counts()
            .into_iter()
            .map(|(reason, n)| format!("{n} {}", self.explain(reason, demand)))
            .collect();
        if parts.is_empty() {
            return format!("{} nodes: none rejected", self.nodes);
        }
        let no_runtime = self.count(NO_CONTAINER_RUNTIME);
        if no_runtime > 0 && no_runtime == self.nodes {
            // Nothing else matters until a node can run containers at all.
            let nodes_run = if no_runtime == 1 {
                "1 node runs".to_string()
            } else {
                format!("{no_runtime} nodes run")
            };
            return format!("no node with a container runtime up: {nodes_run} processes only");
        }
        let noun = if self.nodes == 1 { "node" } else { "nodes" };
        format!("{} {noun}: {}", self.nodes, parts.join(", "))
    }

    fn explain(&self, reason: &str, d: &Demand) -> String {
        match reason {
            UNHEALTHY => "unhealthy".into(),
            CORDONED => "cordoned (no new placements)".into(),
            NO_CONTAINER_RUNTIME => "run processes only (no container runtime up)".into(),
            EXCLUSIVE => "held exclusively or in use".into(),
            LABELS => format!("missing labels {}", fmt_labels(d)),
            GPU_MODEL if d.gpu_models.is_empty() => "no GPU".into(),
            GPU_MODEL => format!("GPU model is not {}", d.gpu_models.join(" or ")),
            GPU_ROOM => self.explain_room(d),
            WHOLE_GPUS => format!("fewer than {} idle GPUs", d.gpu.count()),
            CPU => format!("less than {} cores free", d.cpu_milli as f64 / 1000.0),
            MEMORY => format!(
                "less than {} free memory",
                GpuUnit::MiB.describe(d.memory_mib)
            ),
            DISK => format!("less than {} free disk", GpuUnit::MiB.describe(d.disk_mib)),
            NO_WEIGHT_CACHE => "no weight cache (--cache-gb 0)".into(),
            WEIGHTS_ROOM => self.explain_weights_room(reason, d),
            REPLICA_GPU => "with room only on GPUs serving this service".into(),
            REPLICA_NODE => format!(
                "at max_replicas_per_node={} for this service",
                self.spread_limit.unwrap_or(1)
            ),
            other => other.to_string(),
        }
    }

    fn explain_weights_room(&self, reason: &str, d: &Demand) -> String {
        let (room, capacity) = self.weights_room.unwrap_or((0, 0));
        let most = if self.count(reason) > 1 {
            "at most "
        } else {
            ""
        };
        let needs = d
            .weights
            .as_ref()
            .map(|w| format!(" ({} needs {})", w.model, describe_bytes(w.size_bytes)))
            .unwrap_or_default();
        format!(
            "weights do not fit the node cache: {most}{} free of {}{needs}",
            describe_bytes(room),
            describe_bytes(capacity)
        )
    }

    fn explain_room(&self, d: &Demand) -> String {
        let amount = match (&d.gpu, self.unit) {
            (GpuDemand::Share { milli }, GpuUnit::Milli) => self.unit.describe(*milli as u64),
            (GpuDemand::Share { milli }, GpuUnit::MiB) => {
                format!("{} of a GPU", *milli as f64 / 1000.0)
            }
            (GpuDemand::Memory { per_gpu, .. }, unit) => unit.describe(*per_gpu),
            _ => "enough room".into(),
        };
        match d.gpu.count() {
            0 | 1 => format!("no single GPU with {amount} free"),
            n => format!("fewer than {n} GPUs with {amount} free"),
        }
    }
}

/// Bytes the way the GB figures elsewhere read (binary GB, as `--cache-gb`).
/// Under 1 GB in MB (a small cache's room is not "0.0 GB free of 0.0 GB").
pub fn describe_bytes(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{:.1} MB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        GpuUnit::MiB.describe(bytes.div_ceil(1 << 20))
    }
}

fn fmt_labels(d: &Demand) -> String {
    d.labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_under_a_gigabyte_are_said_in_megabytes() {
        assert_eq!(describe_bytes(3_000_000), "2.9 MB");
        assert_eq!(describe_bytes(0), "0.0 MB");
        assert_eq!(describe_bytes(40 << 30), GpuUnit::MiB.describe(40 << 10));
    }

    #[test]
    fn summary_reads_like_a_sentence() {
        let d = Demand {
            gpu: GpuDemand::Memory {
                count: 1,
                per_gpu: 20 * 1024,
            },
            gpu_models: vec!["A100".into()],
            ..Demand::default()
        };
        let mut r = Rejections::new(GpuUnit::MiB);
        r.nodes = 3;
        r.add(GPU_ROOM, 2);
        r.add(GPU_MODEL, 1);
        assert_eq!(
            r.summary(&d),
            "3 nodes: 2 no single GPU with 20 GB free, 1 GPU model is not A100"
        );
        assert_eq!(r.counts(), vec![(GPU_ROOM, 2), (GPU_MODEL, 1)]);
    }
}
