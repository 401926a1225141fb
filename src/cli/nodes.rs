//! Pool commands: `nodes [NAME]` and `util`.
use super::client::{block_on, encode, print_json, ApiClient, ClientOpts};
use super::fields::{self, get, items, number, text, MISSING};
use super::table::{key_values, Table};
use super::tasks::model_label;
use super::CliError;
use serde_json::Value;

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
        Some(_) => print!("{}", render_node(&data)),
        None => print!("{}", render_node_list(&data)),
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
    print!("{}", render_utilization(&data));
    Ok(())
}

/// The `nodes` table.
pub fn render_node_list(data: &Value) -> String {
    let mut table = Table::new(&[
        "NAME", "STATE", "RUNTIME", "GPUS", "GPU MEM", "CPU", "MEM", "DISK", "EPOCH", "IMAGES",
    ]);
    for node in items(data, "nodes") {
        table.row(vec![
            text(node, "name"),
            state_of(node),
            runtime_of(node),
            gpu_summary(items(node, "gpus")),
            gpu_memory(items(node, "gpus")),
            cpu_free_of_total(node),
            fields::free_of_mb(node, "memory_free_mb", "memory_total_mb"),
            fields::free_of_mb(node, "disk_free_mb", "disk_offered_mb"),
            text(node, "epoch"),
            super::node_images::summary(node),
        ]);
    }
    table.render()
}

/// The node's state, and its cordon when it takes no new placements:
/// "ready", "ready, cordoned", "lost, drained".
fn state_of(node: &Value) -> String {
    match get(node, "cordon").and_then(Value::as_str) {
        Some(cordon) => format!("{}, {cordon}", text(node, "state")),
        None => text(node, "state"),
    }
}

/// What runs workloads on the node: "podman 4.3.1", or "process" where
/// no container runtime is up (also for a server that does not say).
fn runtime_of(node: &Value) -> String {
    match get(node, "runtime").and_then(Value::as_str) {
        Some(r) if !r.is_empty() => r.to_string(),
        _ => "process".into(),
    }
}

/// Each runtime the node reported, and what is missing where one is down:
/// "podman 4.3.1 up, process up" or "podman down (podman info failed: ...), process up".
fn runtimes_detail(node: &Value) -> String {
    let all = items(node, "runtimes");
    if all.is_empty() {
        return runtime_of(node);
    }
    all.iter()
        .map(|r| {
            let engine = match text(r, "kind").as_str() {
                "process" => "process".to_string(),
                _ => {
                    let version = get(r, "version").and_then(Value::as_str).unwrap_or("");
                    format!("{} {version}", text(r, "engine"))
                        .trim_end()
                        .to_string()
                }
            };
            match (
                get(r, "up").and_then(Value::as_bool),
                get(r, "detail").and_then(Value::as_str),
            ) {
                (Some(true), _) => format!("{engine} up"),
                (_, Some(d)) if !d.is_empty() => format!("{engine} down ({d})"),
                _ => format!("{engine} down"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// GPUs grouped by model in the order they appear: "A100-80GB x8" or
/// "T4-16GB x4, A10-24GB x2 (simulated)"; "none" without GPUs.
pub fn gpu_summary(gpus: &[Value]) -> String {
    if gpus.is_empty() {
        return "none".into();
    }
    let mut groups: Vec<(String, usize)> = Vec::new();
    for gpu in gpus {
        let model = text(gpu, "model");
        match groups.iter_mut().find(|(m, _)| *m == model) {
            Some((_, n)) => *n += 1,
            None => groups.push((model, 1)),
        }
    }
    let mut out = groups
        .iter()
        .map(|(m, n)| format!("{m} x{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    if gpus
        .iter()
        .any(|g| get(g, "simulated").and_then(Value::as_bool) == Some(true))
    {
        out.push_str(" (simulated)");
    }
    out
}

/// Unallocated GPU memory over total, summed over the node's GPUs.
fn gpu_memory(gpus: &[Value]) -> String {
    if gpus.is_empty() {
        return MISSING.into();
    }
    let sum = |key: &str| gpus.iter().filter_map(|g| number(g, key)).sum::<f64>();
    format!(
        "{}/{}",
        fields::size_mb(sum("memory_free_mb")),
        fields::size_mb(sum("memory_total_mb"))
    )
}

/// Free cores over total: "64/96".
fn cpu_free_of_total(node: &Value) -> String {
    let free = number(node, "cpu_free_milli")
        .map(fields::cores_from_milli)
        .unwrap_or_else(|| MISSING.into());
    format!("{free}/{}", text(node, "cpu_cores"))
}

/// One node in detail: summary, then each GPU, then what is allocated on it.
pub fn render_node(node: &Value) -> String {
    let mut out = key_values(&[
        ("node", text(node, "name")),
        ("state", state_of(node)),
        ("connected", text(node, "connected")),
        ("epoch", text(node, "epoch")),
        ("gpu source", text(node, "gpu_source")),
        ("isolation", text(node, "isolation")),
        ("runtimes", runtimes_detail(node)),
        ("cpu free", cpu_free_of_total(node)),
        (
            "memory free",
            fields::free_of_mb(node, "memory_free_mb", "memory_total_mb"),
        ),
        (
            "disk free",
            fields::free_of_mb(node, "disk_free_mb", "disk_offered_mb"),
        ),
        ("labels", labels(node)),
        ("last seen", text(node, "last_seen")),
        ("weight cache", cache_summary(node)),
    ]);
    out.push_str("\ngpus:\n");
    let mut gpus = Table::new(&["GPU", "UUID", "MODEL", "FREE", "TOTAL", "USED", "UTIL"]);
    for gpu in items(node, "gpus") {
        gpus.row(vec![
            text(gpu, "index"),
            text(gpu, "uuid"),
            model_label(gpu),
            fields::size_mb_at(gpu, "memory_free_mb"),
            fields::size_mb_at(gpu, "memory_total_mb"),
            fields::size_mb_at(gpu, "memory_used_mb"),
            number(gpu, "utilization_pct")
                .map(|p| format!("{}%", fields::trim_decimal(p)))
                .unwrap_or_else(|| MISSING.into()),
        ]);
    }
    out.push_str(&indent(&gpus.render()));
    out.push_str(&super::node_images::detail(node));
    // The node view counts its allocations (`"allocations": 1`); a list of
    // them is shown one per line. Reading a count as an empty list printed
    // `none` for a node holding one.
    if let Some(n) = number(node, "allocations") {
        out.push_str(&format!("\nallocations: {}\n", fields::trim_decimal(n)));
        return out;
    }
    out.push_str("\nallocations:\n");
    let allocations = items(node, "allocations");
    if allocations.is_empty() {
        out.push_str("  none\n");
    }
    for allocation in allocations {
        out.push_str(&format!("  {}\n", allocation_line(allocation)));
    }
    out
}

/// The node's weight cache in one line: copies, room, and where its bytes
/// came from (`-` for a node without a cache report).
fn cache_summary(node: &Value) -> String {
    let Some(cache) = get(node, "cache") else {
        return MISSING.into();
    };
    let bytes = |path: &str| fields::size_mb(number(cache, path).unwrap_or(0.0) / 1_048_576.0);
    let count = |path: &str| number(cache, path).map_or(0, |n| n as u64);
    format!(
        "{} verified, {} of {}; hits {}, misses {}, from origin {}, from peers {}, served {}",
        items(cache, "entries").len(),
        bytes("used_bytes"),
        bytes("capacity_bytes"),
        count("counters.hits"),
        count("counters.misses"),
        bytes("counters.bytes_from_origin"),
        bytes("counters.bytes_from_peers"),
        bytes("counters.bytes_served"),
    )
}

/// One allocation on a node, read tolerantly: the server may send an id or
/// an object.
fn allocation_line(allocation: &Value) -> String {
    if !allocation.is_object() {
        return fields::show(allocation);
    }
    let task = get(allocation, "task_id")
        .or_else(|| get(allocation, "task"))
        .map(fields::show);
    let gpus: Vec<String> = items(allocation, "gpus")
        .iter()
        .map(|g| {
            g.get("index")
                .map(fields::show)
                .unwrap_or_else(|| fields::show(g))
        })
        .collect();
    format!(
        "{} task {} gpus [{}]",
        text(allocation, "allocation_id"),
        task.unwrap_or_else(|| MISSING.into()),
        gpus.join(",")
    )
}

fn labels(node: &Value) -> String {
    match get(node, "labels") {
        Some(Value::Object(map)) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| format!("{k}={}", fields::show(v)))
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(_)) | None => MISSING.into(),
        Some(other) => fields::show(other),
    }
}

/// One dimension of the utilisation view: label, JSON key, how to show an amount.
type Dimension = (&'static str, &'static str, fn(f64) -> String);

/// Dimensions of the utilisation view, in display order.
const DIMENSIONS: [Dimension; 5] = [
    ("gpus", "gpus", fields::trim_decimal),
    ("gpu memory", "gpu_memory_mb", fields::size_mb),
    ("cpu cores", "cpu_cores", fields::trim_decimal),
    ("memory", "memory_mb", fields::size_mb),
    ("disk", "disk_mb", fields::size_mb),
];

/// The `util` view: pool totals, then allocated/capacity by node, tenant and
/// GPU model.
pub fn render_utilization(data: &Value) -> String {
    let mut out = String::from("pool:\n");
    let mut total = Table::new(&["RESOURCE", "CAPACITY", "ALLOCATED", "USED"]);
    for (label, key, show) in DIMENSIONS {
        let amount = |part: &str| {
            number(data, &format!("total.{key}.{part}"))
                .map(show)
                .unwrap_or_else(|| MISSING.into())
        };
        total.row(vec![
            label.into(),
            amount("capacity"),
            amount("allocated"),
            amount("used"),
        ]);
    }
    out.push_str(&indent(&total.render()));
    // Tenants have no capacity of their own (that is their quota), and a GPU
    // model has no CPU, memory or disk: show only what means something.
    let gpu_dims = &DIMENSIONS[..2];
    for (title, list, name_key, header, dims, with_capacity) in [
        (
            "by node (allocated/capacity)",
            "by_node",
            "node",
            "NODE",
            &DIMENSIONS[..],
            true,
        ),
        (
            "by tenant (allocated)",
            "by_tenant",
            "tenant",
            "TENANT",
            &DIMENSIONS[..],
            false,
        ),
        (
            "by gpu model (allocated/capacity)",
            "by_gpu_model",
            "model",
            "MODEL",
            gpu_dims,
            true,
        ),
    ] {
        out.push_str(&format!("\n{title}:\n"));
        out.push_str(&indent(&breakdown(
            items(data, list),
            name_key,
            header,
            dims,
            with_capacity,
        )));
    }
    out
}

/// One breakdown table. The entry's name is read from `name_key`, or from a
/// generic `key`/`name` field, whichever the server sends.
fn breakdown(
    entries: &[Value],
    name_key: &str,
    header: &str,
    dims: &[Dimension],
    with_capacity: bool,
) -> String {
    let headers: Vec<&str> = std::iter::once(header)
        .chain(dims.iter().map(|(_, key, _)| column_of(key)))
        .collect();
    let mut table = Table::new(&headers);
    for entry in entries {
        let name = [name_key, "key", "name"]
            .iter()
            .find_map(|k| get(entry, k))
            .map(fields::show);
        let mut row = vec![name.unwrap_or_else(|| MISSING.into())];
        for (_, key, show) in dims {
            let amount = |part: &str| {
                number(entry, &format!("{key}.{part}"))
                    .map(show)
                    .unwrap_or_else(|| MISSING.into())
            };
            row.push(if with_capacity {
                format!("{}/{}", amount("allocated"), amount("capacity"))
            } else {
                amount("allocated")
            });
        }
        table.row(row);
    }
    table.render()
}

/// Column header of a dimension in the breakdown tables.
fn column_of(key: &str) -> &'static str {
    match key {
        "gpus" => "GPUS",
        "gpu_memory_mb" => "GPU MEM",
        "cpu_cores" => "CPU",
        "memory_mb" => "MEM",
        _ => "DISK",
    }
}

fn indent(block: &str) -> String {
    block.lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gpu(index: u32, model: &str, total: u64, free: u64) -> Value {
        json!({"index": index, "uuid": format!("SIM-{index}"), "model": model, "memory_total_mb": total,
               "memory_free_mb": free, "memory_used_mb": 0, "utilization_pct": 0, "simulated": true})
    }

    #[test]
    fn the_node_list_groups_gpus_by_model_and_marks_simulated_ones() {
        let data = json!({"nodes": [
            {"name": "node-1", "state": "ready", "epoch": 2, "cpu_cores": 96, "cpu_free_milli": 64000,
             "memory_total_mb": 1_048_576, "memory_free_mb": 786_432, "disk_offered_mb": 4_194_304,
             "disk_free_mb": 4_194_304, "gpus": (0..8).map(|i| gpu(i, "A100-80GB", 81920, if i < 4 { 0 } else { 81920 })).collect::<Vec<_>>()},
            {"name": "node-2", "state": "lost", "epoch": 1, "cpu_cores": 64, "cpu_free_milli": 64000,
             "gpus": [gpu(0, "T4-16GB", 16384, 16384), gpu(1, "T4-16GB", 16384, 16384), gpu(2, "A10-24GB", 24576, 24576)]},
            {"name": "cpu-box", "state": "ready", "gpus": []}
        ]});
        assert_eq!(
            render_node_list(&data),
            "NAME     STATE  RUNTIME  GPUS                                 GPU MEM    CPU    MEM         DISK         EPOCH  IMAGES\n\
             node-1   ready  process  A100-80GB x8 (simulated)             320G/640G  64/96  768G/1024G  4096G/4096G  2      -\n\
             node-2   lost   process  T4-16GB x2, A10-24GB x1 (simulated)  56G/56G    64/64  -/-         -/-          1      -\n\
             cpu-box  ready  process  none                                 -          -/-    -/-         -/-          -      -\n"
        );
    }

    #[test]
    fn each_node_says_what_runs_its_workloads() {
        let data = json!({"nodes": [
            {"name": "p", "state": "ready", "runtime": "podman 4.3.1", "gpus": []},
            {"name": "h", "state": "ready", "runtime": "process", "gpus": []},
            {"name": "old", "state": "ready", "gpus": []}
        ]});
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
        let down = json!({"name": "h", "runtime": "process", "runtimes": [
            {"kind": "container", "engine": "podman", "up": false, "detail": "podman is not installed"},
            {"kind": "process", "engine": "caldera-shim", "up": true}]});
        let one = render_node(&down);
        assert!(
            one.lines().any(|l| l.starts_with("runtimes:")
                && l.ends_with("podman down (podman is not installed), process up")),
            "{one}"
        );
        let up = json!({"name": "p", "runtimes": [
            {"kind": "container", "engine": "podman", "version": "4.3.1", "up": true},
            {"kind": "process", "engine": "caldera-shim", "up": true}]});
        assert!(
            render_node(&up).contains("podman 4.3.1 up, process up"),
            "{}",
            render_node(&up)
        );
    }

    #[test]
    fn a_cordoned_node_says_so_beside_its_state() {
        let data = json!({"nodes": [
            {"name": "n1", "state": "ready", "cordon": "cordoned", "gpus": []},
            {"name": "n2", "state": "ready", "cordon": null, "gpus": []}
        ]});
        let out = render_node_list(&data);
        assert!(
            out.contains("\nn1    ready, cordoned  process  none"),
            "{out}"
        );
        assert!(
            out.contains("\nn2    ready            process  none"),
            "{out}"
        );
        let one = render_node(&json!({"name": "n1", "state": "lost", "cordon": "drained"}));
        assert!(
            one.contains("state:") && one.contains("lost, drained"),
            "{one}"
        );
    }

    #[test]
    fn one_node_shows_each_gpu_and_its_allocations() {
        let node = json!({"name": "node-1", "state": "ready", "connected": true, "epoch": 2,
            "gpu_source": "simulated", "isolation": "cgroup-v2", "labels": {"zone": "a"},
            "gpus": [gpu(0, "A100-80GB", 81920, 61440)],
            "allocations": [{"allocation_id": "a-1", "task_id": "t1", "gpus": [{"index": 0}]}]});
        let out = render_node(&node);
        assert!(
            out.lines()
                .any(|l| l.starts_with("labels:") && l.ends_with(" zone=a")),
            "{out}"
        );
        assert!(
            out.contains("  0    SIM-0  A100-80GB (simulated)  60G   80G    0M    0%\n"),
            "{out}"
        );
        assert!(
            out.ends_with("allocations:\n  a-1 task t1 gpus [0]\n"),
            "{out}"
        );
        let cached = json!({"name": "n", "cache": {"capacity_bytes": 53687091200u64,
            "used_bytes": 209715200, "entries": [{"sha256": "ab"}],
            "counters": {"hits": 2, "misses": 1, "bytes_from_peers": 209715200}}});
        assert!(
            render_node(&cached).contains(
                "weight cache:  1 verified, 200M of 50G; hits 2, misses 1, from origin 0M, from peers 200M, served 0M\n"
            ),
            "{}",
            render_node(&cached)
        );
        // What the server sends: a count. It once printed `none` for 1.
        let counted = json!({"name": "node-1", "state": "ready", "gpus": [], "allocations": 1});
        assert!(
            render_node(&counted).ends_with("\nallocations: 1\n"),
            "{}",
            render_node(&counted)
        );
    }

    #[test]
    fn utilization_shows_totals_and_breakdowns() {
        let dims = json!({"gpus": {"capacity": 14, "allocated": 4, "used": 1.5},
            "gpu_memory_mb": {"capacity": 786_432, "allocated": 327_680, "used": 1024},
            "cpu_cores": {"capacity": 160, "allocated": 32, "used": 3.2},
            "memory_mb": {"capacity": 1_572_864, "allocated": 262_144, "used": 2048},
            "disk_mb": {"capacity": 6_291_456, "allocated": 204_800, "used": 0}});
        let mut by_node = dims.clone();
        by_node["node"] = json!("node-1");
        let mut by_tenant = dims.clone();
        by_tenant["key"] = json!("demo");
        let mut by_model = dims.clone();
        by_model["key"] = json!("A100");
        let data = json!({"total": dims, "by_node": [by_node], "by_tenant": [by_tenant],
            "by_gpu_model": [by_model]});
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
