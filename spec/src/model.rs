//! Model versions: what an operator registers (`POST /v1/models`), what a task
//! names (`"model": "name:version"`), and the record the control plane keeps.
//!
//! A version is immutable: its weights are one file at `weights.uri` with a
//! known size and SHA-256. Node caches are content-addressed by that SHA-256,
//! so two versions with the same bytes share one cached copy, and a copy read
//! from any source (the origin or a peer) is the same file.
use crate::error::{SpecError, SpecErrorKind as K};
use serde::{Deserialize, Serialize};

/// Longest model name or version.
pub const MAX_MODEL_NAME_LEN: usize = 128;
/// Largest weights file a version may declare (16 TiB).
pub const MAX_WEIGHTS_BYTES: u64 = 16 << 40;

/// Where a version's weights are and what they must hash to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WeightsSpec {
    /// `file:///abs/path` (a shared mount: NFS, CephFS, JuiceFS) or
    /// `http://` / `https://` (an object store or file server; read with
    /// ranged GETs so a cut transfer resumes).
    pub uri: String,
    pub size_bytes: u64,
    /// Lowercase hex, 64 digits.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[0-9a-f]{64}$"))]
    pub sha256: String,
}

/// A version as registered. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ModelVersionSpec {
    pub name: String,
    pub version: String,
    pub weights: WeightsSpec,
    /// The container image this version runs in, where it needs another
    /// than the service's own (a new framework build beside new weights): a
    /// swap onto it starts the replica's new container from this image.
    /// None keeps each service's image. Only replicas that run in
    /// containers use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "registry.internal/deeplearning/pytorch:2.2-cu12.1")
    )]
    pub image: Option<String>,
}

impl ModelVersionSpec {
    pub fn model_ref(&self) -> ModelRef {
        ModelRef {
            name: self.name.clone(),
            version: self.version.clone(),
        }
    }
}

/// `name:version`, as a task names the version it serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ModelRef {
    pub name: String,
    pub version: String,
}

impl ModelRef {
    /// Parses `name:version` (the last `:` splits, so a name may not hold one).
    /// `field` names where it came from in an error (`model`).
    pub fn parse(text: &str, field: &str) -> Result<ModelRef, SpecError> {
        let Some((name, version)) = text.rsplit_once(':') else {
            return Err(SpecError::new(
                K::BadFormat,
                field,
                format!("a model is written name:version, e.g. llama-3-8b:v2, not {text:?}"),
            ));
        };
        validate_name(name, field, "name")?;
        validate_name(version, field, "version")?;
        Ok(ModelRef {
            name: name.to_string(),
            version: version.to_string(),
        })
    }
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.name, self.version)
    }
}

/// A version's life. `registered` until a task first uses it, then `active`;
/// an operator may mark it `deprecated` (still usable, flagged in views);
/// `retiring` (no new tasks, replicas being moved off) and `retired` (caches
/// evicted) are driven by the retire control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelState {
    Registered,
    Active,
    Deprecated,
    Retiring,
    Retired,
}

impl ModelState {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelState::Registered => "registered",
            ModelState::Active => "active",
            ModelState::Deprecated => "deprecated",
            ModelState::Retiring => "retiring",
            ModelState::Retired => "retired",
        }
    }

    /// Whether a new task may name this version.
    pub fn accepts_new_tasks(self) -> bool {
        !matches!(self, ModelState::Retiring | ModelState::Retired)
    }
}

/// Parses and validates a registration body; every rejection names the field.
pub fn parse_model_version_spec(body: &[u8]) -> Result<ModelVersionSpec, SpecError> {
    if body.len() > crate::validate::MAX_BODY_BYTES {
        return Err(SpecError::new(
            K::TooLarge,
            ".",
            format!(
                "the body is {} bytes; the limit is {}",
                body.len(),
                crate::validate::MAX_BODY_BYTES
            ),
        ));
    }
    let spec: ModelVersionSpec = crate::json::parse_json(body)?;
    validate_model_version_spec(&spec)?;
    Ok(spec)
}

/// Semantic checks of a registration.
pub fn validate_model_version_spec(spec: &ModelVersionSpec) -> Result<(), SpecError> {
    validate_name(&spec.name, "name", "name")?;
    validate_name(&spec.version, "version", "version")?;
    validate_uri(&spec.weights.uri)?;
    if spec.weights.size_bytes == 0 || spec.weights.size_bytes > MAX_WEIGHTS_BYTES {
        return Err(SpecError::new(
            K::OutOfRange,
            "weights.size_bytes",
            format!(
                "the weights' size must be between 1 byte and 16 TiB, not {}",
                spec.weights.size_bytes
            ),
        ));
    }
    if !is_sha256_hex(&spec.weights.sha256) {
        return Err(SpecError::new(
            K::BadFormat,
            "weights.sha256",
            "the checksum must be a SHA-256 written as 64 lowercase hex digits",
        ));
    }
    if let Some(image) = &spec.image {
        // The same reference rules as a task's image.
        crate::image_ref::parse(image).map_err(|why| SpecError::new(K::BadFormat, "image", why))?;
    }
    Ok(())
}

/// True for 64 lowercase hex digits: the only form a cache key takes, so a
/// key is always a safe file name.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The tenant whose namespace `name` is in: `@team-a.llama` is tenant
/// team-a's (only it registers such names); a name without `@` is the
/// operator's, shared with every tenant, so no tenant can take a shared name
/// first.
pub fn name_scope(name: &str) -> Option<&str> {
    name.strip_prefix('@')?.split_once('.').map(|(t, _)| t)
}

fn validate_name(s: &str, field: &str, what: &str) -> Result<(), SpecError> {
    if what == "name" {
        if let Some(scoped) = s.strip_prefix('@') {
            let ok_tenant = |t: &str| {
                !t.is_empty()
                    && t.len() <= 63
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            };
            return match scoped.split_once('.') {
                Some((tenant, model)) if ok_tenant(tenant) => validate_plain(model, field, what),
                _ => Err(SpecError::new(
                    K::BadFormat,
                    field,
                    format!(
                        "a tenant's model name is @TENANT.MODEL, e.g. @team-a.llama, not {s:?}"
                    ),
                )),
            };
        }
    }
    validate_plain(s, field, what)
}

/// Letters, digits, `-`, `_` and `.` (not first), 1 to 128 of them.
fn validate_plain(s: &str, field: &str, what: &str) -> Result<(), SpecError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if s.is_empty() || s.len() > MAX_MODEL_NAME_LEN {
        return Err(SpecError::new(
            K::BadFormat,
            field,
            format!("the model's {what} must be 1 to {MAX_MODEL_NAME_LEN} characters"),
        ));
    }
    if !s.chars().all(ok_char) || s.starts_with('.') {
        return Err(SpecError::new(
            K::BadFormat,
            field,
            format!(
                "the model's {what} {s:?} may hold only letters, digits, '-', '_' and '.' (not first)"
            ),
        ));
    }
    Ok(())
}

fn validate_uri(uri: &str) -> Result<(), SpecError> {
    let field = "weights.uri";
    if let Some(path) = uri.strip_prefix("file://") {
        if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
            return Err(SpecError::new(
                K::BadFormat,
                field,
                "a file:// uri names an absolute path without '..', e.g. file:///mnt/models/llama.bin",
            ));
        }
        return Ok(());
    }
    let rest = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') => Ok(()),
        _ => Err(SpecError::new(
            K::BadFormat,
            field,
            format!("the weights' uri must start with file:///, http:// or https://, not {uri:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn body(uri: &str, size: u64, sha: &str) -> String {
        format!(
            r#"{{"name":"llama","version":"v1","weights":{{"uri":"{uri}","size_bytes":{size},"sha256":"{sha}"}}}}"#
        )
    }

    #[test]
    fn a_good_registration_parses_and_each_bad_field_is_named() {
        let ok = parse_model_version_spec(body("file:///mnt/m.bin", 10, SHA).as_bytes()).unwrap();
        assert_eq!(ok.model_ref().to_string(), "llama:v1");
        assert!(parse_model_version_spec(body("http://store:9000/m", 10, SHA).as_bytes()).is_ok());
        for (b, field) in [
            (body("s3://bucket/m", 10, SHA), "weights.uri"),
            (body("file://relative/m", 10, SHA), "weights.uri"),
            (body("file:///a/../etc/shadow", 10, SHA), "weights.uri"),
            (body("file:///m", 0, SHA), "weights.size_bytes"),
            (body("file:///m", 10, "ABC"), "weights.sha256"),
            (body("file:///m", 10, &SHA.to_uppercase()), "weights.sha256"),
        ] {
            let e = parse_model_version_spec(b.as_bytes()).unwrap_err();
            assert_eq!(e.field, field, "{b}: {e}");
        }
        let typo = r#"{"name":"a","version":"v","weights":{"uri":"file:///m","size_bytes":1,"sha256":"x"},"pinned":true}"#;
        assert_eq!(
            parse_model_version_spec(typo.as_bytes()).unwrap_err().kind,
            K::UnknownField
        );
    }

    #[test]
    fn a_version_may_carry_an_image_checked_as_a_tasks_is() {
        let with = |image: &str| {
            let b = body("file:///m", 10, SHA);
            let b = b.strip_suffix('}').unwrap_or(&b);
            format!(r#"{b},"image":"{image}"}}"#)
        };
        let ok = parse_model_version_spec(
            with("registry.internal/deeplearning/pytorch:2.2-cu12.1").as_bytes(),
        )
        .unwrap();
        assert_eq!(
            ok.image.as_deref(),
            Some("registry.internal/deeplearning/pytorch:2.2-cu12.1")
        );
        let none = parse_model_version_spec(body("file:///m", 10, SHA).as_bytes()).unwrap();
        assert_eq!(none.image, None);
        assert!(!serde_json::to_string(&none).unwrap().contains("image"));
        for bad in ["Pytorch:2", "registry.internal/x:", ""] {
            let e = parse_model_version_spec(with(bad).as_bytes()).unwrap_err();
            assert_eq!(e.field, "image", "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_model_reference_is_name_colon_version() {
        let r = ModelRef::parse("llama-3.1:v2", "model").unwrap();
        assert_eq!((r.name.as_str(), r.version.as_str()), ("llama-3.1", "v2"));
        let scoped = ModelRef::parse("@team-a.llama-3.1:v2", "model").unwrap();
        assert_eq!(name_scope(&scoped.name), Some("team-a"));
        assert_eq!(name_scope("llama-3.1"), None);
        for bad in [
            "llama",
            ":v1",
            "llama:",
            "lla ma:v1",
            "../x:v1",
            "a:b/c",
            "@team-a:v1",
            "@.x:v1",
            "@a.b:@v1",
            "@a.@b.c:v1",
        ] {
            assert_eq!(
                ModelRef::parse(bad, "model").unwrap_err().field,
                "model",
                "{bad}"
            );
        }
    }

    #[test]
    fn retiring_and_retired_versions_take_no_new_tasks() {
        assert!(ModelState::Active.accepts_new_tasks());
        assert!(ModelState::Deprecated.accepts_new_tasks());
        assert!(!ModelState::Retiring.accepts_new_tasks());
        assert!(!ModelState::Retired.accepts_new_tasks());
    }
}
