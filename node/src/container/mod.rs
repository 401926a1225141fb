//! Containers on the node: the image store the agent reports and evicts
//! from ([`images`]), and pulling a start's image while it is Preparing
//! ([`pull`]). Running a workload in a container: which runtimes the node
//! has ([`engine`]), the `podman run` command line the shim runs
//! ([`run_args`]) with its cgroup under the workload's ([`cgroups`]), OOM
//! kills told apart ([`oom`]), and containers left behind removed
//! ([`orphans`]). A hot swap's new container runs the old one's command
//! line with the new image, weights and port ([`swap_args`]).
pub mod cgroups;
pub mod engine;
pub mod images;
pub mod oom;
pub mod orphans;
pub mod podman;
pub mod pull;
pub mod run_args;
pub mod swap_args;
