//! From what a user wrote (GB, shares, model names) to what placement reasons in
//! (MiB per GPU, milli-shares, concrete model names of this pool).
use crate::placement::{Demand, GpuDemand};
use caldera_spec::container::RuntimeKind;
use caldera_spec::gpu_model;
use caldera_spec::resources::gb_to_mib;
use caldera_spec::{TaskSpec, Usage};

/// The placement demand of one allocation of `spec`. `known_models` are the GPU
/// models present in the pool; a requested model resolves to every known model
/// [`caldera_spec::gpu_model::matches`] says it names ("A100" names
/// "NVIDIA A100-SXM4-80GB", "A10" does not).
pub fn demand_for<'a>(
    spec: &TaskSpec,
    known_models: impl Iterator<Item = &'a str> + Clone,
) -> Demand {
    let r = &spec.resources;
    let (gpu, gpu_models) = match &r.gpu {
        None => (GpuDemand::None, Vec::new()),
        Some(g) => {
            let demand = match (g.share, g.memory_gb) {
                (Some(s), _) if s >= 1.0 => GpuDemand::Whole { count: 1 },
                (Some(s), _) => GpuDemand::Share {
                    milli: ((s * 1000.0).round() as u32).clamp(1, 999),
                },
                (None, Some(m)) => GpuDemand::Memory {
                    count: g.count,
                    per_gpu: gb_to_mib(m),
                },
                (None, None) => GpuDemand::Whole { count: g.count },
            };
            (demand, resolve_models(g.model.as_deref(), known_models))
        }
    };
    Demand {
        gpu,
        gpu_models,
        cpu_milli: r.cpu_milli(),
        memory_mib: r.memory_mib(),
        disk_mib: r.disk_mib(),
        labels: spec.labels.clone(),
        exclusive: r.exclusive,
        // The control plane fills this in from the model registry.
        weights: None,
        // And this, from the nodes' image reports.
        image: None,
        needs_container: spec.runtime_kind() == RuntimeKind::Container,
    }
}

fn resolve_models<'a>(
    wanted: Option<&str>,
    known: impl Iterator<Item = &'a str> + Clone,
) -> Vec<String> {
    let Some(wanted) = wanted else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for alt in wanted.split('|').map(str::trim) {
        let mut matched = false;
        for k in known.clone() {
            if gpu_model::matches(alt, k) && !out.iter().any(|o: &String| o == k) {
                out.push(k.to_string());
                matched = true;
            }
        }
        if !matched {
            // Kept literally: the filter then names it as the missing model.
            out.push(alt.to_string());
        }
    }
    out
}

/// What an admitted request counts against its tenant's quota before it is placed.
pub fn requested_usage(spec: &TaskSpec, demand: &Demand) -> Usage {
    let (gpus, gpu_mem_mib) = match demand.gpu {
        GpuDemand::None => (0.0, 0),
        GpuDemand::Share { milli } => (milli as f64 / 1000.0, 0),
        GpuDemand::Memory { count, per_gpu } => (count as f64, count as u64 * per_gpu),
        GpuDemand::Whole { count } => (count as f64, 0),
    };
    let r = &spec.resources;
    Usage {
        gpus,
        gpu_memory_gb: gpu_mem_mib as f64 / 1024.0,
        cpu_cores: r.cpu.as_ref().map_or(0.0, |c| c.cores),
        memory_gb: r.memory.as_ref().map_or(0.0, |m| m.size_gb),
        disk_gb: r.disk.as_ref().map_or(0.0, |d| d.size_gb),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(gpu: &str) -> TaskSpec {
        let body = format!(
            r#"{{"task_id":"t","task_type":"training","resources":{{"gpu":{gpu},"cpu":{{"cores":2}}}}}}"#
        );
        caldera_spec::parse_task_spec(body.as_bytes()).unwrap()
    }

    #[test]
    fn user_units_become_placement_units() {
        let models = ["NVIDIA A100-SXM4-80GB", "T4"];
        let d = demand_for(
            &spec(r#"{"count":2,"memory_gb":20,"model":"a100"}"#),
            models.iter().copied(),
        );
        assert!(matches!(
            d.gpu,
            GpuDemand::Memory {
                count: 2,
                per_gpu: 20480
            }
        ));
        assert_eq!(d.gpu_models, vec!["NVIDIA A100-SXM4-80GB".to_string()]);
        assert_eq!(d.cpu_milli, 2000);
        let d = demand_for(&spec(r#"{"share":0.25}"#), models.iter().copied());
        assert!(matches!(d.gpu, GpuDemand::Share { milli: 250 }));
        let d = demand_for(
            &spec(r#"{"count":4,"model":"H100"}"#),
            models.iter().copied(),
        );
        assert!(matches!(d.gpu, GpuDemand::Whole { count: 4 }));
        assert_eq!(d.gpu_models, vec!["H100".to_string()]);
    }

    #[test]
    fn a_task_with_an_image_needs_a_container_runtime_unless_it_asks_for_a_process() {
        let with = |extra: &str| {
            let body = format!(
                r#"{{"task_id":"t","task_type":"training","resources":{{"cpu":{{"cores":1}}}}{extra}}}"#
            );
            let spec = caldera_spec::parse_task_spec(body.as_bytes()).unwrap();
            demand_for(&spec, std::iter::empty()).needs_container
        };
        assert!(!with(""));
        assert!(with(r#","image":"registry.internal/a:1""#));
        assert!(!with(
            r#","image":"registry.internal/a:1","runtime":"process""#
        ));
        assert!(with(
            r#","image":"registry.internal/a:1","runtime":"container""#
        ));
    }

    #[test]
    fn a10_names_no_a100_and_a100_80gb_only_the_80gb_ones() {
        let models = [
            "NVIDIA A10",
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100 80GB PCIe",
        ];
        let resolved = |model: &str| {
            let body = format!(r#"{{"count":2,"model":"{model}"}}"#);
            demand_for(&spec(&body), models.iter().copied()).gpu_models
        };
        assert_eq!(resolved("A10"), ["NVIDIA A10"]);
        assert_eq!(
            resolved("A100-80GB"),
            ["NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"]
        );
        assert_eq!(resolved("A100").len(), 3);
    }
}
