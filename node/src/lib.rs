//! caldera-node: the node agent. It probes the machine ([`probe`]), keeps one
//! WebSocket session with the control plane ([`session`]), and runs each
//! allocation's workload under its own shim ([`shim`], started and adopted by
//! [`runtime`]), all from one event loop ([`agent`]).
//!
//! It links `caldera-spec` only of Caldera's crates: it talks to the control
//! plane over the network, never by linking it, so an agent is upgraded on its
//! own and trusts nothing it was not told over the wire.
pub mod agent;
pub mod cache;
pub mod cgroup;
pub mod clock;
pub mod config;
pub mod container;
pub mod data_dir;
pub mod device_program;
pub mod error;
pub mod lease;
pub mod probe;
pub mod proc_hiding;
pub mod procfs;
pub mod runtime;
pub mod scratch_volume;
pub mod secret;
pub mod session;
pub mod shim;
pub mod sim_gpus;
pub mod tenancy;

pub use agent::run_until;
pub use config::AgentConfig;
pub use error::{AgentError, StartError};

/// Runs the agent on the calling thread until SIGINT or SIGTERM (a drain:
/// the node's work is moved away, then the agent exits), SIGUSR1 (a drain
/// as the whole cluster stops, as `caldera up` stops its agents: nothing
/// waits to be moved to nodes that stop too) or SIGUSR2 (a handover, for an
/// in-place upgrade: the agent exits at once and its workloads run on under
/// their shims for the next agent to adopt). Blocks:
/// it creates its own actix System. A kill -9 or a crash is a handover too,
/// until the workloads' lease runs out.
pub fn run(config: AgentConfig) -> Result<(), AgentError> {
    config.validate()?;
    let system = actix_rt::System::new();
    system.block_on(async move {
        let stop = stop_signal().map_err(AgentError::Runtime)?;
        agent::run_until_stop(config, stop).await
    })
}

/// Completes on the first SIGINT, SIGTERM (drain), SIGUSR1 (drain as the
/// whole cluster stops) or SIGUSR2 (handover).
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = agent::Stop>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut usr2 = signal(SignalKind::user_defined2())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received: draining the node"),
            _ = int.recv() => tracing::info!("SIGINT received: draining the node"),
            _ = usr1.recv() => {
                tracing::info!("SIGUSR1 received: the whole cluster is stopping; stopping this node's work where it is");
                return agent::Stop::WithCluster;
            }
            _ = usr2.recv() => {
                tracing::info!("SIGUSR2 received: handing the workloads over to the next agent");
                return agent::Stop::Handover;
            }
        }
        agent::Stop::Drain
    })
}
