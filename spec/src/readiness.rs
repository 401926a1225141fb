//! Readiness: when a replica may be sent traffic. The agent runs the probe
//! beside the workload and reports changes (`WorkloadEventKind::Readiness`);
//! the control plane lists only ready replicas as a service's endpoints, and
//! a swap that is not ready within `ready_timeout_s` is rolled back.
use crate::error::{SpecError, SpecErrorKind as K};
use serde::{Deserialize, Serialize};

/// How the agent decides a replica is ready: an HTTP GET of `http_path` on
/// 127.0.0.1:$CALDERA_PORT answering 2xx, or `command` exiting 0. Exactly one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadinessProbe {
    /// Path of the HTTP GET (starts with `/`), e.g. `/ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_path: Option<String>,
    /// argv of a command run on the node (as the workload's uid); exit 0 is ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Seconds between probes (default 2, 1..=3600).
    #[serde(default = "default_period_s")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3600))]
    pub period_s: u32,
    /// Seconds one probe may take before it counts as failed (default 1, 1..=600).
    #[serde(default = "default_timeout_s")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 600))]
    pub timeout_s: u32,
    /// Consecutive failures that make a ready replica not ready (default 3, 1..=100).
    #[serde(default = "default_failure_threshold")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub failure_threshold: u32,
    /// A start or swap not ready by then counts as failed (the swap rolls
    /// back); default 300, 1..=86400.
    #[serde(default = "default_ready_timeout_s")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub ready_timeout_s: u32,
}

fn default_period_s() -> u32 {
    2
}
fn default_timeout_s() -> u32 {
    1
}
fn default_failure_threshold() -> u32 {
    3
}
fn default_ready_timeout_s() -> u32 {
    300
}

/// Longest `ready_timeout_s` accepted: a day.
pub const MAX_READY_TIMEOUT_S: u32 = 86_400;

impl ReadinessProbe {
    /// An HTTP probe of `path` with every default.
    pub fn http(path: &str) -> Self {
        ReadinessProbe {
            http_path: Some(path.to_string()),
            command: Vec::new(),
            period_s: default_period_s(),
            timeout_s: default_timeout_s(),
            failure_threshold: default_failure_threshold(),
            ready_timeout_s: default_ready_timeout_s(),
        }
    }

    /// Checks ranges and that exactly one of `http_path` / `command` is given;
    /// errors name `readiness.<field>`.
    pub fn validate(&self) -> Result<(), SpecError> {
        match (&self.http_path, self.command.is_empty()) {
            (Some(_), false) => {
                return Err(SpecError::new(
                    K::Conflict,
                    "readiness.http_path",
                    "give either http_path or command, not both",
                ))
            }
            (None, true) => {
                return Err(SpecError::new(
                    K::MissingField,
                    "readiness",
                    "give http_path (an HTTP GET on CALDERA_PORT) or command",
                ))
            }
            (Some(p), true) => validate_http_path(p)?,
            (None, false) => validate_command(&self.command)?,
        }
        in_range("readiness.period_s", self.period_s, 3600)?;
        in_range("readiness.timeout_s", self.timeout_s, 600)?;
        in_range("readiness.failure_threshold", self.failure_threshold, 100)?;
        in_range(
            "readiness.ready_timeout_s",
            self.ready_timeout_s,
            MAX_READY_TIMEOUT_S,
        )
    }
}

fn validate_http_path(p: &str) -> Result<(), SpecError> {
    let why = if !p.starts_with('/') {
        "http_path must start with '/' (e.g. /ready)"
    } else if p.len() > 1024 {
        "http_path is longer than 1024 bytes"
    } else if p.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "http_path may not hold spaces or control characters"
    } else {
        return Ok(());
    };
    Err(SpecError::new(K::BadFormat, "readiness.http_path", why))
}

fn validate_command(argv: &[String]) -> Result<(), SpecError> {
    if argv[0].trim().is_empty() {
        return Err(SpecError::new(
            K::BadFormat,
            "readiness.command[0]",
            "the program to run is empty",
        ));
    }
    match argv.iter().position(|a| a.contains('\0')) {
        Some(i) => Err(SpecError::new(
            K::BadFormat,
            format!("readiness.command[{i}]"),
            "contains a NUL byte",
        )),
        None => Ok(()),
    }
}

fn in_range(field: &str, v: u32, max: u32) -> Result<(), SpecError> {
    if v == 0 || v > max {
        return Err(SpecError::new(
            K::OutOfRange,
            field,
            format!("must be 1..={max}, not {v}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_in_and_the_probe_round_trips() {
        let p: ReadinessProbe = serde_json::from_str(r#"{"http_path":"/ready"}"#).unwrap();
        assert_eq!(p, ReadinessProbe::http("/ready"));
        assert_eq!(
            (
                p.period_s,
                p.timeout_s,
                p.failure_threshold,
                p.ready_timeout_s
            ),
            (2, 1, 3, 300)
        );
        p.validate().unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert!(!text.contains("command"), "{text}");
        assert_eq!(serde_json::from_str::<ReadinessProbe>(&text).unwrap(), p);
    }

    #[test]
    fn each_rejection_names_its_field() {
        let field = |json: &str| {
            let p: ReadinessProbe = serde_json::from_str(json).unwrap();
            p.validate().unwrap_err().field
        };
        assert_eq!(field(r#"{"http_path":"ready"}"#), "readiness.http_path");
        assert_eq!(
            field(r#"{"http_path":"/r","command":["true"]}"#),
            "readiness.http_path"
        );
        assert_eq!(field(r#"{}"#), "readiness");
        assert_eq!(field(r#"{"command":[" "]}"#), "readiness.command[0]");
        assert_eq!(
            field(r#"{"http_path":"/r","period_s":0}"#),
            "readiness.period_s"
        );
        assert_eq!(
            field(r#"{"http_path":"/r","timeout_s":601}"#),
            "readiness.timeout_s"
        );
        assert_eq!(
            field(r#"{"http_path":"/r","failure_threshold":101}"#),
            "readiness.failure_threshold"
        );
        assert_eq!(
            field(r#"{"http_path":"/r","ready_timeout_s":0}"#),
            "readiness.ready_timeout_s"
        );
        assert!(serde_json::from_str::<ReadinessProbe>(r#"{"http_pth":"/r"}"#).is_err());
    }

    #[test]
    fn a_spec_validates_its_probe_and_training_may_not_have_one() {
        let spec = |t: &str, probe: &str| {
            crate::parse_task_spec(format!(
                r#"{{"task_id":"s","task_type":"{t}","resources":{{"cpu":{{"cores":1}}}},"command":["x"],"readiness":{probe}}}"#
            ).as_bytes())
        };
        let ok = spec("inference", r#"{"http_path":"/ready"}"#).unwrap();
        assert_eq!(ok.readiness, Some(ReadinessProbe::http("/ready")));
        assert_eq!(
            spec("inference", r#"{"http_path":"x"}"#).unwrap_err().field,
            "readiness.http_path"
        );
        assert_eq!(
            spec("training", r#"{"http_path":"/ready"}"#)
                .unwrap_err()
                .field,
            "readiness"
        );
    }
}
