//! Tenants and their quotas.
use serde::{Deserialize, Serialize};

/// Limits per dimension; an absent dimension is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Quota {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_gb: Option<f64>,
    /// GPUs per GPU model (matched like a request's `model`: a case-insensitive
    /// substring, so "A100" covers "NVIDIA A100-SXM4-80GB"); a shared GPU counts
    /// as its fraction.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub gpus_by_model: std::collections::BTreeMap<String, f64>,
}

/// Whether a tenant's usage after a grant stays within its guarantee, borrows,
/// or passes its borrowing limit.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    Guaranteed,
    Borrowing,
    /// Over quota in `dim`: would use `would`, may use `limit` (guarantee + borrowing limit).
    OverQuota {
        dim: &'static str,
        limit: f64,
        would: f64,
    },
}

/// A tenant's standing with `usage` (including the request in question).
pub fn standing(guaranteed: &Quota, borrowing_limit: &Quota, usage: &Usage) -> Standing {
    if guaranteed.exceeded_by(usage).is_none() {
        return Standing::Guaranteed;
    }
    let dims = [
        ("gpus", guaranteed.gpus, borrowing_limit.gpus, usage.gpus),
        (
            "gpu_memory_gb",
            guaranteed.gpu_memory_gb,
            borrowing_limit.gpu_memory_gb,
            usage.gpu_memory_gb,
        ),
        (
            "cpu_cores",
            guaranteed.cpu_cores,
            borrowing_limit.cpu_cores,
            usage.cpu_cores,
        ),
        (
            "memory_gb",
            guaranteed.memory_gb,
            borrowing_limit.memory_gb,
            usage.memory_gb,
        ),
        (
            "disk_gb",
            guaranteed.disk_gb,
            borrowing_limit.disk_gb,
            usage.disk_gb,
        ),
    ];
    for (dim, g, b, used) in dims {
        if let (Some(g), Some(b)) = (g, b) {
            if used > g + b + 1e-9 {
                return Standing::OverQuota {
                    dim,
                    limit: g + b,
                    would: used,
                };
            }
        }
    }
    Standing::Borrowing
}

/// The dominant share of the guarantee in use (0 when nothing is guaranteed):
/// the fair-share key of the queue, as in DRF.
pub fn dominant_share(guaranteed: &Quota, usage: &Usage) -> f64 {
    let dims = [
        (guaranteed.gpus, usage.gpus),
        (guaranteed.gpu_memory_gb, usage.gpu_memory_gb),
        (guaranteed.cpu_cores, usage.cpu_cores),
        (guaranteed.memory_gb, usage.memory_gb),
        (guaranteed.disk_gb, usage.disk_gb),
    ];
    dims.iter()
        .filter_map(|(g, u)| {
            g.map(|g| {
                if g > 0.0 {
                    u / g
                } else if *u > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            })
        })
        .fold(0.0, f64::max)
}

/// A tenant as stored. The token itself is never stored, only its SHA-256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRecord {
    pub name: String,
    pub token_sha256: String,
    /// The guarantee: what the tenant may always use, preempting borrowers if needed.
    pub quota: Quota,
    /// How far past its guarantee the tenant may borrow idle capacity, per
    /// dimension (extra on top of the guarantee, as Kueue's borrowingLimit);
    /// an absent dimension may borrow without limit.
    #[serde(default)]
    pub borrowing_limit: Quota,
    pub created_ms: u64,
}

/// Resources held, in the same dimensions as [`Quota`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// GPUs touched (a share counts as its fraction).
    pub gpus: f64,
    pub gpu_memory_gb: f64,
    pub cpu_cores: f64,
    pub memory_gb: f64,
    pub disk_gb: f64,
}

impl Quota {
    /// The first dimension in which `usage` would pass this quota, with the
    /// figures, e.g. `("gpus", 4.0, 8.0)` = would use 8, may use 4.
    pub fn exceeded_by(&self, usage: &Usage) -> Option<(&'static str, f64, f64)> {
        let dims = [
            ("gpus", self.gpus, usage.gpus),
            ("gpu_memory_gb", self.gpu_memory_gb, usage.gpu_memory_gb),
            ("cpu_cores", self.cpu_cores, usage.cpu_cores),
            ("memory_gb", self.memory_gb, usage.memory_gb),
            ("disk_gb", self.disk_gb, usage.disk_gb),
        ];
        dims.into_iter().find_map(|(name, limit, used)| {
            limit.filter(|l| used > *l + 1e-9).map(|l| (name, l, used))
        })
    }

    /// Range check of an operator's quota document.
    pub fn validate(&self) -> Result<(), crate::SpecError> {
        let dims = [
            ("gpus", self.gpus),
            ("gpu_memory_gb", self.gpu_memory_gb),
            ("cpu_cores", self.cpu_cores),
            ("memory_gb", self.memory_gb),
            ("disk_gb", self.disk_gb),
        ];
        for (model, v) in &self.gpus_by_model {
            if model.trim().is_empty() || !(0.0..=1e9).contains(v) {
                return Err(crate::SpecError::new(
                    crate::SpecErrorKind::OutOfRange,
                    format!("gpus_by_model.{model}"),
                    "a per-model GPU limit needs a model name and a value between 0 and 1e9",
                ));
            }
        }
        for (name, v) in dims {
            if let Some(v) = v {
                if !(0.0..=1e9).contains(&v) {
                    return Err(crate::SpecError::new(
                        crate::SpecErrorKind::OutOfRange,
                        name,
                        format!("{name} must be between 0 and 1e9, not {v}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.gpus += o.gpus;
        self.gpu_memory_gb += o.gpu_memory_gb;
        self.cpu_cores += o.cpu_cores;
        self.memory_gb += o.memory_gb;
        self.disk_gb += o.disk_gb;
    }
}

impl std::ops::SubAssign for Usage {
    fn sub_assign(&mut self, o: Usage) {
        self.gpus = (self.gpus - o.gpus).max(0.0);
        self.gpu_memory_gb = (self.gpu_memory_gb - o.gpu_memory_gb).max(0.0);
        self.cpu_cores = (self.cpu_cores - o.cpu_cores).max(0.0);
        self.memory_gb = (self.memory_gb - o.memory_gb).max(0.0);
        self.disk_gb = (self.disk_gb - o.disk_gb).max(0.0);
    }
}
