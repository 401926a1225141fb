//! Which image a swapped replica runs. A model version may carry an image
//! (a new framework build beside new weights); a service whose replicas run
//! in containers swaps each replica onto that image, or keeps its own when
//! the version names none. A service of processes ignores versions' images.
use crate::container::start::{self, NotBuilt};
use crate::task::TaskActor;
use caldera_spec::container::{ContainerStart, RuntimeKind};
use caldera_spec::ModelRef;

impl TaskActor {
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
