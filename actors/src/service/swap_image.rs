//! Which image a swapped replica runs. A model version may carry an image
//! (a new framework build beside new weights); a service whose replicas run
//! in containers swaps each replica onto that image, or keeps its own when
//! the version names none. A service of processes ignores versions' images.
use super::ServiceActor;
use crate::container::start::{self, NotBuilt};
use caldera_spec::container::{ContainerStart, RuntimeKind};
use caldera_spec::{ModelRef, TaskSpec};

impl ServiceActor {
    /// The image this service's replicas run on `model`: the version's own,
    /// else the service's; None for a service that runs processes.
    pub(super) fn swap_image(&self, model: &ModelRef) -> Option<String> {
        let own = self.rec.spec.image.clone()?;
        if self.rec.spec.runtime_kind() != RuntimeKind::Container {
            return None;
        }
        let store = self.sh.gate.store();
        let version = store.model_version(&model.to_string()).ok().flatten();
        Some(version.and_then(|v| v.spec.image).unwrap_or(own))
    }

    /// The container part of a Swap onto `model`: the service's start
    /// settings (pull policy, prepare timeout, data volumes, the tenant's
    /// credentials for the image's registry) with the image it runs there.
    pub(super) fn swap_container(
        &self,
        model: &ModelRef,
    ) -> Result<Option<ContainerStart>, NotBuilt> {
        let Some(image) = self.swap_image(model) else {
            return Ok(None);
        };
        let mut spec = self.rec.spec.clone();
        spec.image = Some(image);
        start::build(
            &self.sh.config,
            self.sh.gate.store(),
            &self.rec.tenant,
            &spec,
        )
    }

    /// The digest of the image a replica's container runs, as its record
    /// has it (its node's last `Started` or `Swapped`).
    pub(super) fn replica_digest(&self, replica: &str) -> Option<String> {
        let rec = self.sh.gate.store().task(replica).ok().flatten()?;
        rec.allocation?.image_digest
    }
}

/// How long a replica may take from its Swap command to ready on the new
/// version: the probe's `ready_timeout_s` (`default_ready_ms` without a
/// probe), and for a replica in a container its pull's prepare timeout on
/// top (the task's, else `preparing_timeout_ms`): the node pulls the new
/// image before the new container starts.
pub(super) fn swap_ready_ms(
    spec: &TaskSpec,
    default_ready_ms: u64,
    preparing_timeout_ms: u64,
) -> u64 {
    let ready = spec
        .readiness
        .as_ref()
        .map_or(default_ready_ms, |p| u64::from(p.ready_timeout_s) * 1000);
    let in_container = spec.image.is_some() && spec.runtime_kind() == RuntimeKind::Container;
    match in_container {
        true => ready + spec.prepare_timeout_ms().unwrap_or(preparing_timeout_ms),
        false => ready,
    }
}

#[cfg(test)]
mod tests {
    use super::swap_ready_ms;

    fn spec(extra: &str) -> caldera_spec::TaskSpec {
        let body = format!(
            r#"{{"task_id":"s","task_type":"inference","replicas":2,"command":["x"],"resources":{{"cpu":{{"cores":1}}}},"readiness":{{"http_path":"/ready","ready_timeout_s":30}}{extra}}}"#
        );
        caldera_spec::parse_task_spec(body.as_bytes()).unwrap()
    }

    #[test]
    fn a_container_replicas_swap_may_take_its_pull_on_top_of_its_ready_timeout() {
        // A process: the probe's 30 s.
        assert_eq!(swap_ready_ms(&spec(""), 300_000, 120_000), 30_000);
        // In a container: 30 s + the server's 120 s for the pull.
        let image = r#","image":"registry.internal/app:1""#;
        assert_eq!(swap_ready_ms(&spec(image), 300_000, 120_000), 150_000);
        // Its own prepare timeout: 30 s + 10 min.
        let own = format!(r#"{image},"prepare_timeout":"00:10:00""#);
        assert_eq!(swap_ready_ms(&spec(&own), 300_000, 120_000), 630_000);
        // An image recorded but run as a process: no pull.
        let process = format!(r#"{image},"runtime":"process""#);
        assert_eq!(swap_ready_ms(&spec(&process), 300_000, 120_000), 30_000);
    }
}
