//! A request larger than its tenant may ever hold: over guarantee plus
//! borrowing limit on its own, with nothing else running. Queued, it would
//! wait forever (the admit stage turns it down on every pass), so it is
//! refused at submission, naming the field and the cap, like any other
//! value out of range.
use caldera_scheduling::queue::demand::{demand_for, requested_usage};
use caldera_spec::{Quota, TaskSpec, TenantRecord};

/// Why `spec` can never run under `tenant`'s quota: `(field, message)`, or
/// `None` when it may (a dimension without a borrowing limit has no cap).
pub fn beyond_cap(tenant: &TenantRecord, spec: &TaskSpec) -> Option<(&'static str, String)> {
    let usage = requested_usage(spec, &demand_for(spec, std::iter::empty()));
    let caps = |g: Option<f64>, b: Option<f64>| g.zip(b).map(|(g, b)| g + b);
    let (g, b) = (&tenant.quota, &tenant.borrowing_limit);
    let gpu_field = match spec.resources.gpu.as_ref() {
        Some(gpu) if gpu.share.is_some() => "resources.gpu.share",
        _ => "resources.gpu.count",
    };
    let dims = [
        (gpu_field, "GPUs", caps(g.gpus, b.gpus), usage.gpus),
        (
            "resources.gpu.memory_gb",
            "GB of GPU memory",
            caps(g.gpu_memory_gb, b.gpu_memory_gb),
            usage.gpu_memory_gb,
        ),
        (
            "resources.cpu.cores",
            "CPU cores",
            caps(g.cpu_cores, b.cpu_cores),
            usage.cpu_cores,
        ),
        (
            "resources.memory.size_gb",
            "GB of memory",
            caps(g.memory_gb, b.memory_gb),
            usage.memory_gb,
        ),
        (
            "resources.disk.size_gb",
            "GB of disk",
            caps(g.disk_gb, b.disk_gb),
            usage.disk_gb,
        ),
    ];
    for (field, what, cap, asked) in dims {
        if let Some(cap) = cap.filter(|c| asked > c + 1e-9) {
            return Some((field, message(&tenant.name, what, asked, cap)));
        }
    }
    beyond_model_cap(tenant, spec, usage.gpus)
}

/// A per-GPU-model cap the request's one named model is under (`"A100"`
/// with `gpus_by_model.A100` guaranteed and limited).
fn beyond_model_cap(
    tenant: &TenantRecord,
    spec: &TaskSpec,
    gpus: f64,
) -> Option<(&'static str, String)> {
    let model = spec.resources.gpu.as_ref()?.model.as_deref()?;
    if model.contains('|') {
        // Alternatives: another of them may be under no cap.
        return None;
    }
    let (g, b): (&Quota, &Quota) = (&tenant.quota, &tenant.borrowing_limit);
    for (key, guaranteed) in &g.gpus_by_model {
        let Some(borrowing) = b.gpus_by_model.get(key) else {
            continue;
        };
        let cap = guaranteed + borrowing;
        if caldera_spec::gpu_model::matches(key, model) && gpus > cap + 1e-9 {
            let what = format!("{key} GPUs");
            return Some((
                "resources.gpu.count",
                message(&tenant.name, &what, gpus, cap),
            ));
        }
    }
    None
}

fn message(tenant: &str, what: &str, asked: f64, cap: f64) -> String {
    format!(
        "exceeds the tenant's cap: it asks {asked} {what}, and tenant {tenant} may hold at most {cap} (guarantee + borrowing limit) even with nothing else running, so it could never start; ask for less or have the operator raise the quota"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(quota: &str, borrowing: &str) -> TenantRecord {
        TenantRecord {
            name: "acme".into(),
            token_sha256: String::new(),
            quota: serde_json::from_str(quota).unwrap(),
            borrowing_limit: serde_json::from_str(borrowing).unwrap(),
            created_ms: 0,
        }
    }

    fn spec(resources: &str) -> TaskSpec {
        let body = format!(r#"{{"task_id":"t","task_type":"training","resources":{resources}}}"#);
        caldera_spec::parse_task_spec(body.as_bytes()).unwrap()
    }

    #[test]
    fn a_request_over_guarantee_plus_borrowing_is_named_by_its_field() {
        // Guarantee 4 GPUs + borrowing 2 = 6: asking 8 can never run.
        let t = tenant(r#"{"gpus":4}"#, r#"{"gpus":2}"#);
        let (field, msg) = beyond_cap(&t, &spec(r#"{"gpu":{"count":8}}"#)).unwrap();
        assert_eq!(field, "resources.gpu.count");
        assert!(msg.starts_with("exceeds the tenant's cap"), "{msg}");
        assert!(
            msg.contains("asks 8 GPUs") && msg.contains("at most 6"),
            "{msg}"
        );
        // Exactly the cap may run.
        assert_eq!(beyond_cap(&t, &spec(r#"{"gpu":{"count":6}}"#)), None);
        // Cores: guarantee 8 + borrowing 0.
        let t = tenant(r#"{"cpu_cores":8}"#, r#"{"cpu_cores":0}"#);
        let (field, _) = beyond_cap(&t, &spec(r#"{"cpu":{"cores":9}}"#)).unwrap();
        assert_eq!(field, "resources.cpu.cores");
    }

    #[test]
    fn a_dimension_without_a_borrowing_limit_has_no_cap() {
        // Guarantee 1 GPU, borrowing unlimited: 8 may run on idle room.
        let t = tenant(r#"{"gpus":1}"#, r#"{}"#);
        assert_eq!(beyond_cap(&t, &spec(r#"{"gpu":{"count":8}}"#)), None);
        // No quota at all.
        let t = tenant(r#"{}"#, r#"{}"#);
        assert_eq!(beyond_cap(&t, &spec(r#"{"gpu":{"count":8}}"#)), None);
    }

    #[test]
    fn a_gpu_models_cap_applies_to_a_request_naming_that_model() {
        let t = tenant(
            r#"{"gpus_by_model":{"A100":2}}"#,
            r#"{"gpus_by_model":{"A100":1}}"#,
        );
        let (field, msg) = beyond_cap(&t, &spec(r#"{"gpu":{"count":4,"model":"A100"}}"#)).unwrap();
        assert_eq!(field, "resources.gpu.count");
        assert!(
            msg.contains("A100 GPUs") && msg.contains("at most 3"),
            "{msg}"
        );
        // Another model, or alternatives, are under no cap of A100's.
        assert_eq!(
            beyond_cap(&t, &spec(r#"{"gpu":{"count":4,"model":"H100"}}"#)),
            None
        );
        assert_eq!(
            beyond_cap(&t, &spec(r#"{"gpu":{"count":4,"model":"A100|H100"}}"#)),
            None
        );
    }
}
