//! `caldera server`: the control plane (actors + sled + HTTP gateway).
use super::server_config::{self, FlagOverrides};
use super::{logging, CliError};
use std::path::PathBuf;

/// Flags of `caldera server`; every other setting comes from the file or
/// `CALDERA_<SECTION>__<KEY>` variables (see the configuration reference).
#[derive(clap::Args, Debug)]
pub struct ServerArgs {
    /// TOML configuration file: keys in sections, kebab-case (`[nodes]`
    /// then `timeout-ms = 4000`); see the configuration reference.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Directory of the control plane's state (sled). Overrides `[storage] data-dir`.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address of the HTTP gateway, e.g. `0.0.0.0:7070`. Overrides `[server] listen`.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
}

/// Loads the configuration, starts the control plane and blocks until
/// SIGINT/SIGTERM.
pub fn run(args: ServerArgs) -> Result<(), CliError> {
    let flags = FlagOverrides {
        listen: args.listen,
        data_dir: args.data_dir,
    };
    let loaded = server_config::load(args.config.as_deref(), std::env::vars(), &flags)?;
    logging::init();
    loaded.warn_deprecations();
    let config = loaded.config;
    tracing::info!(listen = %config.server.listen, data_dir = %config.storage.data_dir.display(), "starting the control plane");
    caldera_gateway::run(config, |started| {
        // Tokens generated on first start are shown this once; the server
        // keeps only their hashes.
        if let Some(token) = &started.generated_operator_token {
            println!("operator token: {token}");
        }
        if let Some(token) = &started.generated_join_token {
            println!("join token: {token}");
        }
        println!("listening on http://{}", started.addr);
    })
    .map_err(|e| CliError::Failed(e.to_string()))
}
