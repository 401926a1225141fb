//! The container part of a start command, built at each start: the settings
//! and credentials as they are then (a volume the operator has withdrawn
//! since the submission is not mounted; the start fails saying so).
use crate::config::ServerConfig;
use caldera_spec::container::{ContainerStart, RuntimeKind};
use caldera_spec::image_ref;
use caldera_spec::TaskSpec;
use caldera_storage::Store;

/// Why a container start could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotBuilt {
    /// The task may no longer have what it asks (the message says what):
    /// it would be refused the same way on every try.
    Refused(String),
    /// The credentials could not be read now; a later try may.
    Unreadable(String),
}

/// `None` for a task that runs as a process; else what the agent needs to
/// run it in a container: the image, the pull policy, the prepare timeout
/// (the task's, else `scheduling.preparing-timeout-ms`), the host mounts of its data
/// volumes, and `tenant`'s credentials for the image's registry alone.
pub fn build(
    config: &ServerConfig,
    store: &Store,
    tenant: &str,
    spec: &TaskSpec,
) -> Result<Option<ContainerStart>, NotBuilt> {
    let Some(image) = spec.image.as_ref() else {
        return Ok(None);
    };
    if spec.runtime_kind() != RuntimeKind::Container {
        return Ok(None);
    }
    let volumes = config
        .limits
        .data_volumes
        .resolve(tenant, &spec.volumes)
        .map_err(|r| NotBuilt::Refused(format!("{}: {}", r.field, r.message)))?;
    let registry_auth = match image_ref::parse(image) {
        Ok(r) => store
            .registry_credential(tenant, r.registry_or_default())
            .map_err(|e| {
                NotBuilt::Unreadable(format!(
                    "the tenant's registry credentials could not be read: {}",
                    e.error_code().name
                ))
            })?
            .map(|c| c.auth_file_json()),
        // Checked at submission; a record from before that check pulls
        // without credentials, and the pull says what is wrong.
        Err(_) => None,
    };
    Ok(Some(ContainerStart {
        image: image.clone(),
        pull: spec.pull_policy.unwrap_or_default(),
        prepare_timeout_ms: spec
            .prepare_timeout_ms()
            .unwrap_or(config.scheduling.preparing_timeout_ms),
        volumes,
        registry_auth,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::container::{Mount, PullPolicy};
    use caldera_spec::registry_credential::RegistryCredential;
    use caldera_storage::StoreConfig;

    fn spec(extra: &str) -> TaskSpec {
        let body = format!(
            r#"{{"task_id":"t","task_type":"training","resources":{{"cpu":{{"cores":1}}}}{extra}}}"#
        );
        caldera_spec::parse_task_spec(body.as_bytes()).unwrap()
    }

    fn credential(tenant: &str, registry: &str) -> RegistryCredential {
        RegistryCredential {
            tenant: tenant.into(),
            registry: registry.into(),
            username: "bot".into(),
            password: "pw".into(),
            set_ms: 1,
        }
    }

    #[test]
    fn a_container_start_carries_the_tasks_settings_and_its_registrys_credentials_only() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path(), &StoreConfig::default()).unwrap();
        let mut b = store.batch();
        b.put_registry_credential(&credential("acme", "registry.internal"));
        b.put_registry_credential(&credential("acme", "127.0.0.1:5555"));
        b.put_registry_credential(&credential("beta", "registry.internal"));
        store.commit(b).unwrap();
        let mut config = ServerConfig::default();
        config.limits.data_volumes =
            serde_json::from_value(serde_json::json!("datasets=/srv/d:*")).unwrap();
        let s = spec(
            r#","image":"registry.internal/team/app:1","pull_policy":"always","prepare_timeout":"00:02:00","volumes":[{"name":"datasets","path":"/data"}]"#,
        );
        let c = build(&config, &store, "acme", &s).unwrap().unwrap();
        assert_eq!(c.image, "registry.internal/team/app:1");
        assert_eq!(c.pull, PullPolicy::Always);
        assert_eq!(c.prepare_timeout_ms, 120_000);
        assert_eq!(
            c.volumes,
            vec![Mount {
                host_path: "/srv/d".into(),
                container_path: "/data".into(),
                read_only: true,
            }]
        );
        let auth = c.registry_auth.expect("acme has credentials for it");
        assert_eq!(
            auth,
            credential("acme", "registry.internal").auth_file_json()
        );
        assert!(!auth.contains("127.0.0.1:5555"), "{auth}");
        // Another tenant's task gets its own; one without gets none, and the
        // server's default prepare timeout.
        let plain = spec(r#","image":"registry.internal/team/app:1""#);
        let gamma = build(&config, &store, "gamma", &plain).unwrap().unwrap();
        assert_eq!(gamma.registry_auth, None);
        assert_eq!(
            gamma.prepare_timeout_ms,
            config.scheduling.preparing_timeout_ms
        );
        assert_eq!(gamma.pull, PullPolicy::IfNotPresent);
        // Process tasks have no container part.
        let process = spec(r#","image":"registry.internal/team/app:1","runtime":"process""#);
        assert_eq!(build(&config, &store, "acme", &process), Ok(None));
        assert_eq!(build(&config, &store, "acme", &spec("")), Ok(None));
        // A volume withdrawn since the submission fails the start.
        config.limits.data_volumes = crate::container::DataVolumes::default();
        assert!(matches!(
            build(&config, &store, "acme", &s),
            Err(NotBuilt::Refused(m)) if m.starts_with("volumes[0].name")
        ));
    }
}
