//! `--simulate-gpus "8xA100-80GB,2xT4-16GB"`: GPUs declared for a machine that has
//! none, so a laptop or CI box can stand in for a GPU node. Every simulated GPU is
//! marked `simulated: true` so no view can mistake it for real hardware.
use caldera_spec::GpuInfo;

/// Most GPUs one group may declare; a typo like `800xA100` should not pass.
const MAX_COUNT: u32 = 64;
/// Largest per-GPU memory accepted, GB.
const MAX_MEMORY_GB: u64 = 1024;

/// One `COUNTxMODEL-MEMGB` part of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimGpuGroup {
    pub count: u32,
    pub model: String,
    pub memory_gb: u64,
}

/// A part of `--simulate-gpus` that is not `COUNTxMODEL-MEMGB`; names the part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part:?}: {reason} (expected COUNTxMODEL-MEMGB, e.g. 8xA100-80GB)")]
pub struct SimGpuError {
    pub part: String,
    pub reason: String,
}

impl SimGpuError {
    fn new(part: &str, reason: impl Into<String>) -> Self {
        SimGpuError {
            part: part.to_string(),
            reason: reason.into(),
        }
    }
}

/// Parses a comma-separated list of groups, e.g. `"8xA100-80GB,2xT4-16GB"`.
pub fn parse(spec: &str) -> Result<Vec<SimGpuGroup>, SimGpuError> {
    if spec.trim().is_empty() {
        return Err(SimGpuError::new(spec, "empty GPU list"));
    }
    spec.split(',').map(|p| parse_group(p.trim())).collect()
}

fn parse_group(part: &str) -> Result<SimGpuGroup, SimGpuError> {
    let (count, rest) = part
        .split_once(['x', 'X'])
        .ok_or_else(|| SimGpuError::new(part, "missing 'x' between count and model"))?;
    let count: u32 = count
        .parse()
        .map_err(|_| SimGpuError::new(part, format!("count {count:?} is not a whole number")))?;
    if count == 0 || count > MAX_COUNT {
        return Err(SimGpuError::new(
            part,
            format!("count must be 1..={MAX_COUNT}"),
        ));
    }
    let (model, memory) = rest
        .rsplit_once('-')
        .ok_or_else(|| SimGpuError::new(part, "missing '-' between model and memory"))?;
    if model.is_empty()
        || !model
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(SimGpuError::new(
            part,
            format!("model {model:?} is empty or has odd characters"),
        ));
    }
    let digits = memory
        .strip_suffix("GB")
        .or_else(|| memory.strip_suffix("gb"))
        .or_else(|| memory.strip_suffix("G"))
        .ok_or_else(|| SimGpuError::new(part, format!("memory {memory:?} must end in GB")))?;
    let memory_gb: u64 = digits.parse().map_err(|_| {
        SimGpuError::new(
            part,
            format!("memory {memory:?} is not a whole number of GB"),
        )
    })?;
    if memory_gb == 0 || memory_gb > MAX_MEMORY_GB {
        return Err(SimGpuError::new(
            part,
            format!("memory must be 1..={MAX_MEMORY_GB} GB"),
        ));
    }
    Ok(SimGpuGroup {
        count,
        model: model.to_string(),
        memory_gb,
    })
}

/// The GPUs the groups declare, indexed in order, with stable per-node UUIDs.
/// Each is named with its memory (`A100-80GB`), as NVML names real ones
/// (`NVIDIA A100-SXM4-80GB`): a request for `A100-80GB` then names exactly
/// the 80 GB A100s, and one for `A100` all of them (`caldera_spec::gpu_model`).
pub fn simulated_gpus(groups: &[SimGpuGroup], node_name: &str) -> Vec<GpuInfo> {
    let mut gpus = Vec::new();
    for group in groups {
        for _ in 0..group.count {
            let index = gpus.len() as u32;
            gpus.push(GpuInfo {
                index,
                uuid: format!("GPU-SIM-{node_name}-{index}"),
                model: format!("{}-{}GB", group.model, group.memory_gb),
                memory_total_mb: group.memory_gb * 1024,
                memory_used_mb: 0,
                utilization_pct: 0,
                simulated: true,
            });
        }
    }
    gpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_groups_in_order() {
        let groups = parse("8xA100-80GB, 2xT4-16GB").unwrap();
        assert_eq!(
            groups,
            vec![
                SimGpuGroup {
                    count: 8,
                    model: "A100".into(),
                    memory_gb: 80
                },
                SimGpuGroup {
                    count: 2,
                    model: "T4".into(),
                    memory_gb: 16
                },
            ]
        );
        let gpus = simulated_gpus(&groups, "n1");
        assert_eq!(gpus.len(), 10);
        assert_eq!(gpus[0].memory_total_mb, 80 * 1024);
        assert_eq!(gpus[9].model, "T4-16GB");
        assert_eq!(gpus[9].uuid, "GPU-SIM-n1-9");
        assert!(gpus.iter().all(|g| g.simulated));
    }

    /// Named with their memory, simulated GPUs answer to the names people ask
    /// for exactly as real ones do: `A100-80GB` only the 80 GB ones.
    #[test]
    fn a_sized_model_name_names_only_gpus_of_that_size() {
        let gpus = simulated_gpus(&parse("1xA100-80GB,1xA100-40GB,1xA10-24GB").unwrap(), "n");
        let named = |want: &str| -> Vec<u32> {
            gpus.iter()
                .filter(|g| caldera_spec::gpu_model::matches(want, &g.model))
                .map(|g| g.index)
                .collect()
        };
        assert_eq!(named("A100-80GB"), vec![0]);
        assert_eq!(named("A100"), vec![0, 1]);
        assert_eq!(named("A10"), vec![2]);
    }

    #[test]
    fn model_may_contain_dashes() {
        let groups = parse("1xH100-SXM-80GB").unwrap();
        assert_eq!(groups[0].model, "H100-SXM");
        assert_eq!(groups[0].memory_gb, 80);
    }

    #[test]
    fn bad_parts_are_named() {
        // (input, the part the error must name, a word of the reason)
        let cases = [
            ("", "", "empty"),
            ("8xA100-80GB,2yT4-16GB", "2yT4-16GB", "missing 'x'"),
            ("axA100-80GB", "axA100-80GB", "count"),
            ("0xA100-80GB", "0xA100-80GB", "count must be"),
            ("100xA100-80GB", "100xA100-80GB", "count must be"),
            ("8xA100", "8xA100", "missing '-'"),
            ("8x-80GB", "8x-80GB", "model"),
            ("8xA100-80TB", "8xA100-80TB", "must end in GB"),
            ("8xA100-zGB", "8xA100-zGB", "whole number"),
            ("8xA100-0GB", "8xA100-0GB", "memory must be"),
            ("8xA1 00-80GB", "8xA1 00-80GB", "odd characters"),
        ];
        for (input, part, reason) in cases {
            let err = parse(input).expect_err(input);
            assert_eq!(err.part, part, "input {input:?}");
            assert!(err.to_string().contains(reason), "input {input:?}: {err}");
        }
    }
}
