//! The TLS client configuration of Caldera's outgoing HTTPS: the node
//! agent's reads of `https://` weight origins and the control plane's
//! webhook deliveries. One rustls configuration (ring as the crypto
//! provider: aws-lc would need cmake) trusting the host's certificate
//! store, what an operator already manages on a machine, plus the PEM
//! certificates of a CA file the operator names (a private CA's object
//! store or webhook receiver). Built once at start, so a bad file stops the
//! process naming its flag or key instead of failing every request later.
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::Arc;

/// The client configuration: the host's roots and those of `extra_ca` (a
/// PEM file). `setting` names where `extra_ca` came from (`origin-ca`,
/// `webhook-ca-file`), so the error names it.
pub fn client_config(extra_ca: Option<&Path>, setting: &str) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    // Unreadable entries of the host's store are skipped, as curl does.
    let native = rustls_native_certs::load_native_certs();
    let _ = roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra_ca {
        let named = |e: &dyn std::fmt::Display| format!("{setting} {}: {e}", path.display());
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| named(&e))?
            .collect::<Result<_, _>>()
            .map_err(|e| named(&e))?;
        if certs.is_empty() {
            return Err(named(&"no PEM certificate in it"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| named(&e))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_ca_file_is_named_by_its_setting() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(Some(&empty), "origin-ca").unwrap_err();
        assert!(
            e.contains("origin-ca") && e.contains("no PEM certificate"),
            "{e}"
        );
        let e =
            client_config(Some(&dir.path().join("missing.pem")), "webhook-ca-file").unwrap_err();
        assert!(
            e.contains("webhook-ca-file") && e.contains("missing.pem"),
            "{e}"
        );
        assert!(client_config(None, "origin-ca").is_ok());
    }
}
