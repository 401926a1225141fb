//! GPUs: real ones through NVML, declared ones (`--simulate-gpus`), or none.
//! NVML is loaded at run time, so a machine without the NVIDIA driver simply
//! reports no GPUs with the reason.
use caldera_spec::node::GpuLive;
use caldera_spec::GpuInfo;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;
use std::collections::HashMap;

const MIB: u64 = 1024 * 1024;

/// GPU use of one process as NVML measures it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessGpuUse {
    pub memory_mb: u64,
    pub utilization_pct: u32,
}

/// Where the node's GPUs come from.
pub enum GpuProbe {
    /// Real GPUs; `last_sample_us` is NVML's per-process sampling cursor.
    Nvml {
        nvml: Box<Nvml>,
        count: u32,
        last_sample_us: u64,
    },
    /// Declared GPUs; their live figures are whatever the workloads' CPU use says.
    Simulated(Vec<GpuInfo>),
    /// No GPUs; the string says why.
    Absent(String),
}

impl GpuProbe {
    /// Simulated GPUs when declared, else NVML, else none with the reason (logged once).
    pub fn detect(simulated: Vec<GpuInfo>) -> GpuProbe {
        if !simulated.is_empty() {
            return GpuProbe::Simulated(simulated);
        }
        match Nvml::init() {
            Ok(nvml) => match nvml.device_count() {
                Ok(count) => GpuProbe::Nvml {
                    nvml: Box::new(nvml),
                    count,
                    last_sample_us: 0,
                },
                Err(e) => {
                    tracing::warn!("NVML loaded but cannot count GPUs ({e}); reporting no GPUs");
                    GpuProbe::Absent(format!("NVML device count failed: {e}"))
                }
            },
            Err(e) => {
                tracing::info!("NVML unavailable ({e}); reporting no GPUs (use --simulate-gpus to declare some)");
                GpuProbe::Absent(format!("NVML unavailable: {e}"))
            }
        }
    }

    /// `gpu_source` of the inventory: "nvml", "simulated" or "none (reason)".
    pub fn source(&self) -> String {
        match self {
            GpuProbe::Nvml { .. } => "nvml".to_string(),
            GpuProbe::Simulated(_) => "simulated".to_string(),
            GpuProbe::Absent(why) => format!("none ({why})"),
        }
    }

    /// True for declared GPUs.
    pub fn is_simulated(&self) -> bool {
        matches!(self, GpuProbe::Simulated(_))
    }

    /// The inventory's GPU list.
    pub fn inventory(&self) -> Vec<GpuInfo> {
        match self {
            GpuProbe::Simulated(gpus) => gpus.clone(),
            GpuProbe::Absent(_) => Vec::new(),
            GpuProbe::Nvml { nvml, count, .. } => (0..*count)
                .filter_map(|i| {
                    let d = nvml
                        .device_by_index(i)
                        .map_err(|e| tracing::warn!("NVML GPU {i}: {e}"))
                        .ok()?;
                    let mem = d.memory_info().ok();
                    Some(GpuInfo {
                        index: i,
                        uuid: d.uuid().unwrap_or_else(|_| format!("GPU-{i}")),
                        model: d.name().unwrap_or_else(|_| "unknown".to_string()),
                        memory_total_mb: mem.as_ref().map_or(0, |m| m.total / MIB),
                        memory_used_mb: mem.as_ref().map_or(0, |m| m.used / MIB),
                        utilization_pct: d.utilization_rates().map_or(0, |u| u.gpu),
                        simulated: false,
                    })
                })
                .collect(),
        }
    }

    /// Live figures per GPU. Simulated GPUs report what their workloads measure,
    /// which the caller folds in (see `agent`), so here they start at zero.
    pub fn live(&self) -> Vec<GpuLive> {
        match self {
            GpuProbe::Simulated(gpus) => gpus
                .iter()
                .map(|g| GpuLive {
                    index: g.index,
                    memory_used_mb: 0,
                    utilization_pct: 0,
                    faulted: false,
                })
                .collect(),
            GpuProbe::Absent(_) => Vec::new(),
            GpuProbe::Nvml { nvml, count, .. } => (0..*count)
                .map(|i| {
                    let d = nvml.device_by_index(i).ok();
                    let memory = d.as_ref().and_then(|d| d.memory_info().ok());
                    GpuLive {
                        index: i,
                        faulted: memory.is_none(),
                        memory_used_mb: memory.map_or(0, |m| m.used / MIB),
                        utilization_pct: d
                            .as_ref()
                            .and_then(|d| d.utilization_rates().ok())
                            .map_or(0, |u| u.gpu),
                    }
                })
                .collect(),
        }
    }

    /// Per-process GPU memory and SM utilisation, summed over the GPUs (NVML only;
    /// empty otherwise or where the driver does not expose it).
    pub fn per_process(&mut self) -> HashMap<u32, ProcessGpuUse> {
        let mut out: HashMap<u32, ProcessGpuUse> = HashMap::new();
        let GpuProbe::Nvml {
            nvml,
            count,
            last_sample_us,
        } = self
        else {
            return out;
        };
        let mut newest = *last_sample_us;
        for i in 0..*count {
            let Ok(d) = nvml.device_by_index(i) else {
                continue;
            };
            if let Ok(procs) = d.running_compute_processes() {
                for p in procs {
                    if let UsedGpuMemory::Used(bytes) = p.used_gpu_memory {
                        out.entry(p.pid).or_default().memory_mb += bytes / MIB;
                    }
                }
            }
            if let Ok(samples) = d.process_utilization_stats(*last_sample_us) {
                for s in samples {
                    newest = newest.max(s.timestamp);
                    let e = out.entry(s.pid).or_default();
                    e.utilization_pct = e.utilization_pct.saturating_add(s.sm_util);
                }
            }
        }
        *last_sample_us = newest;
        out
    }
}
