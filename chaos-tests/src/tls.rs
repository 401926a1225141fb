//! TLS for the tests' own servers (an https weights origin, an https
//! webhook receiver): a CA and a certificate for 127.0.0.1 made with rcgen,
//! and the rustls server configuration that presents it. The CA's PEM is
//! what the process under test is told to trust (`--origin-ca`,
//! `webhook-ca-file`); nothing else trusts it.
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// A throwaway CA and a server configuration for 127.0.0.1 it signed.
pub struct TestCa {
    /// The CA's certificate, PEM.
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

/// Panics only on what cannot fail with rcgen's own output (a test fixture).
pub fn authority_for_localhost() -> TestCa {
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("a self-signed CA");
    let leaf_key = rcgen::KeyPair::generate().expect("a server key");
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("server parameters")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("a server certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.der().to_vec())],
            PrivateKeyDer::from_pem_slice(leaf_key.serialize_pem().as_bytes())
                .expect("the server key"),
        )
        .expect("the server configuration");
    TestCa {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}
