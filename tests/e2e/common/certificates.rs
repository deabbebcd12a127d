//! Certificates made in the test: a CA, and a server and a client certificate it signed.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// A CA, a server certificate for localhost and a client certificate, as PEM files in `dir`:
/// `ca.pem`, `server.pem` / `server.key`, `client.pem` / `client.key`.
pub fn certificates(dir: &Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca = Issuer::new(ca_params, ca_key);
    for (name, names) in [
        ("server", vec!["localhost".to_owned(), "127.0.0.1".to_owned()]),
        ("client", vec!["client".to_owned()]),
    ] {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names).unwrap().signed_by(&key, &ca).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
}
