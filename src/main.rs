//! `caldera`: one binary for the control plane, the node agent, the embedded
//! default (`up`), the CLI clients and the trace simulator. This file only parses
//! the command line; each command lives in `src/cli/`.
mod cli;
mod reference;

use clap::Parser;

fn main() -> std::process::ExitCode {
    // `caldera shim <dir>` (started by the agent, one per workload) comes
    // first: no argument parser, runtime or logging, so it stays small.
    let mut raw = std::env::args_os().skip(1);
    if raw.next().is_some_and(|a| a == "shim") {
        return caldera_node::shim::command(raw.next());
    }
    let args = cli::Cli::parse();
    if args.command.prints_for_a_reader() {
        // Rust ignores SIGPIPE, so a print into a pipe whose reader has
        // gone panics ("failed printing to stdout"). A command-line client
        // should end quietly instead, as `ls | head` does. Never for the
        // server, agent or `up`: they write to sockets, where EPIPE is an
        // error to handle, not a reason to die.
        // SAFETY: setting a signal's disposition to its default, before any
        // thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli::dispatch(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `--json` promises JSON to scripts, errors included.
            if std::env::args().any(|a| a == "--json") {
                println!("{}", e.to_json());
            } else {
                eprintln!("error: {e}");
            }
            std::process::ExitCode::from(e.exit_code())
        }
    }
}
