//! The operator's container rules, applied at submission (and to a dry run,
//! which answers the same): with `limits.require-images` every task runs in a
//! container, so nothing a tenant supplies runs on a host; and a task mounts
//! only data volumes the allow-list offers its tenant, read-write only where
//! the entry allows it.
use crate::config::ServerConfig;
use crate::errors::{ActorError, Result};
use caldera_spec::container::RuntimeKind;
use caldera_spec::TaskSpec;

/// Refuses what `spec` asks of containers that `tenant` may not have.
pub fn check(config: &ServerConfig, tenant: &str, spec: &TaskSpec) -> Result<()> {
    if config.limits.require_images {
        if spec.image.is_none() {
            return Err(ActorError::ImageRequired {
                field: "image",
                message: "this cluster runs every task in a container (limits.require-images): name the image to run in image".into(),
            });
        }
        if spec.runtime_kind() == RuntimeKind::Process {
            return Err(ActorError::ImageRequired {
                field: "runtime",
                message: "this cluster runs every task in a container (limits.require-images): runtime \"process\" would run it on the host; omit runtime".into(),
            });
        }
    }
    config
        .limits
        .data_volumes
        .resolve(tenant, &spec.volumes)
        .map(|_| ())
        .map_err(|r| ActorError::VolumeNotAllowed {
            field: r.field,
            message: r.message,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> TaskSpec {
        let body = format!(
            r#"{{"task_id":"t","task_type":"training","resources":{{"cpu":{{"cores":1}}}}{extra}}}"#
        );
        caldera_spec::parse_task_spec(body.as_bytes()).unwrap()
    }

    const IMAGE: &str = r#","image":"registry.internal/deeplearning/pytorch:2.1-cu12.1""#;

    #[test]
    fn require_images_refuses_host_processes_naming_the_field() {
        let mut strict = ServerConfig::default();
        strict.limits.require_images = true;
        let e = check(&strict, "acme", &spec("")).unwrap_err();
        assert_eq!((e.code(), e.field()), (42240, Some("image")));
        let e = check(
            &strict,
            "acme",
            &spec(&format!(r#"{IMAGE},"runtime":"process""#)),
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("runtime"));
        assert!(e.to_string().contains("require-images"), "{e}");
        assert!(check(&strict, "acme", &spec(IMAGE)).is_ok());
        // The default lets host processes run.
        assert!(check(&ServerConfig::default(), "acme", &spec("")).is_ok());
    }

    #[test]
    fn volumes_off_the_list_are_refused_naming_the_entry() {
        let mut c = ServerConfig::default();
        c.limits.data_volumes =
            serde_json::from_value(serde_json::json!("datasets=/srv/d:acme")).unwrap();
        let asks = |rw: bool| {
            spec(&format!(
                r#"{IMAGE},"volumes":[{{"name":"datasets","path":"/data","read_write":{rw}}}]"#
            ))
        };
        assert!(check(&c, "acme", &asks(false)).is_ok());
        let e = check(&c, "beta", &asks(false)).unwrap_err();
        assert_eq!((e.code(), e.field()), (42241, Some("volumes[0].name")));
        let e = check(&c, "acme", &asks(true)).unwrap_err();
        assert_eq!(e.field(), Some("volumes[0].read_write"));
    }
}
