//! The operator's allow-list of data volumes (`limits.data-volumes`): which host
//! directories a task may mount into its container, under which name, for
//! which tenants, and whether writing is allowed. A task names a volume;
//! only the control plane turns the name into a host path, so a tenant never
//! chooses a host path itself.
use caldera_spec::container::{Mount, VolumeRequest};
use caldera_spec::validate_container::check_volume_name;
use serde::{de, Deserialize, Deserializer, Serialize};

/// One allowed volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DataVolume {
    /// What a task's `volumes[i].name` says.
    pub name: String,
    /// The directory on every node that offers it (absolute).
    pub host_path: String,
    /// Tenants that may mount it: `["*"]` for every tenant, else names.
    pub tenants: Vec<String>,
    /// Whether a task may ask for write access (`read_write`). Default false.
    #[serde(default)]
    pub read_write: bool,
}

impl DataVolume {
    fn admits(&self, tenant: &str) -> bool {
        self.tenants.iter().any(|t| t == "*" || t == tenant)
    }
}

/// The list: a TOML array of tables, or in the environment one string of
/// comma-separated `NAME=HOST_PATH:TENANTS[:rw]` entries, TENANTS being `*`
/// or names separated by `|` (`datasets=/srv/datasets:*,out=/srv/out:acme|beta:rw`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DataVolumes(pub Vec<DataVolume>);

/// Why a task's volume is refused: the field and the sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub message: String,
}

impl DataVolumes {
    /// The first entry that cannot work, with why.
    pub fn problem(&self) -> Option<String> {
        for (i, v) in self.0.iter().enumerate() {
            if let Err(why) = check_volume_name(&v.name) {
                return Some(format!("entry {i}: {why}"));
            }
            if let Err(why) = check_host_path(&v.host_path) {
                return Some(format!("{}: {why}", v.name));
            }
            if v.tenants.is_empty() {
                return Some(format!(
                    "{}: tenants is empty; give \"*\" for every tenant, or their names",
                    v.name
                ));
            }
            if self.0[..i].iter().any(|e| e.name == v.name) {
                return Some(format!("{}: the name is listed twice", v.name));
            }
        }
        None
    }

    /// The host mounts of `tenant`'s `volumes`, or the first that it may
    /// not have. A volume the tenant may not mount reads as one that does
    /// not exist: a tenant learns nothing of another's volumes.
    pub fn resolve(&self, tenant: &str, volumes: &[VolumeRequest]) -> Result<Vec<Mount>, Refusal> {
        let mut out = Vec::with_capacity(volumes.len());
        for (i, want) in volumes.iter().enumerate() {
            let Some(entry) = self
                .0
                .iter()
                .find(|v| v.name == want.name && v.admits(tenant))
            else {
                return Err(Refusal {
                    field: format!("volumes[{i}].name"),
                    message: format!(
                        "no data volume {:?} is offered to tenant {tenant:?}; {}",
                        want.name,
                        self.offered_to(tenant)
                    ),
                });
            };
            if want.read_write && !entry.read_write {
                return Err(Refusal {
                    field: format!("volumes[{i}].read_write"),
                    message: format!(
                        "data volume {:?} is offered read-only; omit read_write",
                        want.name
                    ),
                });
            }
            out.push(Mount {
                host_path: entry.host_path.clone(),
                container_path: want.path.clone(),
                read_only: !want.read_write,
            });
        }
        Ok(out)
    }

    /// "the operator offers it: a, b" or "the operator offers it none".
    fn offered_to(&self, tenant: &str) -> String {
        let names: Vec<&str> = self
            .0
            .iter()
            .filter(|v| v.admits(tenant))
            .map(|v| v.name.as_str())
            .collect();
        if names.is_empty() {
            "the operator offers it none (limits.data-volumes)".into()
        } else {
            format!(
                "the operator offers it: {} (limits.data-volumes)",
                names.join(", ")
            )
        }
    }
}

/// Why an entry of `limits.data-volumes` cannot work; the words name the
/// text as the operator wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataVolumeError {
    /// A host path that does not start at `/`.
    #[error("host-path must be absolute, not {0:?}")]
    RelativeHostPath(String),
    /// A host path holding what podman's mount syntax separates with.
    #[error("host-path {0:?} may not hold ':', ',' or control characters")]
    HostPathSeparator(String),
    /// A host path that climbs out with `..`.
    #[error("host-path {0:?} may not hold '..'")]
    HostPathParent(String),
    /// The host's root directory itself.
    #[error("host-path / would hand the whole host to a container")]
    WholeHost,
    /// An environment-form entry not shaped `NAME=HOST_PATH:TENANTS[:rw]`.
    #[error("{0:?} is not NAME=HOST_PATH:TENANTS[:rw] (TENANTS: * or names separated by |)")]
    NotAnEntry(String),
}

/// An absolute host directory without `..`, `:` or `,` (podman's mount
/// syntax separates with them), and not `/` itself.
fn check_host_path(path: &str) -> Result<(), DataVolumeError> {
    if !path.starts_with('/') {
        return Err(DataVolumeError::RelativeHostPath(path.to_string()));
    }
    if path.contains([':', ',', '\0']) || path.chars().any(char::is_control) {
        return Err(DataVolumeError::HostPathSeparator(path.to_string()));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.contains(&"..") {
        return Err(DataVolumeError::HostPathParent(path.to_string()));
    }
    if parts.is_empty() {
        return Err(DataVolumeError::WholeHost);
    }
    Ok(())
}

/// One `NAME=HOST_PATH:TENANTS[:rw]` entry of the environment form.
fn parse_entry(text: &str) -> Result<DataVolume, DataVolumeError> {
    let bad = || DataVolumeError::NotAnEntry(text.to_string());
    let (name, rest) = text.split_once('=').ok_or_else(bad)?;
    let mut parts = rest.split(':');
    let host_path = parts.next().filter(|p| !p.is_empty()).ok_or_else(bad)?;
    let tenants = parts.next().filter(|t| !t.is_empty()).ok_or_else(bad)?;
    let read_write = match parts.next() {
        None => false,
        Some("rw") => true,
        Some("ro") => false,
        Some(_) => return Err(bad()),
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(DataVolume {
        name: name.trim().to_string(),
        host_path: host_path.to_string(),
        tenants: tenants.split('|').map(|t| t.trim().to_string()).collect(),
        read_write,
    })
}

impl<'de> Deserialize<'de> for DataVolumes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<DataVolume>),
            Text(String),
        }
        let list = match Form::deserialize(d)? {
            Form::List(l) => l,
            Form::Text(t) => t
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(parse_entry)
                .collect::<Result<Vec<_>, _>>()
                .map_err(de::Error::custom)?,
        };
        let list = DataVolumes(list);
        match list.problem() {
            Some(p) => Err(de::Error::custom(p)),
            None => Ok(list),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str, path: &str, read_write: bool) -> VolumeRequest {
        VolumeRequest {
            name: name.into(),
            path: path.into(),
            read_write,
        }
    }

    fn list() -> DataVolumes {
        serde_json::from_value(serde_json::json!(
            "datasets=/srv/datasets:*, results=/srv/results:acme|beta:rw"
        ))
        .unwrap()
    }

    #[test]
    fn the_environment_form_and_the_toml_form_read_the_same() {
        let toml_like: DataVolumes = serde_json::from_value(serde_json::json!([
            {"name": "datasets", "host-path": "/srv/datasets", "tenants": ["*"]},
            {"name": "results", "host-path": "/srv/results", "tenants": ["acme", "beta"], "read-write": true},
        ]))
        .unwrap();
        assert_eq!(toml_like, list());
    }

    #[test]
    fn a_bad_entry_is_refused_saying_which_and_why() {
        let why = |v: serde_json::Value| {
            serde_json::from_value::<DataVolumes>(v)
                .unwrap_err()
                .to_string()
        };
        assert!(why(serde_json::json!("datasets=/srv/d")).contains("NAME=HOST_PATH:TENANTS"));
        assert!(why(serde_json::json!("d=relative:*")).contains("absolute"));
        assert!(why(serde_json::json!("d=/:*")).contains("whole host"));
        assert!(why(serde_json::json!("d=/a/../etc:*")).contains("'..'"));
        assert!(why(serde_json::json!("D=/a:*")).contains("lowercase"));
        assert!(why(serde_json::json!("d=/a:*,d=/b:*")).contains("listed twice"));
        assert!(why(serde_json::json!("d=/a:*:maybe")).contains("NAME=HOST_PATH"));
        assert!(
            why(serde_json::json!([{"name": "d", "host-path": "/a", "tenants": []}]))
                .contains("tenants is empty")
        );
    }

    /// Each kind of bad entry is its own variant; the words are the ones the
    /// operator reads when the server refuses its config.
    #[test]
    fn a_bad_host_path_or_entry_names_its_kind_in_the_operators_words() {
        let path = |p: &str| check_host_path(p).map_err(|e| (e.clone(), e.to_string()));
        assert_eq!(
            path("srv"),
            Err((
                DataVolumeError::RelativeHostPath("srv".into()),
                "host-path must be absolute, not \"srv\"".into()
            ))
        );
        assert_eq!(
            path("/a:b").map_err(|(_, w)| w),
            Err("host-path \"/a:b\" may not hold ':', ',' or control characters".into())
        );
        assert_eq!(
            path("/a/..").map_err(|(_, w)| w),
            Err("host-path \"/a/..\" may not hold '..'".into())
        );
        assert_eq!(
            path("/").map_err(|(e, _)| e),
            Err(DataVolumeError::WholeHost)
        );
        assert_eq!(
            parse_entry("d").map_err(|e| e.to_string()),
            Err(
                "\"d\" is not NAME=HOST_PATH:TENANTS[:rw] (TENANTS: * or names separated by |)"
                    .into()
            )
        );
    }

    #[test]
    fn a_task_gets_host_paths_only_for_what_its_tenant_may_mount() {
        let l = list();
        let mounts = l
            .resolve(
                "acme",
                &[
                    request("datasets", "/data", false),
                    request("results", "/out", true),
                ],
            )
            .unwrap();
        assert_eq!(
            mounts,
            vec![
                Mount {
                    host_path: "/srv/datasets".into(),
                    container_path: "/data".into(),
                    read_only: true,
                },
                Mount {
                    host_path: "/srv/results".into(),
                    container_path: "/out".into(),
                    read_only: false,
                },
            ]
        );
        // Not on the list.
        let e = l
            .resolve("acme", &[request("home", "/h", false)])
            .unwrap_err();
        assert_eq!(e.field, "volumes[0].name");
        assert!(e.message.contains("offers it: datasets, results"), "{e:?}");
        // On the list, not for this tenant: told as if it did not exist.
        let e = l
            .resolve(
                "gamma",
                &[
                    request("datasets", "/d", false),
                    request("results", "/r", false),
                ],
            )
            .unwrap_err();
        assert_eq!(e.field, "volumes[1].name");
        assert!(e.message.contains("offers it: datasets"), "{e:?}");
        assert!(!e.message.contains("acme"), "{e:?}");
        // Read-write where the entry is read-only.
        let e = l
            .resolve("acme", &[request("datasets", "/d", true)])
            .unwrap_err();
        assert_eq!(e.field, "volumes[0].read_write");
        assert!(e.message.contains("read-only"), "{e:?}");
    }
}
