//! Structured logs for the long-running commands (`server`, `up`).
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Installs the tracing subscriber on stderr. The filter comes from
/// `CALDERA_LOG`, else `RUST_LOG`, else `info`; a filter that does not parse
/// falls back to `info` with a warning rather than leaving the server mute.
pub fn init() {
    let wanted = std::env::var("CALDERA_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok();
    let (filter, bad) = match wanted.as_deref().map(EnvFilter::try_new) {
        Some(Ok(filter)) => (filter, None),
        Some(Err(e)) => (EnvFilter::new("info"), Some(e.to_string())),
        None => (EnvFilter::new("info"), None),
    };
    // Colours only for a person at a terminal: logs captured by tests,
    // systemd or a file stay free of escape codes.
    let ansi = std::io::stderr().is_terminal();
    // A second init (e.g. in tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        // Not a word about a log line it could not write: it says so with
        // `eprintln!`, which panics when stderr cannot be written either (a
        // log file on a full disk), and a panic kills the actor that logged.
        .log_internal_errors(false)
        .try_init();
    if let Some(e) = bad {
        tracing::warn!("ignoring the log filter from CALDERA_LOG/RUST_LOG: {e}");
    }
}
