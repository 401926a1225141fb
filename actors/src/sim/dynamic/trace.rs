//! The trace as the dynamic replay needs it: pods with their creation and
//! deletion times (seconds), and the GPU node list. Malformed values are
//! reported with file, line and column, never unwrapped.
use std::path::Path;

use super::DynamicError;

/// One pod of `openb_pod_list_*.csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Pod name.
    pub name: String,
    /// CPU, milli-cores.
    pub cpu_milli: u64,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Number of GPUs (0 = CPU-only).
    pub num_gpu: u32,
    /// Share of one GPU in milli (1000 = whole GPUs).
    pub gpu_milli: u32,
    /// Allowed GPU models (`V100M16|V100M32`), empty = any.
    pub gpu_spec: String,
    /// Arrival, seconds.
    pub creation_s: u64,
    /// Departure, seconds.
    pub deletion_s: u64,
}

impl Pod {
    /// GPUs requested (a share as its fraction).
    pub fn gpus(&self) -> f64 {
        if self.num_gpu == 0 || self.gpu_milli == 0 {
            0.0
        } else if self.num_gpu == 1 && self.gpu_milli < 1000 {
            self.gpu_milli as f64 / 1000.0
        } else {
            self.num_gpu as f64
        }
    }

    /// A GPU-sharing pod (part of one GPU).
    pub fn is_sharing(&self) -> bool {
        self.num_gpu == 1 && self.gpu_milli > 0 && self.gpu_milli < 1000
    }
}

/// The node list is the one the static replay reads: one loader, one type.
pub use crate::sim::trace::TraceNode;

struct Table {
    file: String,
    header: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

impl Table {
    fn read(path: &Path) -> Result<Table, DynamicError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| DynamicError(format!("{}: {e}", path.display())))?;
        let mut lines = text.lines().enumerate();
        let header = lines.next().map(|(_, l)| split(l)).unwrap_or_default();
        let rows = lines
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, split(l)))
            .collect();
        Ok(Table {
            file: path.display().to_string(),
            header,
            rows,
        })
    }

    fn col(&self, name: &str) -> Result<usize, DynamicError> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| DynamicError(format!("{}:1: missing column `{name}`", self.file)))
    }

    fn text<'a>(&self, row: &'a (usize, Vec<String>), col: usize) -> &'a str {
        row.1.get(col).map(String::as_str).unwrap_or("")
    }

    fn num(&self, row: &(usize, Vec<String>), col: usize) -> Result<u64, DynamicError> {
        let raw = self.text(row, col);
        raw.parse::<u64>().map_err(|_| {
            DynamicError(format!(
                "{}:{}: column `{}`: not a non-negative integer (got `{raw}`)",
                self.file, row.0, self.header[col]
            ))
        })
    }
}

fn split(line: &str) -> Vec<String> {
    line.split(',')
        .map(|f| f.trim().trim_matches('"').to_string())
        .collect()
}

/// Loads a pod list, keeping the order of the file.
pub fn load_pods(path: &Path) -> Result<Vec<Pod>, DynamicError> {
    let t = Table::read(path)?;
    let cols = [
        "name",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "gpu_spec",
        "creation_time",
        "deletion_time",
    ]
    .map(|c| t.col(c));
    let [name, cpu, mem, num, milli, spec, created, deleted] = cols;
    let (name, cpu, mem, num, milli, spec, created, deleted) =
        (name?, cpu?, mem?, num?, milli?, spec?, created?, deleted?);
    t.rows
        .iter()
        .map(|row| {
            let num_gpu = t.num(row, num)?;
            let gpu_milli = t.num(row, milli)?;
            if num_gpu > 64 || gpu_milli > 1000 {
                return Err(DynamicError(format!(
                    "{}:{}: num_gpu {num_gpu} / gpu_milli {gpu_milli} out of range",
                    t.file, row.0
                )));
            }
            let creation_s = t.num(row, created)?;
            let deletion_s = t.num(row, deleted)?;
            if deletion_s < creation_s {
                return Err(DynamicError(format!(
                    "{}:{}: deletion_time {deletion_s} before creation_time {creation_s}",
                    t.file, row.0
                )));
            }
            Ok(Pod {
                name: t.text(row, name).to_string(),
                cpu_milli: t.num(row, cpu)?,
                memory_mib: t.num(row, mem)?,
                num_gpu: num_gpu as u32,
                gpu_milli: gpu_milli as u32,
                gpu_spec: t.text(row, spec).to_string(),
                creation_s,
                deletion_s,
            })
        })
        .collect()
}

/// Loads a GPU node list with the static replay's loader.
pub fn load_nodes(path: &Path) -> Result<Vec<TraceNode>, DynamicError> {
    crate::sim::trace::load_nodes(path).map_err(|e| DynamicError(e.to_string()))
}
