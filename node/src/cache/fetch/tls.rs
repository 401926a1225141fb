//! TLS for `https://` origins: the agent's one client configuration
//! ([`caldera_tls::client_config`]: the host's store plus `--origin-ca`).
use rustls::ClientConfig;
use std::path::Path;
use std::sync::Arc;

/// The client TLS configuration of https origins.
#[derive(Clone)]
pub struct Tls(pub Arc<ClientConfig>);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// The host's roots and those of `extra_ca` (`--origin-ca`, a PEM file).
    pub fn new(extra_ca: Option<&Path>) -> Result<Tls, caldera_tls::TlsError> {
        caldera_tls::client_config(extra_ca, "origin-ca").map(Tls)
    }
}
