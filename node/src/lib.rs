//! caldera-node: the node agent. It probes the machine ([`probe`]), keeps one
//! WebSocket session with the control plane ([`session`]), and runs each
//! allocation's workload under its own shim ([`shim`], started and adopted by
//! [`runtime`]), all from one event loop ([`agent`]).
//!
//! It links `caldera-spec` only of Caldera's crates: it talks to the control
//! plane over the network, never by linking it, so an agent is upgraded on its
//! own and trusts nothing it was not told over the wire.
pub mod agent;
pub mod cgroup;
pub mod config;
pub mod error;
pub mod lease;
pub mod probe;
pub mod runtime;
pub mod secret;
pub mod session;
pub mod shim;
pub mod sim_gpus;
pub mod tenancy;

pub use agent::run_until;
pub use config::AgentConfig;
pub use error::{AgentError, StartError};

/// Runs the agent on the calling thread until SIGINT or SIGTERM, then stops its
/// workloads and returns. Blocks: it creates its own actix System. Workloads
/// run under their shims, which outlive the agent (a kill -9 or a crash leaves
/// them running for the next agent to adopt, until their lease runs out).
pub fn run(config: AgentConfig) -> Result<(), AgentError> {
    config.validate()?;
    let system = actix_rt::System::new();
    system.block_on(async move {
        let shutdown = shutdown_signal().map_err(AgentError::Runtime)?;
        run_until(config, shutdown).await
    })
}

/// Completes on the first SIGINT or SIGTERM.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
    })
}
