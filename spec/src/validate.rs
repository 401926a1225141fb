//! Parsing and validation of task specs: every rejection names the field.
use crate::error::{SpecError, SpecErrorKind as K};
use crate::resources::{GpuRequest, ResourceRequest};
use crate::task::{TaskSpec, TaskType};

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
pub const MAX_RETRIES: u32 = 100;

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
    validate_task_spec(&spec)?;
    Ok(spec)
}

/// Deserializes any JSON document, turning serde's error into a [`SpecError`]
/// that names the field path.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, SpecError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        classify(path, &inner)
    })
}

fn classify(path: String, err: &serde_json::Error) -> SpecError {
    use serde_json::error::Category;
    let text = err.to_string();
    // serde_json appends " at line L column C"; keep the sentence only.
    let msg = text.split(" at line ").next().unwrap_or(&text).to_string();
    match err.classify() {
        Category::Syntax | Category::Eof | Category::Io => SpecError::new(
            K::MalformedJson,
            ".",
            format!("the body is not valid JSON ({text})"),
        ),
        Category::Data => {
            if let Some(name) = between_backticks(&msg).filter(|_| msg.starts_with("missing field"))
            {
                SpecError::new(
                    K::MissingField,
                    join(&path, name),
                    format!("{name} is required"),
                )
            } else if msg.starts_with("unknown field") {
                let name = between_backticks(&msg).unwrap_or("?");
                let field = if path.ends_with(name) {
                    path.clone()
                } else {
                    join(&path, name)
                };
                SpecError::new(K::UnknownField, field, msg)
            } else if msg.starts_with("unknown variant") {
                SpecError::new(K::BadFormat, path, msg)
            } else if msg.starts_with("invalid type") || msg.starts_with("invalid value") {
                SpecError::new(K::WrongType, path, msg)
            } else {
                SpecError::new(K::OutOfRange, path, msg)
            }
        }
    }
}

fn between_backticks(s: &str) -> Option<&str> {
    let start = s.find('`')? + 1;
    let len = s[start..].find('`')?;
    Some(&s[start..start + len])
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() || path == "." {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Semantic checks after the shape is known: ranges, formats, contradictions.
pub fn validate_task_spec(spec: &TaskSpec) -> Result<(), SpecError> {
    validate_task_id(&spec.task_id)?;
    validate_resources(&spec.resources)?;
    if let Some(d) = &spec.duration {
        parse_duration(d).map_err(|m| SpecError::new(K::BadFormat, "duration", m))?;
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
    Ok(())
}

fn check_range(field: &str, v: f64, max: f64, unit: &str) -> Result<(), SpecError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(SpecError::new(
            K::OutOfRange,
            field,
            format!("must be greater than 0 {unit}, not {v}"),
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
        check_range("resources.cpu.cores", c.cores, MAX_CPU_CORES, "cores")?;
    }
    if let Some(m) = &r.memory {
        check_range("resources.memory.size_gb", m.size_gb, MAX_MEMORY_GB, "GB")?;
    }
    if let Some(d) = &r.disk {
        check_range("resources.disk.size_gb", d.size_gb, MAX_DISK_GB, "GB")?;
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
        check_range("resources.gpu.memory_gb", m, MAX_GPU_MEMORY_GB, "GB")?;
    }
    if let Some(s) = g.share {
        if !(s > 0.0 && s <= 1.0) {
            return Err(SpecError::new(
                K::OutOfRange,
                "resources.gpu.share",
                format!("share is a fraction of one GPU in (0, 1], not {s}"),
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
        if model.split('|').any(|m| m.trim().is_empty()) {
            return Err(SpecError::new(
                K::BadFormat,
                "resources.gpu.model",
                "a GPU model name is empty",
            ));
        }
    }
    Ok(())
}

/// Parses "HH:MM:SS" (hours may exceed 24) into seconds.
pub fn parse_duration(d: &str) -> Result<u64, String> {
    let parts: Vec<&str> = d.split(':').collect();
    let bad = || format!("duration must be HH:MM:SS (e.g. 01:30:00), not {d:?}");
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) || p.len() > 5)
    {
        return Err(bad());
    }
    let n = |p: &str| p.parse::<u64>().map_err(|_| bad());
    let (h, m, s) = (n(parts[0])?, n(parts[1])?, n(parts[2])?);
    if m >= 60 || s >= 60 || parts[1].len() != 2 || parts[2].len() != 2 {
        return Err(bad());
    }
    let total = h * 3600 + m * 60 + s;
    if total == 0 {
        return Err("duration must be longer than 00:00:00".into());
    }
    Ok(total)
}
