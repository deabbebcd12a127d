//! TLS to PostgreSQL. The URL's `sslmode` decides whether it is used (`disable`; `prefer`, the
//! default: when the server offers it; `require`); whenever it is, the server's certificate is
//! verified — its chain up to the system's CAs or the configured `ca_file`, and its name against
//! the host connected to (libpq's `verify-full`). A certificate that fails never falls back to
//! plain TCP.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::storage::StoreError;

/// The connector for every connection of the pool.
pub(super) fn connector(ca_file: Option<&Path>) -> Result<MakeRustlsConnect, StoreError> {
    let unavailable = |reason: String| StoreError::Unavailable(format!("TLS to PostgreSQL: {reason}"));
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(Iterator::collect)
                .map_err(|error| unavailable(format!("cannot read ca_file `{}`: {error}", path.display())))?;
            if certificates.is_empty() {
                return Err(unavailable(format!("ca_file `{}` holds no certificate", path.display())));
            }
            for certificate in certificates {
                roots.add(certificate).map_err(|error| {
                    unavailable(format!("ca_file `{}` holds a bad certificate: {error}", path.display()))
                })?;
            }
        }
        None => {
            // Unreadable system certificates only mean fewer roots: a server they would have
            // vouched for then fails its handshake, naming the certificate.
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|error| unavailable(error.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}
