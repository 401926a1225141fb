//! TLS for `https://` origins: one rustls client configuration per agent,
//! trusting the host's certificate store (what an operator already manages
//! on a node) plus the PEM certificates of `--origin-ca` (an object store
//! or file server behind a private CA). Built once at agent start, so a bad
//! `--origin-ca` stops the agent naming the flag instead of failing every
//! fetch later.
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
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
    /// The host's roots and those of `extra_ca` (a PEM file); the error
    /// names the file or says no root was found at all.
    pub fn new(extra_ca: Option<&Path>) -> Result<Tls, String> {
        let mut roots = RootCertStore::empty();
        // Unreadable entries of the host's store are skipped, as curl does.
        let native = rustls_native_certs::load_native_certs();
        let (_, _ignored) = roots.add_parsable_certificates(native.certs);
        if let Some(path) = extra_ca {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("origin-ca {}: {e}", path.display()))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("origin-ca {}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!(
                    "origin-ca {}: no PEM certificate in it",
                    path.display()
                ));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("origin-ca {}: {e}", path.display()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls(Arc::new(config)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_origin_ca_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = Tls::new(Some(&empty)).unwrap_err();
        assert!(
            e.contains("origin-ca") && e.contains("no PEM certificate"),
            "{e}"
        );
        let e = Tls::new(Some(&dir.path().join("missing.pem"))).unwrap_err();
        assert!(e.contains("missing.pem"), "{e}");
        assert!(Tls::new(None).is_ok());
    }
}
