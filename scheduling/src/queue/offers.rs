//! What the registered nodes offer when empty, and whether any of them could
//! ever hold a request. One that none could is refused at submission (422) or,
//! where the operator accepts such requests, waits marked `unschedulable`.
//! Registered nodes include lost ones: they may come back. With no node
//! registered yet nothing is known, and every request may wait.
use caldera_spec::gpu_model;
use caldera_spec::resources::gb_to_mib;
use caldera_spec::{NodeInventory, TaskSpec};

/// One kind of node, empty: its GPUs (model, MiB), CPU, memory and disk.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Shape {
    gpus: Vec<(String, u64)>,
    cpu_milli: u64,
    memory_mib: u64,
    disk_mib: u64,
}

impl Shape {
    fn of(n: &NodeInventory) -> Shape {
        let mut gpus: Vec<(String, u64)> = n
            .gpus
            .iter()
            .map(|g| (g.model.clone(), g.memory_total_mb))
            .collect();
        gpus.sort();
        Shape {
            gpus,
            cpu_milli: n.cpu_cores as u64 * 1000,
            memory_mib: n.memory_total_mb,
            disk_mib: n.disk_offered_mb,
        }
    }
}

/// The distinct kinds of registered node (a pool of a thousand nodes has a
/// handful), so a check costs little per submission.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offers {
    shapes: Vec<Shape>,
}

impl Offers {
    /// The offers of these nodes' inventories.
    pub fn of<'a>(nodes: impl Iterator<Item = &'a NodeInventory>) -> Offers {
        let mut shapes: Vec<Shape> = nodes.map(Shape::of).collect();
        shapes.sort();
        shapes.dedup();
        Offers { shapes }
    }

    /// Whether a node of `inv`'s kind is already among these offers (then
    /// registering it again, or one like it, changes nothing).
    pub fn has_kind_of(&self, inv: &NodeInventory) -> bool {
        self.shapes.binary_search(&Shape::of(inv)).is_ok()
    }

    /// Whether two inventories offer the same when empty.
    pub fn same_kind(a: &NodeInventory, b: &NodeInventory) -> bool {
        Shape::of(a) == Shape::of(b)
    }

    /// Largest GPU of any node, MiB (0 without GPUs).
    pub fn largest_gpu_mb(&self) -> u64 {
        let gpus = self.shapes.iter().flat_map(|s| s.gpus.iter());
        gpus.map(|g| g.1).max().unwrap_or(0)
    }

    /// Why no registered node could ever hold `spec`, naming the first
    /// dimension none offers and the largest offer of it; `None` when one
    /// could, or when no node is registered yet.
    pub fn never_fits(&self, spec: &TaskSpec) -> Option<String> {
        if self.shapes.is_empty() {
            return None;
        }
        let r = &spec.resources;
        let gpu = r.gpu.as_ref().map(|g| GpuWant {
            model: g.model.as_deref(),
            count: g.count.max(1) as usize,
            per_gpu_mib: g.memory_gb.map(gb_to_mib).unwrap_or(0),
        });
        if let Some(why) = gpu.as_ref().and_then(|w| self.gpu_shortfall(w)) {
            return Some(why);
        }
        let dims: [Dimension; 3] = [
            ("CPU cores", r.cpu_milli(), |s| s.cpu_milli),
            ("GB of memory", r.memory_mib(), |s| s.memory_mib),
            ("GB of disk", r.disk_mib(), |s| s.disk_mib),
        ];
        for (what, asked, offered) in dims {
            let largest = self.shapes.iter().map(offered).max().unwrap_or(0);
            if asked > largest {
                let (asked, largest) = match what {
                    "CPU cores" => (cores(asked), cores(largest)),
                    _ => (gb(asked), format!("{} GB", gb(largest))),
                };
                return Some(format!(
                    "no node has {asked} {what}; the largest has {largest}"
                ));
            }
        }
        let together = self.shapes.iter().any(|s| {
            gpu.as_ref().is_none_or(|w| w.usable_on(s) >= w.count)
                && dims.iter().all(|(_, asked, offered)| *asked <= offered(s))
        });
        (!together).then(|| "no node has all of it together (GPUs, CPU, memory and disk)".into())
    }

    fn gpu_shortfall(&self, want: &GpuWant) -> Option<String> {
        let label = want.model.map_or(String::new(), |m| format!("{m} "));
        let plural = if want.count == 1 { "" } else { "s" };
        let most = self.shapes.iter().map(|s| want.of_model(s).count());
        let most = most.max().unwrap_or(0);
        if most < want.count {
            let count = want.count;
            return Some(format!(
                "no node has {count} {label}GPU{plural}; the largest has {most}"
            ));
        }
        if want.per_gpu_mib == 0 {
            return None;
        }
        // Per node, the memory of its count-th largest GPU of the model: the
        // most each of `count` GPUs there can give.
        let best = self.shapes.iter().filter_map(|s| {
            let mut mem: Vec<u64> = want.of_model(s).map(|g| g.1).collect();
            mem.sort_unstable_by(|a, b| b.cmp(a));
            mem.get(want.count - 1).copied()
        });
        let best = best.max().unwrap_or(0);
        (best < want.per_gpu_mib).then(|| {
            let (asked, best) = (gb(want.per_gpu_mib), gb(best));
            match want.count {
                1 => format!("no node has a {label}GPU with {asked} GB; the largest has {best} GB"),
                n => format!(
                    "no node has {n} {label}GPUs with {asked} GB each; the largest have {best} GB"
                ),
            }
        })
    }
}

/// A host dimension: its words, what is asked, what a node offers.
type Dimension = (&'static str, u64, fn(&Shape) -> u64);

/// The GPU part of a request.
struct GpuWant<'a> {
    model: Option<&'a str>,
    count: usize,
    per_gpu_mib: u64,
}

impl GpuWant<'_> {
    fn of_model<'s>(&self, s: &'s Shape) -> impl Iterator<Item = &'s (String, u64)> + use<'s, '_> {
        s.gpus
            .iter()
            .filter(|g| self.model.is_none_or(|m| gpu_model::matches(m, &g.0)))
    }

    fn usable_on(&self, s: &Shape) -> usize {
        self.of_model(s).filter(|g| g.1 >= self.per_gpu_mib).count()
    }
}

/// MiB as GB (81920 → "80", 1536 → "1.5").
fn gb(mib: u64) -> String {
    whole_or_tenths(mib as f64 / 1024.0)
}

/// Millicores as cores.
fn cores(milli: u64) -> String {
    whole_or_tenths(milli as f64 / 1000.0)
}

/// `v` without decimals when it is whole, else to one decimal.
fn whole_or_tenths(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::GpuInfo;

    fn node(gpus: &[(&str, u64)], cpu_cores: u32, memory_gb: u64) -> NodeInventory {
        NodeInventory {
            runtimes: Vec::new(),
            hostname: "n".into(),
            gpus: gpus
                .iter()
                .enumerate()
                .map(|(i, (model, gb))| GpuInfo {
                    index: i as u32,
                    uuid: format!("GPU-{i}"),
                    model: model.to_string(),
                    memory_total_mb: gb * 1024,
                    memory_used_mb: 0,
                    utilization_pct: 0,
                    simulated: true,
                })
                .collect(),
            cpu_cores,
            memory_total_mb: memory_gb * 1024,
            disks: Vec::new(),
            disk_offered_mb: 1024 * 1024,
            labels: Default::default(),
            simulated_host: true,
            isolation: "none".into(),
            gpu_source: "simulated".into(),
        }
    }

    fn spec(resources: &str) -> TaskSpec {
        let body = format!(r#"{{"task_id":"t","task_type":"training","resources":{resources}}}"#);
        caldera_spec::parse_task_spec(body.as_bytes()).unwrap()
    }

    #[test]
    fn each_dimension_no_node_offers_is_named_with_the_largest_offer() {
        let a100 = "NVIDIA A100-SXM4-80GB";
        let nodes = [
            node(&[(a100, 80); 8], 96, 1024),
            node(&[("Tesla T4", 16), ("Tesla T4", 16)], 32, 256),
            node(&[], 128, 2048),
        ];
        let offers = Offers::of(nodes.iter());
        let table: &[(&str, Option<&str>)] = &[
            (r#"{"gpu":{"count":8,"model":"A100"}}"#, None),
            (
                r#"{"gpu":{"count":9,"model":"A100"}}"#,
                Some("no node has 9 A100 GPUs; the largest has 8"),
            ),
            (
                r#"{"gpu":{"count":1,"model":"H100"}}"#,
                Some("no node has 1 H100 GPU; the largest has 0"),
            ),
            (
                r#"{"gpu":{"count":1,"model":"A10"}}"#,
                Some("no node has 1 A10 GPU; the largest has 0"),
            ),
            (
                r#"{"gpu":{"count":1,"memory_gb":90}}"#,
                Some("no node has a GPU with 90 GB; the largest has 80 GB"),
            ),
            (
                r#"{"gpu":{"count":2,"memory_gb":20,"model":"T4"}}"#,
                Some("no node has 2 T4 GPUs with 20 GB each; the largest have 16 GB"),
            ),
            (
                r#"{"memory":{"size_gb":5000}}"#,
                Some("no node has 5000 GB of memory; the largest has 2048 GB"),
            ),
            (
                r#"{"cpu":{"cores":200}}"#,
                Some("no node has 200 CPU cores; the largest has 128"),
            ),
            (r#"{"cpu":{"cores":128},"memory":{"size_gb":2048}}"#, None),
            (
                r#"{"gpu":{"count":8},"memory":{"size_gb":2048}}"#,
                Some("no node has all of it together (GPUs, CPU, memory and disk)"),
            ),
            (r#"{"gpu":{"share":0.5,"model":"T4"}}"#, None),
        ];
        for (resources, want) in table {
            assert_eq!(
                offers.never_fits(&spec(resources)).as_deref(),
                *want,
                "{resources}"
            );
        }
    }

    #[test]
    fn with_no_node_registered_every_request_may_wait() {
        let offers = Offers::of(std::iter::empty());
        let s = spec(r#"{"gpu":{"count":64,"model":"H100"}}"#);
        assert_eq!(offers.never_fits(&s), None);
        assert_eq!(offers.largest_gpu_mb(), 0);
    }
}
