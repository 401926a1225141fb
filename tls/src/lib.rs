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
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the client configuration could not be built. The words name the
/// setting and the file, since they stop the process at start.
#[derive(Debug)]
pub enum TlsError {
    /// The CA file an operator named (`setting`) is unusable.
    CaFile {
        setting: String,
        path: PathBuf,
        problem: CaFileProblem,
    },
    /// The crypto provider refused the default protocol versions.
    Protocols(rustls::Error),
}

/// What is wrong with a CA file.
#[derive(Debug)]
pub enum CaFileProblem {
    /// It cannot be read, or a PEM section in it cannot be decoded.
    Unreadable(rustls::pki_types::pem::Error),
    /// It holds no PEM certificate.
    NoCertificate,
    /// A certificate in it is not one rustls can trust.
    Refused(rustls::Error),
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::CaFile {
                setting,
                path,
                problem,
            } => write!(f, "{setting} {}: {problem}", path.display()),
            TlsError::Protocols(e) => write!(f, "TLS: {e}"),
        }
    }
}

impl std::fmt::Display for CaFileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaFileProblem::Unreadable(e) => write!(f, "{e}"),
            CaFileProblem::NoCertificate => f.write_str("no PEM certificate in it"),
            CaFileProblem::Refused(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsError::CaFile { problem, .. } => Some(problem),
            TlsError::Protocols(e) => Some(e),
        }
    }
}

impl std::error::Error for CaFileProblem {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaFileProblem::Unreadable(e) => Some(e),
            CaFileProblem::NoCertificate => None,
            CaFileProblem::Refused(e) => Some(e),
        }
    }
}

/// A config key's error message is these words as they are.
impl From<TlsError> for String {
    fn from(e: TlsError) -> String {
        e.to_string()
    }
}

/// The client configuration: the host's roots and those of `extra_ca` (a
/// PEM file). `setting` names where `extra_ca` came from (`origin-ca`,
/// `webhook-ca-file`), so the error names it.
pub fn client_config(
    extra_ca: Option<&Path>,
    setting: &str,
) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    // Unreadable entries of the host's store are skipped, as curl does.
    let native = rustls_native_certs::load_native_certs();
    let _ = roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra_ca {
        let named = |problem| TlsError::CaFile {
            setting: setting.to_string(),
            path: path.to_path_buf(),
            problem,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| named(CaFileProblem::Unreadable(e)))?
            .collect::<Result<_, _>>()
            .map_err(|e| named(CaFileProblem::Unreadable(e)))?;
        if certs.is_empty() {
            return Err(named(CaFileProblem::NoCertificate));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| named(CaFileProblem::Refused(e)))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocols)?
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
            matches!(&e, TlsError::CaFile { setting, problem: CaFileProblem::NoCertificate, .. }
                if setting == "origin-ca"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("origin-ca {}: no PEM certificate in it", empty.display())
        );
        let missing = dir.path().join("missing.pem");
        let e = client_config(Some(&missing), "webhook-ca-file").unwrap_err();
        assert!(
            matches!(&e, TlsError::CaFile { path, problem: CaFileProblem::Unreadable(_), .. }
                if *path == missing),
            "{e:?}"
        );
        let words = String::from(e);
        assert!(
            words.starts_with(&format!("webhook-ca-file {}: ", missing.display())),
            "{words}"
        );
        assert!(client_config(None, "origin-ca").is_ok());
    }
}
