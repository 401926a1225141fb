//! Per tenant and resource: the guarantee and borrowing limit it was given,
//! and what it holds — allocated, the borrowed (preemptible) part of that,
//! what it measurably uses, and the part held by allocations the idle rule
//! finds idle. Allocated, used, borrowed and idle count allocations as
//! `GET /v1/utilization` does (a GPU by the fraction of its memory held).
//! A limit that is not set has no series (no limit is not a limit of 0).
use super::{by_resource, gauges, gib_bytes, Gauges};
use caldera_actors::control_plane::scrape::Scrape;
use caldera_actors::views::{Dims, Keyed};
use caldera_spec::Quota;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantResource {
    tenant: String,
    resource: &'static str,
}

/// A quota's set dimensions as `(resource label, value)`, in the units of
/// the other tenant series (bytes, cores, GPUs).
fn quota_values(q: &Quota) -> Vec<(&'static str, f64)> {
    [
        ("gpus", q.gpus),
        ("gpu_memory_bytes", q.gpu_memory_gb.map(gib_bytes)),
        ("cpu", q.cpu_cores),
        ("memory_bytes", q.memory_gb.map(gib_bytes)),
        ("disk_bytes", q.disk_gb.map(gib_bytes)),
    ]
    .into_iter()
    .filter_map(|(r, v)| Some((r, v?)))
    .collect()
}

fn set(
    f: &Gauges<TenantResource>,
    tenant: &str,
    values: impl IntoIterator<Item = (&'static str, f64)>,
) {
    for (resource, v) in values {
        f.get_or_create(&TenantResource {
            tenant: tenant.to_string(),
            resource,
        })
        .set(v);
    }
}

/// The tenant families. Every tenant has its holdings series (zero when it
/// holds nothing), so a dashboard lists tenants that are idle too.
pub fn tenants(r: &mut Registry, s: &Scrape) {
    let family =
        |r: &mut Registry, name: &str, help: &str| gauges::<TenantResource>(r, name, help, None);
    let guarantee = family(
        r,
        "caldera_tenant_guarantee",
        "What each tenant is guaranteed, by resource",
    );
    let limit = family(
        r,
        "caldera_tenant_borrowing_limit",
        "How much more than its guarantee each tenant may borrow from idle capacity, by resource",
    );
    let allocated = family(
        r,
        "caldera_tenant_allocated",
        "What each tenant's allocations hold, by resource",
    );
    let borrowed = family(
        r,
        "caldera_tenant_borrowed",
        "The part of each tenant's allocations that is borrowed (preempted first when an owner needs it back)",
    );
    let used = family(
        r,
        "caldera_tenant_used",
        "What each tenant's allocations measurably use, by resource",
    );
    let idle = family(
        r,
        "caldera_tenant_idle",
        "The part of each tenant's allocations measured idle (below scheduling.idle-threshold-pct)",
    );
    let keyed = |v: &[Keyed<Dims>]| -> BTreeMap<String, Dims> {
        v.iter().map(|k| (k.key.clone(), k.dims)).collect()
    };
    let held = keyed(&s.pool.utilization.by_tenant);
    let lent = keyed(&s.pool.borrowed);
    let idle_dims = keyed(&s.pool.idle);
    let mut names: Vec<&str> = s.tenants.iter().map(|t| t.name.as_str()).collect();
    names.extend(held.keys().map(String::as_str));
    names.sort_unstable();
    names.dedup();
    for t in &s.tenants {
        set(&guarantee, &t.name, quota_values(&t.quota));
        set(&limit, &t.name, quota_values(&t.borrowing_limit));
    }
    let none = Dims::default();
    for name in names {
        let of = |m: &BTreeMap<String, Dims>| m.get(name).copied().unwrap_or(none);
        set(&allocated, name, by_resource(&of(&held), |d| d.allocated));
        set(&used, name, by_resource(&of(&held), |d| d.used));
        set(&borrowed, name, by_resource(&of(&lent), |d| d.allocated));
        set(&idle, name, by_resource(&of(&idle_dims), |d| d.allocated));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_shows_only_its_set_dimensions_in_base_units() {
        let q = Quota {
            gpus: Some(2.0),
            memory_gb: Some(1.5),
            ..Quota::default()
        };
        // 1.5 GiB = 1.5 * 2^30 bytes.
        assert_eq!(
            quota_values(&q),
            vec![("gpus", 2.0), ("memory_bytes", 1_610_612_736.0)]
        );
        assert!(quota_values(&Quota::default()).is_empty());
    }
}
