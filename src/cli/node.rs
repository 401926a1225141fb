//! `caldera node`: owned by the node agent work.
use super::CliError;

#[derive(clap::Args, Debug)]
pub struct NodeArgs {}

pub fn run(_args: NodeArgs) -> Result<(), CliError> {
    Err(CliError::Failed("node agent is being built".into()))
}
