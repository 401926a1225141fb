//! `caldera sim`: owned by the placement work (issue 3).
use super::CliError;

#[derive(clap::Args, Debug)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> Result<(), CliError> {
    Err(CliError::Failed("sim is being built".into()))
}
