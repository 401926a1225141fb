//! What a task asks of the pool, as the user writes it (GB, cores, shares).
use serde::{Deserialize, Serialize};

/// `resources` of a task spec. Every part is optional; an absent part asks for nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ResourceRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<SizeRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<SizeRequest>,
    /// The whole node for this task alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
}

/// GPUs: `count` GPUs with `memory_gb` free on EACH, or `share` of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuRequest {
    #[serde(default = "one")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub count: u32,
    /// GB of GPU memory per GPU. Absent: whole GPUs (or `share`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gb: Option<f64>,
    /// Fraction (0, 1] of one GPU; only with count = 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 1))]
    pub share: Option<f64>,
    /// GPU model, matched by whole tokens of the node's model name, ignoring
    /// case, separators and the vendor ([`crate::gpu_model::matches`]: "A100"
    /// matches "NVIDIA A100-SXM4-80GB", "A10" does not); `A|B` allows either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

fn one() -> u32 {
    1
}

/// CPU cores (fractions allowed: 0.5 = half a core).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CpuRequest {
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0))]
    pub cores: f64,
}

/// A size in GB (memory or disk).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SizeRequest {
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0))]
    pub size_gb: f64,
}

impl ResourceRequest {
    /// Requested CPU in millicores.
    pub fn cpu_milli(&self) -> u64 {
        self.cpu
            .as_ref()
            .map_or(0, |c| (c.cores * 1000.0).round() as u64)
    }
    /// Requested host memory in MiB.
    pub fn memory_mib(&self) -> u64 {
        self.memory.as_ref().map_or(0, |m| gb_to_mib(m.size_gb))
    }
    /// Requested disk in MiB.
    pub fn disk_mib(&self) -> u64 {
        self.disk.as_ref().map_or(0, |d| gb_to_mib(d.size_gb))
    }
    /// Number of GPUs touched (a share counts as one).
    pub fn gpu_count(&self) -> u32 {
        self.gpu.as_ref().map_or(0, |g| g.count)
    }
}

/// GB (as users write it, 1 GB = 1024 MiB) to MiB, rounded up so a request is never shortchanged.
pub fn gb_to_mib(gb: f64) -> u64 {
    (gb * 1024.0).ceil() as u64
}
