//! Pool commands: `nodes [NAME]` and `util`.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts};
use super::display::{self, MISSING};
use super::table::{key_values, Table};
use super::CliError;
use caldera_spec::container::{RuntimeInfo, RuntimeKind};
use caldera_spec::views::{Dim, Dims, GpuView, Keyed, NodeList, NodeView, Utilization};

/// `caldera nodes [NAME]`
#[derive(clap::Args, Debug)]
pub struct NodesArgs {
    /// Show this node in detail (its GPUs one by one) instead of the list.
    pub name: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// `caldera util`
#[derive(clap::Args, Debug)]
pub struct UtilArgs {
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Lists the nodes, or shows one.
pub fn nodes(args: NodesArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let path = match &args.name {
        Some(name) => format!("/v1/nodes/{}", encode(name)),
        None => "/v1/nodes".into(),
    };
    let data = block_on(client.get(&path, &[]))?;
    if args.opts.json {
        return print_json(&data);
    }
    match args.name {
        Some(_) => print!("{}", render_node(&read_view(&data)?)),
        None => print!("{}", render_node_list(&read_view(&data)?)),
    }
    Ok(())
}

/// Shows pool capacity, allocation and measured use.
pub fn util(args: UtilArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let data = block_on(client.get("/v1/utilization", &[]))?;
    if args.opts.json {
        return print_json(&data);
    }
    print!("{}", render_utilization(&read_view(&data)?));
    Ok(())
}

/// The `nodes` table.
pub fn render_node_list(list: &NodeList) -> String {
    let mut table = Table::new(&[
        "NAME", "STATE", "RUNTIME", "GPUS", "GPU MEM", "CPU", "MEM", "DISK", "EPOCH", "IMAGES",
    ]);
    for node in &list.nodes {
        table.row(vec![
            node.name.clone(),
            state_of(node),
            runtime_of(node),
            gpu_summary(&node.gpus),
            gpu_memory(&node.gpus),
            cpu_free_of_total(node),
            free_of_mb(node.memory_free_mb, node.memory_total_mb),
            free_of_mb(node.disk_free_mb, node.disk_offered_mb),
            node.epoch.to_string(),
            super::node_images::summary(node.images.as_ref()),
        ]);
    }
    table.render()
}

/// `free/total` of two sizes in MB, e.g. "600G/640G".
fn free_of_mb(free: u64, total: u64) -> String {
    format!(
        "{}/{}",
        display::size_mb(free as f64),
        display::size_mb(total as f64)
    )
}

/// The node's state, and its cordon when it takes no new placements:
/// "ready", "ready, cordoned", "lost, drained".
fn state_of(node: &NodeView) -> String {
    match &node.cordon {
        Some(cordon) => format!("{}, {cordon}", node.state),
        None => node.state.clone(),
    }
}

/// What runs workloads on the node: "podman 4.3.1", or "process" where
/// no container runtime is up.
fn runtime_of(node: &NodeView) -> String {
    if node.runtime.is_empty() {
        return RuntimeKind::Process.as_str().into();
    }
    node.runtime.clone()
}

/// Each runtime the node reported, and what is missing where one is down:
/// "podman 4.3.1 up, process up" or "podman down (podman info failed: ...), process up".
fn runtimes_detail(node: &NodeView) -> String {
    if node.runtimes.is_empty() {
        return runtime_of(node);
    }
    node.runtimes
        .iter()
        .map(runtime_state)
        .collect::<Vec<_>>()
        .join(", ")
}

/// "podman 4.3.1 up", "podman down (why)", "process up".
fn runtime_state(r: &RuntimeInfo) -> String {
    let engine = match r.kind {
        RuntimeKind::Process => RuntimeKind::Process.as_str().to_string(),
        _ => format!("{} {}", r.engine, r.version).trim_end().to_string(),
    };
    match (r.up, r.detail.as_str()) {
        (true, _) => format!("{engine} up"),
        (false, "") => format!("{engine} down"),
        (false, d) => format!("{engine} down ({d})"),
    }
}

/// GPUs grouped by model in the order they appear: "A100-80GB x8" or
/// "T4-16GB x4, A10-24GB x2 (simulated)"; "none" without GPUs.
pub fn gpu_summary(gpus: &[GpuView]) -> String {
    if gpus.is_empty() {
        return "none".into();
    }
    let mut groups: Vec<(&str, usize)> = Vec::new();
    for gpu in gpus {
        match groups.iter_mut().find(|(m, _)| *m == gpu.model) {
            Some((_, n)) => *n += 1,
            None => groups.push((&gpu.model, 1)),
        }
    }
    let mut out = groups
        .iter()
        .map(|(m, n)| format!("{m} x{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    if gpus.iter().any(|g| g.simulated) {
        out.push_str(" (simulated)");
    }
    out
}

/// Unallocated GPU memory over total, summed over the node's GPUs.
fn gpu_memory(gpus: &[GpuView]) -> String {
    if gpus.is_empty() {
        return MISSING.into();
    }
    free_of_mb(
        gpus.iter().map(|g| g.memory_free_mb).sum(),
        gpus.iter().map(|g| g.memory_total_mb).sum(),
    )
}

/// Free cores over total: "64/96".
fn cpu_free_of_total(node: &NodeView) -> String {
    format!(
        "{}/{}",
        display::cores_from_milli(node.cpu_free_milli as f64),
        node.cpu_cores
    )
}

/// A GPU's model, marked when the GPU is simulated so nobody mistakes a
/// demo pool for hardware.
fn model_label(gpu: &GpuView) -> String {
    if gpu.simulated {
        format!("{} (simulated)", gpu.model)
    } else {
        gpu.model.clone()
    }
}

/// One node in detail: summary, then each GPU, then what is allocated on it.
pub fn render_node(node: &NodeView) -> String {
    let mut out = key_values(&[
        ("node", node.name.clone()),
        ("state", state_of(node)),
        ("connected", node.connected.to_string()),
        ("epoch", node.epoch.to_string()),
        ("gpu source", node.gpu_source.clone()),
        ("isolation", node.isolation.clone()),
        ("runtimes", runtimes_detail(node)),
        ("cpu free", cpu_free_of_total(node)),
        (
            "memory free",
            free_of_mb(node.memory_free_mb, node.memory_total_mb),
        ),
        (
            "disk free",
            free_of_mb(node.disk_free_mb, node.disk_offered_mb),
        ),
        ("labels", labels(node)),
        ("last seen", node.last_seen.clone()),
        ("weight cache", cache_summary(node)),
    ]);
    out.push_str("\ngpus:\n");
    let mut gpus = Table::new(&["GPU", "UUID", "MODEL", "FREE", "TOTAL", "USED", "UTIL"]);
    for gpu in &node.gpus {
        gpus.row(vec![
            gpu.index.to_string(),
            gpu.uuid.clone(),
            model_label(gpu),
            display::size_mb(gpu.memory_free_mb as f64),
            display::size_mb(gpu.memory_total_mb as f64),
            display::size_mb(gpu.memory_used_mb as f64),
            format!("{}%", gpu.utilization_pct),
        ]);
    }
    out.push_str(&indent(&gpus.render()));
    out.push_str(&super::node_images::detail(node.images.as_ref()));
    out.push_str(&format!("\nallocations: {}\n", node.allocations));
    out
}

/// The node's weight cache in one line: copies, room, and where its bytes
/// came from (`-` for a node without a cache report).
fn cache_summary(node: &NodeView) -> String {
    let Some(cache) = &node.cache else {
        return MISSING.into();
    };
    let bytes = |n: u64| display::size_mb(n as f64 / 1_048_576.0);
    let c = &cache.counters;
    format!(
        "{} verified, {} of {}; hits {}, misses {}, from origin {}, from peers {}, served {}",
        cache.entries.len(),
        bytes(cache.used_bytes),
        bytes(cache.capacity_bytes),
        c.hits,
        c.misses,
        bytes(c.bytes_from_origin),
        bytes(c.bytes_from_peers),
        bytes(c.bytes_served),
    )
}

fn labels(node: &NodeView) -> String {
    if node.labels.is_empty() {
        return MISSING.into();
    }
    node.labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// One dimension of the utilisation view: label, column header, its
/// figures in a breakdown entry, how to show an amount.
type Dimension = (
    &'static str,
    &'static str,
    fn(&Dims) -> Dim,
    fn(f64) -> String,
);

/// Dimensions of the utilisation view, in display order.
const DIMENSIONS: [Dimension; 5] = [
    ("gpus", "GPUS", |d| d.gpus, display::trim_decimal),
    (
        "gpu memory",
        "GPU MEM",
        |d| d.gpu_memory_mb,
        display::size_mb,
    ),
    ("cpu cores", "CPU", |d| d.cpu_cores, display::trim_decimal),
    ("memory", "MEM", |d| d.memory_mb, display::size_mb),
    ("disk", "DISK", |d| d.disk_mb, display::size_mb),
];

/// The `util` view: pool totals, then allocated/capacity by node, tenant and
/// GPU model.
pub fn render_utilization(data: &Utilization) -> String {
    let mut out = String::from("pool:\n");
    let mut total = Table::new(&["RESOURCE", "CAPACITY", "ALLOCATED", "USED"]);
    for (label, _, dim, show) in DIMENSIONS {
        let d = dim(&data.total);
        total.row(vec![
            label.into(),
            show(d.capacity),
            show(d.allocated),
            show(d.used),
        ]);
    }
    out.push_str(&indent(&total.render()));
    // Tenants have no capacity of their own (that is their quota), and a GPU
    // model has no CPU, memory or disk: show only what means something.
    let gpu_dims = &DIMENSIONS[..2];
    for (title, list, header, dims, with_capacity) in [
        (
            "by node (allocated/capacity)",
            &data.by_node,
            "NODE",
            &DIMENSIONS[..],
            true,
        ),
        (
            "by tenant (allocated)",
            &data.by_tenant,
            "TENANT",
            &DIMENSIONS[..],
            false,
        ),
        (
            "by gpu model (allocated/capacity)",
            &data.by_gpu_model,
            "MODEL",
            gpu_dims,
            true,
        ),
    ] {
        out.push_str(&format!("\n{title}:\n"));
        out.push_str(&indent(&breakdown(list, header, dims, with_capacity)));
    }
    out
}

/// One breakdown table: a row per entry, named by its key.
fn breakdown(
    entries: &[Keyed<Dims>],
    header: &str,
    dims: &[Dimension],
    with_capacity: bool,
) -> String {
    let headers: Vec<&str> = std::iter::once(header)
        .chain(dims.iter().map(|(_, column, _, _)| *column))
        .collect();
    let mut table = Table::new(&headers);
    for entry in entries {
        let mut row = vec![entry.key.clone()];
        for (_, _, dim, show) in dims {
            let d = dim(&entry.dims);
            row.push(if with_capacity {
                format!("{}/{}", show(d.allocated), show(d.capacity))
            } else {
                show(d.allocated)
            });
        }
        table.row(row);
    }
    table.render()
}

fn indent(block: &str) -> String {
    block.lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn gpu(index: u32, model: &str, total: u64, free: u64) -> Value {
        json!({"index": index, "uuid": format!("SIM-{index}"), "model": model, "memory_total_mb": total,
               "memory_free_mb": free, "memory_used_mb": 0, "utilization_pct": 0, "simulated": true,
               "faulted": false})
    }

    /// A node view as the server writes one: `fields` over an empty,
    /// connected, ready node.
    pub(crate) fn node(fields: Value) -> NodeView {
        let mut v = json!({"name": "n", "state": "ready", "cordon": null, "connected": true,
            "epoch": 1, "simulated": true, "gpu_source": "simulated", "isolation": "none",
            "runtime": "process", "runtimes": [], "gpus": [], "cpu_cores": 0,
            "cpu_free_milli": 0, "cpu_used_pct": 0.0, "memory_total_mb": 0, "memory_free_mb": 0,
            "memory_used_mb": 0, "disk_offered_mb": 0, "disk_free_mb": 0, "labels": {},
            "last_seen": "2026-11-29T10:00:00Z", "allocations": 0});
        for (k, x) in fields.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).expect("a node view")
    }

    fn list(nodes: Vec<NodeView>) -> NodeList {
        NodeList { nodes }
    }

    #[test]
    fn the_node_list_groups_gpus_by_model_and_marks_simulated_ones() {
        let data = list(vec![
            node(
                json!({"name": "node-1", "state": "ready", "epoch": 2, "cpu_cores": 96, "cpu_free_milli": 64000,
             "memory_total_mb": 1_048_576, "memory_free_mb": 786_432, "disk_offered_mb": 4_194_304,
             "disk_free_mb": 4_194_304, "gpus": (0..8).map(|i| gpu(i, "A100-80GB", 81920, if i < 4 { 0 } else { 81920 })).collect::<Vec<_>>()}),
            ),
            node(
                json!({"name": "node-2", "state": "lost", "epoch": 1, "cpu_cores": 64, "cpu_free_milli": 64000,
             "memory_total_mb": 2048, "memory_free_mb": 512,
             "gpus": [gpu(0, "T4-16GB", 16384, 16384), gpu(1, "T4-16GB", 16384, 16384), gpu(2, "A10-24GB", 24576, 24576)]}),
            ),
            node(
                json!({"name": "cpu-box", "state": "ready", "epoch": 3, "cpu_cores": 8, "cpu_free_milli": 500}),
            ),
        ]);
        assert_eq!(
            render_node_list(&data),
            "NAME     STATE  RUNTIME  GPUS                                 GPU MEM    CPU    MEM         DISK         EPOCH  IMAGES\n\
             node-1   ready  process  A100-80GB x8 (simulated)             320G/640G  64/96  768G/1024G  4096G/4096G  2      -\n\
             node-2   lost   process  T4-16GB x2, A10-24GB x1 (simulated)  56G/56G    64/64  512M/2G     0M/0M        1      -\n\
             cpu-box  ready  process  none                                 -          0.5/8  0M/0M       0M/0M        3      -\n"
        );
    }

    #[test]
    fn each_node_says_what_runs_its_workloads() {
        let data = list(vec![
            node(json!({"name": "p", "runtime": "podman 4.3.1"})),
            node(json!({"name": "h", "runtime": "process"})),
            node(json!({"name": "old", "runtime": ""})),
        ]);
        let out = render_node_list(&data);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("NAME  STATE  RUNTIME       GPUS"),
            "{out}"
        );
        assert!(
            lines[1].starts_with("p     ready  podman 4.3.1  none"),
            "{out}"
        );
        assert!(
            lines[2].starts_with("h     ready  process       none"),
            "{out}"
        );
        assert!(
            lines[3].starts_with("old   ready  process       none"),
            "{out}"
        );
        let down = node(json!({"name": "h", "runtime": "process", "runtimes": [
            {"kind": "container", "engine": "podman", "version": "", "up": false, "detail": "podman is not installed"},
            {"kind": "process", "engine": "caldera-shim", "version": "", "up": true, "detail": ""}]}));
        let one = render_node(&down);
        assert!(
            one.lines().any(|l| l.starts_with("runtimes:")
                && l.ends_with("podman down (podman is not installed), process up")),
            "{one}"
        );
        let up = node(json!({"name": "p", "runtimes": [
            {"kind": "container", "engine": "podman", "version": "4.3.1", "up": true, "detail": ""},
            {"kind": "process", "engine": "caldera-shim", "version": "", "up": true, "detail": ""}]}));
        assert!(
            render_node(&up).contains("podman 4.3.1 up, process up"),
            "{}",
            render_node(&up)
        );
    }

    #[test]
    fn a_cordoned_node_says_so_beside_its_state() {
        let data = list(vec![
            node(json!({"name": "n1", "cordon": "cordoned"})),
            node(json!({"name": "n2", "cordon": null})),
        ]);
        let out = render_node_list(&data);
        assert!(
            out.contains("\nn1    ready, cordoned  process  none"),
            "{out}"
        );
        assert!(
            out.contains("\nn2    ready            process  none"),
            "{out}"
        );
        let one = render_node(&node(
            json!({"name": "n1", "state": "lost", "cordon": "drained"}),
        ));
        assert!(
            one.contains("state:") && one.contains("lost, drained"),
            "{one}"
        );
    }

    #[test]
    fn one_node_shows_each_gpu_its_cache_and_how_many_allocations_it_holds() {
        let one = node(
            json!({"name": "node-1", "state": "ready", "connected": true, "epoch": 2,
            "gpu_source": "simulated", "isolation": "cgroup-v2", "labels": {"zone": "a"},
            "gpus": [gpu(0, "A100-80GB", 81920, 61440)], "allocations": 1}),
        );
        let out = render_node(&one);
        assert!(
            out.lines()
                .any(|l| l.starts_with("labels:") && l.ends_with(" zone=a")),
            "{out}"
        );
        assert!(
            out.contains("  0    SIM-0  A100-80GB (simulated)  60G   80G    0M    0%\n"),
            "{out}"
        );
        assert!(out.ends_with("\nallocations: 1\n"), "{out}");
        let cached = node(
            json!({"name": "n", "cache": {"capacity_bytes": 53687091200u64,
            "used_bytes": 209715200, "fetching": [],
            "entries": [{"sha256": "ab", "size_bytes": 209715200, "last_used_ms": 0,
                         "pinned": false, "in_use": 0}],
            "counters": {"hits": 2, "misses": 1, "bytes_from_peers": 209715200}}}),
        );
        assert!(
            render_node(&cached).contains(
                "weight cache:  1 verified, 200M of 50G; hits 2, misses 1, from origin 0M, from peers 200M, served 0M\n"
            ),
            "{}",
            render_node(&cached)
        );
    }

    #[test]
    fn utilization_shows_totals_and_breakdowns() {
        let dims = json!({"gpus": {"capacity": 14, "allocated": 4, "used": 1.5},
            "gpu_memory_mb": {"capacity": 786_432, "allocated": 327_680, "used": 1024},
            "cpu_cores": {"capacity": 160, "allocated": 32, "used": 3.2},
            "memory_mb": {"capacity": 1_572_864, "allocated": 262_144, "used": 2048},
            "disk_mb": {"capacity": 6_291_456, "allocated": 204_800, "used": 0}});
        let keyed = |key: &str| {
            let mut d = dims.clone();
            d["key"] = json!(key);
            d
        };
        let data: Utilization = serde_json::from_value(json!({"total": dims,
            "by_node": [keyed("node-1")], "by_tenant": [keyed("demo")],
            "by_gpu_model": [keyed("A100")], "simulated_gpus": true}))
        .expect("a utilization view");
        let out = render_utilization(&data);
        assert!(out.starts_with(
            "pool:\n  RESOURCE    CAPACITY  ALLOCATED  USED\n  gpus        14        4          1.5\n  \
             gpu memory  768G      320G       1G\n"
        ), "{out}");
        assert!(
            out.contains("  node-1  4/14  320G/768G  32/160  256G/1536G  200G/6144G\n"),
            "{out}"
        );
        assert!(out.contains(
            "by tenant (allocated):\n  TENANT  GPUS  GPU MEM  CPU  MEM   DISK\n  demo    4     320G     32   256G  200G\n"
        ), "{out}");
        assert!(out.ends_with(
            "by gpu model (allocated/capacity):\n  MODEL  GPUS  GPU MEM\n  A100   4/14  320G/768G\n"
        ), "{out}");
    }
}
