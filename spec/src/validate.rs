//! Parsing and validation of task specs: every rejection names the field.
use crate::duration::parse_duration;
use crate::error::{SpecError, SpecErrorKind as K};
pub use crate::json::parse_json;
use crate::resources::{GpuRequest, ResourceRequest};
use crate::task::{TaskSpec, TaskType};

pub use crate::limits::*;

/// Parses and validates a submitted task spec.
pub fn parse_task_spec(body: &[u8]) -> Result<TaskSpec, SpecError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(SpecError::new(
            K::TooLarge,
            ".",
            format!(
                "the body is {} bytes; the limit is {MAX_BODY_BYTES}",
                body.len()
            ),
        ));
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b) if *b != b'{') {
        return Err(SpecError::new(
            K::WrongType,
            ".",
            "the body must be a JSON object",
        ));
    }
    let spec: TaskSpec = parse_json(body)?;
    refuse_empty_command(body)?;
    validate_task_spec(&spec)?;
    Ok(spec)
}

/// Validates a task spec given as a JSON value (a form's fields set at
/// their dotted paths): the checks and errors of [`parse_task_spec`],
/// without the value ever becoming text.
pub fn task_spec_from_value(value: serde_json::Value) -> Result<TaskSpec, SpecError> {
    if !value.is_object() {
        return Err(SpecError::new(
            K::WrongType,
            ".",
            "the body must be a JSON object",
        ));
    }
    if value
        .get("command")
        .and_then(serde_json::Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        return Err(empty_command());
    }
    let spec: TaskSpec = crate::json::from_json_value(value)?;
    validate_task_spec(&spec)?;
    Ok(spec)
}

/// `"command": []` is neither a program nor the absence that asks for a
/// reservation; the typed spec cannot tell it from an absent command.
fn refuse_empty_command(body: &[u8]) -> Result<(), SpecError> {
    #[derive(serde::Deserialize)]
    struct Command {
        command: Option<Vec<serde::de::IgnoredAny>>,
    }
    match serde_json::from_slice::<Command>(body) {
        Ok(Command { command: Some(c) }) if c.is_empty() => Err(empty_command()),
        _ => Ok(()),
    }
}

fn empty_command() -> SpecError {
    SpecError::new(
        K::BadFormat,
        "command",
        "command must name a program; omit it for a reservation",
    )
}

/// Semantic checks after the shape is known: ranges, formats, contradictions.
pub fn validate_task_spec(spec: &TaskSpec) -> Result<(), SpecError> {
    validate_task_id(&spec.task_id)?;
    validate_resources(&spec.resources)?;
    if let Some(d) = &spec.duration {
        parse_duration(d)
            .map_err(|e| SpecError::new(K::BadFormat, "duration", e.naming("duration")))?;
    }
    for (i, arg) in spec.command.iter().enumerate() {
        if i == 0 && arg.trim().is_empty() {
            return Err(SpecError::new(
                K::BadFormat,
                "command[0]",
                "the program to run is empty",
            ));
        }
        if arg.contains('\0') {
            return Err(SpecError::new(
                K::BadFormat,
                format!("command[{i}]"),
                "contains a NUL byte",
            ));
        }
    }
    for (k, v) in &spec.env {
        let field = format!("env.{k}");
        let valid = !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(SpecError::new(
                K::BadFormat,
                field,
                "variable names are letters, digits and _, not starting with a digit",
            ));
        }
        if k.starts_with("CALDERA_") || k == "CUDA_VISIBLE_DEVICES" {
            return Err(SpecError::new(
                K::Conflict,
                field,
                "this variable is set by Caldera itself",
            ));
        }
        if v.contains('\0') {
            return Err(SpecError::new(K::BadFormat, field, "contains a NUL byte"));
        }
    }
    for k in spec.labels.keys() {
        if k.trim().is_empty() {
            return Err(SpecError::new(
                K::BadFormat,
                "labels",
                "a label name is empty",
            ));
        }
    }
    if let Some(r) = spec.replicas {
        if r == 0 || r > MAX_REPLICAS {
            return Err(SpecError::new(
                K::OutOfRange,
                "replicas",
                format!("replicas must be 1..={MAX_REPLICAS}, not {r}"),
            ));
        }
        if spec.task_type == TaskType::Training && r != 1 {
            return Err(SpecError::new(
                K::Conflict,
                "replicas",
                "a training task runs as one allocation; replicas are for inference services",
            ));
        }
    }
    if let Some(m) = spec.min_replicas {
        validate_min_replicas(m, spec.replicas.unwrap_or(1))?;
    }
    if let Some(m) = spec.max_replicas_per_node {
        validate_max_replicas_per_node(m, spec.task_type)?;
    }
    if let Some(dir) = &spec.checkpoint_dir {
        validate_relative_dir("checkpoint_dir", dir)?;
    }
    if let Some(probe) = &spec.readiness {
        if spec.task_type == TaskType::Training {
            return Err(SpecError::new(
                K::Conflict,
                "readiness",
                "a readiness probe is for inference services; a training task runs to completion",
            ));
        }
        probe.validate()?;
    }
    crate::validate_container::validate_container_fields(spec)?;
    if let Some(r) = spec.max_retries {
        if r > MAX_RETRIES {
            return Err(SpecError::new(
                K::OutOfRange,
                "max_retries",
                format!("max_retries must be at most {MAX_RETRIES}"),
            ));
        }
    }
    Ok(())
}

/// Replica spread applies to inference services only (a training task is
/// one allocation), and a node must be allowed at least one replica.
fn validate_max_replicas_per_node(max: u32, task_type: TaskType) -> Result<(), SpecError> {
    if task_type != TaskType::Inference {
        return Err(SpecError::new(
            K::Conflict,
            "max_replicas_per_node",
            "max_replicas_per_node spreads an inference service's replicas; a training task is one allocation",
        ));
    }
    if max == 0 || max > MAX_REPLICAS {
        return Err(SpecError::new(
            K::OutOfRange,
            "max_replicas_per_node",
            format!("max_replicas_per_node must be 1..={MAX_REPLICAS}, not {max}"),
        ));
    }
    Ok(())
}

fn validate_min_replicas(min: u32, replicas: u32) -> Result<(), SpecError> {
    if min == 0 {
        return Err(SpecError::new(
            K::OutOfRange,
            "min_replicas",
            "min_replicas must be at least 1",
        ));
    }
    if min > replicas {
        return Err(SpecError::new(
            K::Conflict,
            "min_replicas",
            format!("min_replicas ({min}) may not be more than replicas ({replicas})"),
        ));
    }
    Ok(())
}

/// A directory under the node's data dir: relative, no `..`, no NUL.
fn validate_relative_dir(field: &str, dir: &str) -> Result<(), SpecError> {
    let why = if dir.trim().is_empty() {
        "the directory is empty; omit it for the default"
    } else if dir.contains('\0') {
        "contains a NUL byte"
    } else if dir.starts_with(['/', '\\']) {
        "an absolute path is not allowed; give a directory relative to the node's data dir"
    } else if dir.split(['/', '\\']).any(|part| part == "..") {
        "'..' is not allowed; the directory stays inside the node's data dir"
    } else {
        return Ok(());
    };
    Err(SpecError::new(K::BadFormat, field, why))
}

fn validate_task_id(id: &str) -> Result<(), SpecError> {
    if id.is_empty() || id.len() > 128 {
        return Err(SpecError::new(
            K::BadFormat,
            "task_id",
            "task_id must be 1 to 128 characters",
        ));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        || id.starts_with('.')
    {
        return Err(SpecError::new(
            K::BadFormat,
            "task_id",
            "task_id may hold letters, digits, '_', '-' and '.' only",
        ));
    }
    if crate::names_a_replica(id) {
        return Err(SpecError::new(
            K::Reserved,
            "task_id",
            format!(
                "task_id {id:?} ends in \".r\" and a number, which names a replica of a service; choose an id that does not"
            ),
        ));
    }
    Ok(())
}

/// `v` within `[min, max]` of `unit`; the error names `field`. A value that
/// is not a normal number (NaN, infinite, subnormal such as 5e-324) is
/// refused with the same sentence as one below the minimum.
fn check_range(field: &str, v: f64, (min, max): (f64, f64), unit: &str) -> Result<(), SpecError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(SpecError::new(
            K::OutOfRange,
            field,
            format!("must be greater than 0 {unit}, not {v}"),
        ));
    }
    if !v.is_normal() || v < min {
        return Err(SpecError::new(
            K::OutOfRange,
            field,
            format!("must be at least {min} {unit}, not {v}"),
        ));
    }
    if v > max {
        return Err(SpecError::new(
            K::OutOfRange,
            field,
            format!("{v} {unit} is more than any node offers (limit {max})"),
        ));
    }
    Ok(())
}

fn validate_resources(r: &ResourceRequest) -> Result<(), SpecError> {
    if let Some(g) = &r.gpu {
        validate_gpu(g)?;
    }
    if let Some(c) = &r.cpu {
        check_range(
            "resources.cpu.cores",
            c.cores,
            (MIN_CPU_CORES, MAX_CPU_CORES),
            "cores",
        )?;
    }
    if let Some(m) = &r.memory {
        check_range(
            "resources.memory.size_gb",
            m.size_gb,
            (MIN_MEMORY_GB, MAX_MEMORY_GB),
            "GB",
        )?;
    }
    if let Some(d) = &r.disk {
        check_range(
            "resources.disk.size_gb",
            d.size_gb,
            (MIN_DISK_GB, MAX_DISK_GB),
            "GB",
        )?;
    }
    if r.gpu.is_none() && r.cpu.is_none() && r.memory.is_none() {
        return Err(SpecError::new(
            K::MissingField,
            "resources",
            "ask for at least one of gpu, cpu or memory",
        ));
    }
    Ok(())
}

fn validate_gpu(g: &GpuRequest) -> Result<(), SpecError> {
    if g.count == 0 || g.count > MAX_GPUS {
        return Err(SpecError::new(
            K::OutOfRange,
            "resources.gpu.count",
            format!(
                "count must be 1..={MAX_GPUS}, not {} (omit gpu for a CPU-only task)",
                g.count
            ),
        ));
    }
    if let Some(m) = g.memory_gb {
        check_range(
            "resources.gpu.memory_gb",
            m,
            (MIN_GPU_MEMORY_GB, MAX_GPU_MEMORY_GB),
            "GB",
        )?;
    }
    if let Some(s) = g.share {
        if !(s > 0.0 && s <= 1.0) {
            return Err(SpecError::new(
                K::OutOfRange,
                "resources.gpu.share",
                format!("share is a fraction of one GPU in (0, 1], not {s}"),
            ));
        }
        if !s.is_normal() || s < MIN_GPU_SHARE {
            return Err(SpecError::new(
                K::OutOfRange,
                "resources.gpu.share",
                format!("must be at least {MIN_GPU_SHARE} (1% of a GPU), not {s}"),
            ));
        }
        if g.count > 1 {
            return Err(SpecError::new(
                K::Conflict,
                "resources.gpu.share",
                "share applies to one GPU; with count > 1 the GPUs are whole",
            ));
        }
        if g.memory_gb.is_some() {
            return Err(SpecError::new(
                K::Conflict,
                "resources.gpu.share",
                "give either share or memory_gb, not both",
            ));
        }
    }
    if let Some(model) = &g.model {
        validate_gpu_model(model)?;
    }
    Ok(())
}

/// Model names as GPUs report them: letters, digits, spaces, `-`, `_`, `.`,
/// alternatives split by `|`, each naming at least one model token.
fn validate_gpu_model(model: &str) -> Result<(), SpecError> {
    let bad = |why: String| Err(SpecError::new(K::BadFormat, "resources.gpu.model", why));
    for alt in model.split('|').map(str::trim) {
        if alt.is_empty() {
            return bad("a GPU model name is empty".into());
        }
        let plain = alt
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.'));
        if !plain || alt.contains("..") {
            return bad(format!(
                "GPU model {alt:?} may hold letters, digits, spaces, '-', '_' and '.' only (e.g. A100-80GB)"
            ));
        }
        if crate::gpu_model::tokens(alt).is_empty() {
            return bad(format!(
                "{alt:?} names no GPU model; give the model, e.g. A100"
            ));
        }
    }
    Ok(())
}
