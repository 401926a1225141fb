//! The shim alone, for the node crate's own tests (which cannot build the
//! `caldera` binary): `caldera-shim <dir>` is `caldera shim <dir>`.
fn main() -> std::process::ExitCode {
    caldera_node::shim::command(std::env::args_os().nth(1))
}
