//! The container fields of a task spec (`image`, `runtime`, `pull_policy`,
//! `prepare_timeout`, `volumes`): what can be checked without the operator's
//! settings. Whether a volume is on the operator's allow-list, and whether
//! images are required, is the control plane's check at submission.
use crate::container::{RuntimeKind, VolumeRequest};
use crate::error::{SpecError, SpecErrorKind as K};
use crate::task::TaskSpec;

/// Most data volumes one task may ask for.
pub const MAX_VOLUMES: usize = 16;
/// Longest `prepare_timeout`: 24 hours. A pull that has not finished by
/// then is stuck, not slow.
pub const MAX_PREPARE_TIMEOUT_SECS: u64 = 24 * 3600;
/// Where the agent mounts its own things (weights, checkpoints, scratch):
/// a data volume may not cover or sit inside it.
pub const AGENT_MOUNT_ROOT: &str = "/caldera";
/// Container paths a volume may not cover: the kernel's and the runtime's.
const SYSTEM_PATHS: [&str; 4] = ["/proc", "/sys", "/dev", AGENT_MOUNT_ROOT];
/// Longest volume name (a DNS label's length).
const MAX_VOLUME_NAME_LEN: usize = 63;

/// Checks the container fields of `spec`; every error names its field.
pub fn validate_container_fields(spec: &TaskSpec) -> Result<(), SpecError> {
    if let Some(image) = &spec.image {
        crate::image_ref::parse(image).map_err(|why| SpecError::new(K::BadFormat, "image", why))?;
    }
    if spec.runtime == Some(RuntimeKind::Container) && spec.image.is_none() {
        return Err(SpecError::new(
            K::Conflict,
            "runtime",
            "runtime \"container\" needs an image to run; name one in image, or omit runtime",
        ));
    }
    if let Some(t) = &spec.prepare_timeout {
        let secs = crate::duration::parse_duration(t).map_err(|e| {
            SpecError::new(K::BadFormat, "prepare_timeout", e.naming("prepare_timeout"))
        })?;
        if secs > MAX_PREPARE_TIMEOUT_SECS {
            return Err(SpecError::new(
                K::OutOfRange,
                "prepare_timeout",
                format!("prepare_timeout may be at most 24:00:00, not {t}"),
            ));
        }
    }
    let in_container = spec.runtime_kind() == RuntimeKind::Container;
    if spec.pull_policy.is_some() && !in_container {
        return Err(SpecError::new(
            K::Conflict,
            "pull_policy",
            "pull_policy says when to pull the image; this task runs as a process (no image, or runtime \"process\")",
        ));
    }
    if !spec.volumes.is_empty() && !in_container {
        return Err(SpecError::new(
            K::Conflict,
            "volumes",
            "volumes are mounted into a container; this task runs as a process (no image, or runtime \"process\")",
        ));
    }
    validate_volumes(&spec.volumes)
}

/// At most [`MAX_VOLUMES`], each with a plain name and an absolute
/// container path, no name or path twice.
pub fn validate_volumes(volumes: &[VolumeRequest]) -> Result<(), SpecError> {
    if volumes.len() > MAX_VOLUMES {
        return Err(SpecError::new(
            K::OutOfRange,
            "volumes",
            format!(
                "a task may mount at most {MAX_VOLUMES} volumes, not {}",
                volumes.len()
            ),
        ));
    }
    for (i, v) in volumes.iter().enumerate() {
        check_volume_name(&v.name).map_err(|why| {
            SpecError::new(K::BadFormat, format!("volumes[{i}].name"), why.to_string())
        })?;
        check_container_path(&v.path).map_err(|why| {
            SpecError::new(K::BadFormat, format!("volumes[{i}].path"), why.to_string())
        })?;
        let earlier = &volumes[..i];
        if earlier.iter().any(|e| e.name == v.name) {
            return Err(SpecError::new(
                K::Conflict,
                format!("volumes[{i}].name"),
                format!("volume {:?} is asked for twice", v.name),
            ));
        }
        if earlier.iter().any(|e| same_path(&e.path, &v.path)) {
            return Err(SpecError::new(
                K::Conflict,
                format!("volumes[{i}].path"),
                format!("two volumes would be mounted at {}", v.path),
            ));
        }
    }
    Ok(())
}

/// Why a volume's name or container path cannot be mounted. The words
/// reach the tenant (a spec error's message) and the operator (a config
/// problem), so they say what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error(
        "a volume name is 1 to {} lowercase letters, digits, '-', '_' \
         and '.', starting with a letter or digit, not {name:?}",
        MAX_VOLUME_NAME_LEN
    )]
    Name { name: String },
    #[error("the path inside the container must be absolute (start with /), not {path:?}")]
    NotAbsolute { path: String },
    #[error("the path {path:?} may not hold ':', ',' or control characters")]
    MountSyntax { path: String },
    #[error("the path {path:?} may not hold '..'")]
    ParentDir { path: String },
    #[error("a volume cannot be mounted over / (the image's own root)")]
    Root,
    #[error(
        "{path} is under {under}, which the container runtime{} keeps for itself",
        whose_mounts(.under)
    )]
    Reserved { path: String, under: &'static str },
}

/// Names the owner of a reserved mount point when it is Caldera itself.
fn whose_mounts(under: &str) -> &'static str {
    if under == AGENT_MOUNT_ROOT {
        " (Caldera's own mounts)"
    } else {
        ""
    }
}

/// Volume names as the operator's allow-list spells them: lowercase
/// letters, digits, `-`, `_` and `.`, starting with a letter or digit.
pub fn check_volume_name(name: &str) -> Result<(), VolumeError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_VOLUME_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(VolumeError::Name { name: name.into() })
    }
}

/// An absolute path without `..`, `:` or `,` (podman's mount syntax
/// separates with them), not `/` and not over the kernel's or the agent's
/// own mount points.
pub fn check_container_path(path: &str) -> Result<(), VolumeError> {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if !path.starts_with('/') {
        return Err(VolumeError::NotAbsolute { path: path.into() });
    }
    if path.contains(['\0', ':', ',']) || path.chars().any(char::is_control) {
        return Err(VolumeError::MountSyntax { path: path.into() });
    }
    if parts.contains(&"..") {
        return Err(VolumeError::ParentDir { path: path.into() });
    }
    if parts.is_empty() {
        return Err(VolumeError::Root);
    }
    let normal = format!("/{}", parts.join("/"));
    for sys in SYSTEM_PATHS {
        if normal == sys || normal.starts_with(&format!("{sys}/")) {
            return Err(VolumeError::Reserved {
                path: path.into(),
                under: sys,
            });
        }
    }
    Ok(())
}

/// `/data` and `/data/` are one mount point.
fn same_path(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use crate::validate::parse_task_spec;

    /// The field a spec with `extra` fields is refused under, if it is.
    fn refused(extra: &str) -> Option<(String, String)> {
        let body = format!(
            r#"{{"task_id":"t","task_type":"training","resources":{{"cpu":{{"cores":1}}}}{extra}}}"#
        );
        parse_task_spec(body.as_bytes())
            .err()
            .map(|e| (e.field, e.message))
    }

    const IMAGE: &str = r#","image":"registry.internal/deeplearning/pytorch:2.1-cu12.1""#;

    #[test]
    fn container_fields_that_make_sense_are_accepted() {
        assert_eq!(refused(IMAGE), None);
        let full = format!(
            r#"{IMAGE},"runtime":"container","pull_policy":"always","prepare_timeout":"00:10:00","volumes":[{{"name":"datasets","path":"/data"}},{{"name":"scratch-2","path":"/mnt/out","read_write":true}}]"#
        );
        assert_eq!(refused(&full), None);
        // A process runtime with an image keeps the image as a record.
        assert_eq!(refused(&format!(r#"{IMAGE},"runtime":"process""#)), None);
        // The Preparing timeout bounds any start, container or not.
        assert_eq!(refused(r#","prepare_timeout":"00:00:30""#), None);
    }

    #[test]
    fn each_refusal_names_its_field() {
        let cases: &[(String, &str, &str)] = &[
            (r#","image":"Pytorch:2""#.into(), "image", "repository part"),
            (
                r#","runtime":"container""#.into(),
                "runtime",
                "needs an image",
            ),
            (r#","runtime":"vm""#.into(), "runtime", ""),
            (
                r#","pull_policy":"always""#.into(),
                "pull_policy",
                "runs as a process",
            ),
            (
                format!(r#"{IMAGE},"runtime":"process","volumes":[{{"name":"d","path":"/d"}}]"#),
                "volumes",
                "mounted into a container",
            ),
            (
                format!(r#"{IMAGE},"prepare_timeout":"10 minutes""#),
                "prepare_timeout",
                "prepare_timeout must be HH:MM:SS",
            ),
            (
                format!(r#"{IMAGE},"prepare_timeout":"25:00:00""#),
                "prepare_timeout",
                "at most 24:00:00",
            ),
            (
                format!(r#"{IMAGE},"volumes":[{{"name":"Data","path":"/d"}}]"#),
                "volumes[0].name",
                "lowercase",
            ),
            (
                format!(r#"{IMAGE},"volumes":[{{"name":"d","path":"data"}}]"#),
                "volumes[0].path",
                "absolute",
            ),
            (
                format!(r#"{IMAGE},"volumes":[{{"name":"d","path":"/a/../etc"}}]"#),
                "volumes[0].path",
                "'..'",
            ),
            (
                format!(r#"{IMAGE},"volumes":[{{"name":"d","path":"/d:rw"}}]"#),
                "volumes[0].path",
                "':'",
            ),
            (
                format!(r#"{IMAGE},"volumes":[{{"name":"d","path":"/"}}]"#),
                "volumes[0].path",
                "over /",
            ),
            (
                format!(r#"{IMAGE},"volumes":[{{"name":"d","path":"/caldera/model"}}]"#),
                "volumes[0].path",
                "Caldera's own mounts",
            ),
            (
                format!(r#"{IMAGE},"volumes":[{{"name":"d","path":"/proc"}}]"#),
                "volumes[0].path",
                "under /proc",
            ),
            (
                format!(
                    r#"{IMAGE},"volumes":[{{"name":"d","path":"/a"}},{{"name":"d","path":"/b"}}]"#
                ),
                "volumes[1].name",
                "twice",
            ),
            (
                format!(
                    r#"{IMAGE},"volumes":[{{"name":"d","path":"/a"}},{{"name":"e","path":"/a/"}}]"#
                ),
                "volumes[1].path",
                "two volumes would be mounted at /a/",
            ),
        ];
        for (extra, field, words) in cases {
            let (f, message) = refused(extra).unwrap_or_else(|| panic!("{extra} was accepted"));
            assert_eq!(f, *field, "{extra}: {message}");
            assert!(message.contains(words), "{extra}: {message}");
        }
    }

    #[test]
    fn at_most_sixteen_volumes() {
        let list = |n: usize| {
            let v: Vec<String> = (0..n)
                .map(|i| format!(r#"{{"name":"v{i}","path":"/v{i}"}}"#))
                .collect();
            format!(r#"{IMAGE},"volumes":[{}]"#, v.join(","))
        };
        assert_eq!(refused(&list(16)), None);
        let (field, message) = refused(&list(17)).unwrap();
        assert_eq!(field, "volumes");
        assert!(message.contains("at most 16 volumes, not 17"), "{message}");
    }

    #[test]
    fn a_volume_problem_is_a_kind_with_the_value_and_whole_words() {
        use super::{check_container_path as path, check_volume_name, VolumeError as E};
        assert_eq!(
            check_volume_name("Data"),
            Err(E::Name {
                name: "Data".into()
            })
        );
        assert_eq!(path("d"), Err(E::NotAbsolute { path: "d".into() }));
        assert_eq!(
            path("/d,x"),
            Err(E::MountSyntax {
                path: "/d,x".into()
            })
        );
        assert_eq!(
            path("/a/../b"),
            Err(E::ParentDir {
                path: "/a/../b".into()
            })
        );
        assert_eq!(path("/./"), Err(E::Root));
        assert_eq!(
            path("/sys/x"),
            Err(E::Reserved {
                path: "/sys/x".into(),
                under: "/sys"
            })
        );
        assert_eq!(
            path("/caldera/w").unwrap_err().to_string(),
            "/caldera/w is under /caldera, which the container runtime (Caldera's own mounts) \
             keeps for itself"
        );
        assert_eq!(
            path("/dev").unwrap_err().to_string(),
            "/dev is under /dev, which the container runtime keeps for itself"
        );
        assert_eq!(
            check_volume_name("").unwrap_err().to_string(),
            "a volume name is 1 to 63 lowercase letters, digits, '-', '_' and '.', starting \
             with a letter or digit, not \"\""
        );
    }
}
