//! The bounds a task spec is held to: each keeps one tenant from taking
//! the pool, the queue or the control plane's memory with one request.

/// Largest request body the gateway accepts (a spec is a few hundred bytes).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Most GPUs one task may ask for (a large node holds 8-16).
pub const MAX_GPUS: u32 = 64;
/// Most GPU memory per GPU a request may name (the largest GPUs hold 192 GB).
pub const MAX_GPU_MEMORY_GB: f64 = 1024.0;
pub const MAX_CPU_CORES: f64 = 4096.0;
pub const MAX_MEMORY_GB: f64 = 65_536.0;
pub const MAX_DISK_GB: f64 = 1_048_576.0;
pub const MAX_REPLICAS: u32 = 1000;
/// Least GPU memory per GPU a request may name: 256 MiB. Below it a task
/// holds a GPU for next to no quota, and the placer's MiB rounding grants
/// less than was asked.
pub const MIN_GPU_MEMORY_GB: f64 = 0.25;
/// Least share of one GPU: 1%. Smaller slices let one tenant stack hundreds
/// of processes on a GPU for next to no quota.
pub const MIN_GPU_SHARE: f64 = 0.01;
/// Least CPU a request may name: a tenth of a core (100 millicores; a
/// smaller request rounds to no CPU at all).
pub const MIN_CPU_CORES: f64 = 0.1;
/// Least host memory a request may name: 64 MiB, about what a process
/// needs to start.
pub const MIN_MEMORY_GB: f64 = 0.0625;
/// Least disk a request may name: 64 MiB.
pub const MIN_DISK_GB: f64 = 0.0625;
pub const MAX_RETRIES: u32 = 100;
