//! GPU memory bars: one bar per GPU, split into the slices the ledger holds
//! on it (each with its task) and the free room, so fragmentation is visible
//! at a glance — "40 GB free" spread as 4 × 10 GB cannot host a 20 GB task,
//! and the bars show exactly that. A tenant sees its own slices by task id
//! and the others' only as "another tenant".
use super::layout::gb;
use super::tasks::task_href;
use caldera_spec::Allocation;
use maud::{html, Markup};
use std::collections::BTreeMap;

/// One held slice of a GPU's memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// The task's own id and tenant; `None` when the viewer may not see it.
    pub task: Option<(String, String)>,
    pub mb: u64,
    /// The task whose page this is.
    pub this: bool,
}

/// The slices per GPU index of `node`, from the ledger's `allocations`, as
/// `viewer_tenant` may see them (`None`: the operator sees all); `this` is
/// the key (`tenant/id`) of a task to mark.
pub fn slices_on(
    node: &str,
    allocations: &[Allocation],
    viewer_tenant: Option<&str>,
    this: Option<&str>,
) -> BTreeMap<u32, Vec<Slice>> {
    let mut by_gpu: BTreeMap<u32, Vec<Slice>> = BTreeMap::new();
    for a in allocations.iter().filter(|a| a.node == node) {
        let visible = viewer_tenant.is_none_or(|t| t == a.tenant);
        for g in &a.gpus {
            by_gpu.entry(g.index).or_default().push(Slice {
                task: visible.then(|| {
                    (
                        caldera_spec::local_id(&a.task_id).to_string(),
                        a.tenant.clone(),
                    )
                }),
                mb: g.memory_mb,
                this: this == Some(a.task_id.as_str()),
            });
        }
    }
    by_gpu
}

/// Free MB of a GPU of `total_mb` holding `slices` (never below 0).
pub fn free_mb(total_mb: u64, slices: &[Slice]) -> u64 {
    total_mb.saturating_sub(slices.iter().map(|s| s.mb).sum())
}

/// How free room is spread over GPUs: `(free MB in all, GPUs with room,
/// the largest room on one GPU)`.
pub fn spread(free: &[u64]) -> (u64, usize, u64) {
    let total = free.iter().sum();
    let pieces = free.iter().filter(|f| **f > 0).count();
    let largest = free.iter().copied().max().unwrap_or(0);
    (total, pieces, largest)
}

/// One GPU's bar: its slices then its free room, widths in % of its memory.
pub fn gpu_bar(index: u32, model: &str, total_mb: u64, slices: &[Slice]) -> Markup {
    let total = total_mb.max(1) as f64;
    let free = free_mb(total_mb, slices);
    let pct = |mb: u64| (mb as f64 / total * 100.0).min(100.0);
    html! {
        div.gpu data-gpu=(index) data-total-mb=(total_mb) data-free-mb=(free) {
            div.label { "GPU " (index) " · " (model) " · " (gb(free as f64)) " of " (gb(total_mb as f64)) " free" }
            div.membar {
                @for s in slices {
                    @match &s.task {
                        Some((id, tenant)) => {
                            a.slice.this[s.this].mine[!s.this] data-task-id=(id) data-mb=(s.mb)
                                href=(task_href(id, tenant)) style=(format!("width:{:.2}%", pct(s.mb)))
                                title=(format!("{id} ({tenant}): {}", gb(s.mb as f64))) { (id) }
                        }
                        None => {
                            span.slice.other data-mb=(s.mb) style=(format!("width:{:.2}%", pct(s.mb)))
                                title=(format!("another tenant: {}", gb(s.mb as f64))) {}
                        }
                    }
                }
                span.free data-mb=(free) {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::GpuGrant;

    fn alloc(task: &str, tenant: &str, node: &str, gpus: &[(u32, u64)]) -> Allocation {
        Allocation {
            allocation_id: format!("{task}.1"),
            task_id: task.into(),
            tenant: tenant.into(),
            node: node.into(),
            gpus: gpus
                .iter()
                .map(|(i, mb)| GpuGrant {
                    index: *i,
                    uuid: String::new(),
                    model: "A100".into(),
                    memory_mb: *mb,
                    simulated: true,
                })
                .collect(),
            cpu_milli: 0,
            memory_mb: 0,
            disk_mb: 0,
            exclusive: false,
            epoch: 1,
            created_ms: 0,
            borrowed: false,
            priority: 500,
            image_digest: None,
        }
    }

    /// The `data-mb` values of a rendered bar: its slices, then its free room.
    fn mbs(html: &str) -> Vec<u64> {
        html.match_indices("data-mb=\"")
            .map(|(i, m)| {
                let rest = &html[i + m.len()..];
                rest[..rest.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn slices_and_free_room_add_up_to_the_gpus_memory() {
        // 80 GB GPU: 40 + 20 held, 20 free; the bar says 40, 20, then 20.
        let ledger = [
            alloc("a/train", "a", "n1", &[(0, 40_000)]),
            alloc("b/serve", "b", "n1", &[(0, 20_000)]),
            alloc("a/other-node", "a", "n2", &[(0, 80_000)]),
        ];
        let slices = slices_on("n1", &ledger, None, Some("a/train"));
        let html = gpu_bar(0, "A100", 80_000, &slices[&0]).into_string();
        assert_eq!(mbs(&html), [40_000, 20_000, 20_000]);
        assert_eq!(mbs(&html).iter().sum::<u64>(), 80_000);
        assert!(html.contains("width:50.00%") && html.contains("width:25.00%"));
        assert!(
            html.contains(r#"class="slice this" data-task-id="train""#),
            "{html}"
        );
        assert!(html.contains(r#"data-task-id="serve""#));
    }

    #[test]
    fn a_tenant_sees_other_tenants_slices_without_their_ids() {
        let ledger = [
            alloc("a/train", "a", "n1", &[(0, 40_000)]),
            alloc("b/secret", "b", "n1", &[(0, 20_000)]),
        ];
        let slices = slices_on("n1", &ledger, Some("a"), None);
        let html = gpu_bar(0, "A100", 80_000, &slices[&0]).into_string();
        assert!(html.contains("data-task-id=\"train\""));
        assert!(!html.contains("secret") && html.contains("another tenant"));
        assert_eq!(mbs(&html), [40_000, 20_000, 20_000]);
    }

    #[test]
    fn fragmentation_shows_as_free_room_spread_over_gpus() {
        // Four 80 GB GPUs each 70 GB held: 40 GB free in all, but 10 GB at
        // most on one GPU: no 20 GB task fits, and the bars show 4 slivers.
        let ledger: Vec<Allocation> = (0..4)
            .map(|i| alloc(&format!("a/t{i}"), "a", "n1", &[(i, 70_000)]))
            .collect();
        let slices = slices_on("n1", &ledger, None, None);
        let free: Vec<u64> = (0..4).map(|i| free_mb(80_000, &slices[&i])).collect();
        assert_eq!(spread(&free), (40_000, 4, 10_000));
        let html = gpu_bar(3, "A100", 80_000, &slices[&3]).into_string();
        // 10 000 MB of 80 000 MB, in GB of 1024 MB.
        assert!(html.contains("9.8 GB of 78.1 GB free"), "{html}");
        // An over-committed GPU (stale figures) shows no negative room.
        let over = [Slice {
            task: None,
            mb: 90_000,
            this: false,
        }];
        assert_eq!(free_mb(80_000, &over), 0);
    }
}
