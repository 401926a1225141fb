//! The pool's capacity, allocation and measured use (`GET /v1/utilization`).
use serde::{Deserialize, Serialize};

/// Capacity, allocation and measured use of one dimension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dim {
    pub capacity: f64,
    pub allocated: f64,
    pub used: f64,
}

/// The five dimensions of the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dims {
    pub gpus: Dim,
    pub gpu_memory_mb: Dim,
    pub cpu_cores: Dim,
    pub memory_mb: Dim,
    pub disk_mb: Dim,
}

/// Figures of one node, tenant or GPU model: its name in `key`, the
/// figures beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Keyed<T> {
    pub key: String,
    #[serde(flatten)]
    pub dims: T,
}

/// The pool in total and broken down by node, tenant and GPU model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Utilization {
    pub total: Dims,
    pub by_node: Vec<Keyed<Dims>>,
    pub by_tenant: Vec<Keyed<Dims>>,
    pub by_gpu_model: Vec<Keyed<Dims>>,
    /// True when any GPU in the pool is simulated.
    pub simulated_gpus: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_entry_writes_its_figures_beside_its_key() {
        let d = Dims {
            gpus: Dim {
                capacity: 8.0,
                allocated: 2.0,
                used: 1.5,
            },
            ..Dims::default()
        };
        let u = Utilization {
            total: d,
            by_node: vec![Keyed {
                key: "node-1".into(),
                dims: d,
            }],
            ..Utilization::default()
        };
        let wire = serde_json::to_value(&u).expect("serializes");
        assert_eq!(wire["by_node"][0]["key"], "node-1");
        assert_eq!(wire["by_node"][0]["gpus"]["used"], 1.5);
        assert_eq!(serde_json::from_value::<Utilization>(wire).ok(), Some(u));
    }
}
