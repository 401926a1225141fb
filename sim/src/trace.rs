//! Loading the Alibaba GPU trace (openb) CSVs: nodes and tasks. Every malformed
//! value is reported with its file, line and column, never unwrapped.
use std::path::{Path, PathBuf};

use caldera_scheduling::placement::{Demand, GpuDemand, GpuSlot, NodeView};
use caldera_spec::codes::{self, ErrorCode};

/// A trace file could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A required column is missing from the header.
    #[error("{path}:1: missing column `{column}`")]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// Column name.
        column: &'static str,
    },
    /// A value could not be parsed.
    #[error("{path}:{line}: field `{field}`: {reason} (got `{value}`)")]
    Field {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Column name.
        field: &'static str,
        /// The raw value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl TraceError {
    /// Its entry in the one error registry (`caldera_spec::codes`).
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            TraceError::Io { .. } => &codes::TRACE_IO,
            TraceError::MissingColumn { .. } => &codes::TRACE_MISSING_COLUMN,
            TraceError::Field { .. } => &codes::TRACE_BAD_FIELD,
        }
    }

    /// Stable numeric code.
    pub fn code(&self) -> u32 {
        self.error_code().code
    }

    /// Stable machine-readable name.
    pub fn name(&self) -> &'static str {
        self.error_code().name
    }
}

/// A node of the trace (`sn,cpu_milli,memory_mib,gpu,model`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceNode {
    /// Node name.
    pub name: String,
    /// CPU, milli-cores.
    pub cpu_milli: u64,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Number of GPUs.
    pub gpus: u32,
    /// GPU model.
    pub model: String,
}

impl TraceNode {
    /// `count` alike nodes `n0`, `n1`, ... of `gpus` G2 GPUs (test clusters).
    #[cfg(test)]
    pub fn alike(count: usize, gpus: u32, cpu_milli: u64, memory_mib: u64) -> Vec<TraceNode> {
        (0..count)
            .map(|i| TraceNode {
                name: format!("n{i}"),
                cpu_milli,
                memory_mib,
                gpus,
                model: "G2".into(),
            })
            .collect()
    }

    /// The node as the placement engine sees it: every GPU has capacity 1000.
    pub fn view(&self) -> NodeView {
        NodeView {
            name: self.name.clone(),
            healthy: true,
            cordoned: false,
            gpus: (0..self.gpus)
                .map(|index| GpuSlot {
                    index,
                    model: self.model.clone(),
                    capacity: 1000,
                    free: 1000,
                })
                .collect(),
            cpu_capacity_milli: self.cpu_milli,
            cpu_free_milli: self.cpu_milli,
            memory_capacity_mib: self.memory_mib,
            memory_free_mib: self.memory_mib,
            ..NodeView::default()
        }
    }
}

/// A task of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceTask {
    /// Task name.
    pub name: String,
    /// CPU, milli-cores.
    pub cpu_milli: u64,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Number of GPUs (0 = CPU-only).
    pub num_gpu: u32,
    /// Share of one GPU in milli (1000 = whole); below 1000 only when `num_gpu == 1`.
    pub gpu_milli: u32,
    /// Allowed GPU models (empty = any).
    pub gpu_spec: Vec<String>,
}

impl TraceTask {
    /// The task as a placement demand.
    pub fn demand(&self) -> Demand {
        let gpu = match (self.num_gpu, self.gpu_milli) {
            (0, _) | (_, 0) => GpuDemand::None,
            (1, m) if m < 1000 => GpuDemand::Share { milli: m },
            (n, _) => GpuDemand::Whole { count: n },
        };
        Demand {
            gpu,
            gpu_models: self.gpu_spec.clone(),
            cpu_milli: self.cpu_milli,
            memory_mib: self.memory_mib,
            ..Demand::default()
        }
    }

    /// GPU request in milli-GPUs (what "arrived" and "allocated" sum).
    pub fn gpu_request_milli(&self) -> u64 {
        if self.gpu_milli == 0 {
            0
        } else {
            self.num_gpu as u64 * self.gpu_milli.min(1000) as u64
        }
    }
}

struct Csv {
    path: PathBuf,
    header: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

impl Csv {
    fn read(path: &Path) -> Result<Csv, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut lines = text.lines().enumerate();
        let header = lines.next().map(|(_, l)| split(l)).unwrap_or_default();
        let rows = lines
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, split(l)))
            .collect();
        Ok(Csv {
            path: path.to_path_buf(),
            header,
            rows,
        })
    }

    fn column(&self, name: &'static str) -> Result<usize, TraceError> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or(TraceError::MissingColumn {
                path: self.path.clone(),
                column: name,
            })
    }

    fn field<'a>(
        &self,
        row: &'a (usize, Vec<String>),
        col: usize,
        name: &'static str,
    ) -> Result<&'a str, TraceError> {
        row.1
            .get(col)
            .map(String::as_str)
            .ok_or_else(|| TraceError::Field {
                path: self.path.clone(),
                line: row.0,
                field: name,
                value: String::new(),
                reason: "missing value",
            })
    }

    fn number(
        &self,
        row: &(usize, Vec<String>),
        col: usize,
        name: &'static str,
    ) -> Result<u64, TraceError> {
        let raw = self.field(row, col, name)?;
        raw.parse::<u64>()
            .or_else(|_| match raw.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 1e18 => Ok(x as u64),
                _ => Err(()),
            })
            .map_err(|_| TraceError::Field {
                path: self.path.clone(),
                line: row.0,
                field: name,
                value: raw.to_string(),
                reason: "not a non-negative integer",
            })
    }

    fn bad(
        &self,
        row: &(usize, Vec<String>),
        name: &'static str,
        value: u64,
        reason: &'static str,
    ) -> TraceError {
        TraceError::Field {
            path: self.path.clone(),
            line: row.0,
            field: name,
            value: value.to_string(),
            reason,
        }
    }
}

fn split(line: &str) -> Vec<String> {
    line.split(',')
        .map(|f| f.trim().trim_matches('"').to_string())
        .collect()
}

/// Load a node list (`sn,cpu_milli,memory_mib,gpu,model`).
pub fn load_nodes(path: &Path) -> Result<Vec<TraceNode>, TraceError> {
    let csv = Csv::read(path)?;
    let (sn, cpu, mem, gpu, model) = (
        csv.column("sn")?,
        csv.column("cpu_milli")?,
        csv.column("memory_mib")?,
        csv.column("gpu")?,
        csv.column("model")?,
    );
    csv.rows
        .iter()
        .map(|row| {
            let gpus = csv.number(row, gpu, "gpu")?;
            if gpus > 64 {
                return Err(csv.bad(row, "gpu", gpus, "more than 64 GPUs on one node"));
            }
            Ok(TraceNode {
                name: csv.field(row, sn, "sn")?.to_string(),
                cpu_milli: csv.number(row, cpu, "cpu_milli")?,
                memory_mib: csv.number(row, mem, "memory_mib")?,
                gpus: gpus as u32,
                model: csv.field(row, model, "model")?.to_string(),
            })
        })
        .collect()
}

/// Column positions of a task list.
struct TaskColumns {
    name: usize,
    cpu: usize,
    mem: usize,
    num: usize,
    milli: usize,
    /// Some trace variants have no gpu_spec column: every task takes any model.
    spec: Option<usize>,
}

impl TaskColumns {
    fn of(csv: &Csv) -> Result<TaskColumns, TraceError> {
        Ok(TaskColumns {
            name: csv.column("name")?,
            cpu: csv.column("cpu_milli")?,
            mem: csv.column("memory_mib")?,
            num: csv.column("num_gpu")?,
            milli: csv.column("gpu_milli")?,
            spec: csv.column("gpu_spec").ok(),
        })
    }
}

/// One validated task row.
fn task_row(
    csv: &Csv,
    c: &TaskColumns,
    row: &(usize, Vec<String>),
) -> Result<TraceTask, TraceError> {
    let num_gpu = csv.number(row, c.num, "num_gpu")?;
    if num_gpu > 64 {
        return Err(csv.bad(row, "num_gpu", num_gpu, "more than 64 GPUs"));
    }
    let gpu_milli = csv.number(row, c.milli, "gpu_milli")?;
    if gpu_milli > 1000 {
        return Err(csv.bad(row, "gpu_milli", gpu_milli, "above 1000 (one whole GPU)"));
    }
    if num_gpu > 1 && gpu_milli > 0 && gpu_milli < 1000 {
        return Err(csv.bad(
            row,
            "gpu_milli",
            gpu_milli,
            "a share of a GPU with num_gpu > 1",
        ));
    }
    let spec_raw = c
        .spec
        .and_then(|col| csv.field(row, col, "gpu_spec").ok())
        .unwrap_or("");
    Ok(TraceTask {
        name: csv.field(row, c.name, "name")?.to_string(),
        cpu_milli: csv.number(row, c.cpu, "cpu_milli")?,
        memory_mib: csv.number(row, c.mem, "memory_mib")?,
        num_gpu: num_gpu as u32,
        gpu_milli: gpu_milli as u32,
        gpu_spec: spec_raw
            .split('|')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// Load a task list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...`).
pub fn load_tasks(path: &Path) -> Result<Vec<TraceTask>, TraceError> {
    let csv = Csv::read(path)?;
    let cols = TaskColumns::of(&csv)?;
    csv.rows
        .iter()
        .map(|row| task_row(&csv, &cols, row))
        .collect()
}

/// A task with its `creation_time` and `deletion_time` (seconds), in file order:
/// what the dynamic replay needs on top of [`load_tasks`].
pub fn load_timed_tasks(path: &Path) -> Result<Vec<(TraceTask, u64, u64)>, TraceError> {
    let csv = Csv::read(path)?;
    let cols = TaskColumns::of(&csv)?;
    let (created, deleted) = (csv.column("creation_time")?, csv.column("deletion_time")?);
    csv.rows
        .iter()
        .map(|row| {
            let task = task_row(&csv, &cols, row)?;
            let creation = csv.number(row, created, "creation_time")?;
            let deletion = csv.number(row, deleted, "deletion_time")?;
            if deletion < creation {
                return Err(csv.bad(row, "deletion_time", deletion, "before creation_time"));
            }
            Ok((task, creation, deletion))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_name_file_line_and_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.csv");
        let body = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nt0,1000,10,1,460,\nt1,abc,10,1,460,\n";
        std::fs::write(&path, body).expect("write");
        let err = load_tasks(&path).expect_err("bad cpu");
        let text = err.to_string();
        assert!(
            text.ends_with(
                "tasks.csv:3: field `cpu_milli`: not a non-negative integer (got `abc`)"
            ),
            "{text}"
        );
        assert_eq!(err.name(), "trace_bad_field");
    }

    #[test]
    fn specs_become_model_alternatives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.csv");
        let body = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nt0,1000,10,2,1000,V100M16|V100M32\n";
        std::fs::write(&path, body).expect("write");
        let tasks = load_tasks(&path).expect("loads");
        let d = tasks[0].demand();
        assert_eq!(d.gpu, GpuDemand::Whole { count: 2 });
        assert_eq!(
            d.gpu_models,
            vec!["V100M16".to_string(), "V100M32".to_string()]
        );
        assert_eq!(tasks[0].gpu_request_milli(), 2000);
    }
}
