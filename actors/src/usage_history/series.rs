//! What a history point holds, value by value: a tenant's allocated and
//! used, the pool's capacity, allocated, used, idle and borrowed, each in
//! the five dimensions of [`Usage`] (GPUs by fraction, GB).
pub use caldera_spec::views::PoolSample;
use caldera_spec::Usage;
use serde::Serialize;

fn values(u: &Usage) -> [f32; 5] {
    [u.gpus, u.gpu_memory_gb, u.cpu_cores, u.memory_gb, u.disk_gb].map(|x| x as f32)
}

fn usage(v: &[f32], at: usize) -> Usage {
    let g = |i: usize| f64::from(v.get(at + i).copied().unwrap_or(0.0));
    Usage {
        gpus: g(0),
        gpu_memory_gb: g(1),
        cpu_cores: g(2),
        memory_gb: g(3),
        disk_gb: g(4),
    }
}

/// One tenant at one instant (or the mean over a bucket).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TenantSample {
    pub allocated: Usage,
    pub used: Usage,
}

impl TenantSample {
    pub fn to_values(&self) -> Vec<f32> {
        [values(&self.allocated), values(&self.used)].concat()
    }
    pub fn from_values(v: &[f32]) -> TenantSample {
        TenantSample {
            allocated: usage(v, 0),
            used: usage(v, 5),
        }
    }
}

/// A pool sample's values as the history stores them.
pub fn pool_values(p: &PoolSample) -> Vec<f32> {
    [
        values(&p.capacity),
        values(&p.allocated),
        values(&p.used),
        values(&p.idle),
        values(&p.borrowed),
    ]
    .concat()
}

/// The pool sample of stored values.
pub fn pool_from_values(v: &[f32]) -> PoolSample {
    PoolSample {
        capacity: usage(v, 0),
        allocated: usage(v, 5),
        used: usage(v, 10),
        idle: usage(v, 15),
        borrowed: usage(v, 20),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_through_their_values() {
        let t = TenantSample {
            allocated: Usage {
                gpus: 0.5,
                cpu_cores: 2.0,
                ..Default::default()
            },
            used: Usage {
                memory_gb: 1.5,
                ..Default::default()
            },
        };
        assert_eq!(TenantSample::from_values(&t.to_values()), t);
        let p = PoolSample {
            idle: Usage {
                disk_gb: 4.0,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(pool_values(&p).len(), 25);
        assert_eq!(pool_from_values(&pool_values(&p)), p);
    }
}
