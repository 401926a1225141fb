//! What the control plane decides about containers: whether a task may run
//! the way it asks (`limits.require-images`, the `limits.data-volumes` allow-list), checked
//! at submission, and the [`ContainerStart`](caldera_spec::container::ContainerStart)
//! its start command carries (pull policy, prepare timeout, host mounts, the
//! tenant's credentials for the image's registry), built at each start from
//! the settings and credentials as they are then.
pub mod admission;
pub mod data_volumes;
pub mod start;

pub use data_volumes::{DataVolume, DataVolumes};
