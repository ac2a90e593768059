//! The admin kubeconfig that tests, kubectl and the cluster's own components use.

use std::path::Path;

use crate::Error;
use crate::pki::Pki;

/// Writes a kubeconfig for `server` authenticating with the admin client certificate.
pub fn write_admin(path: &Path, server: &str, pki: &Pki) -> Result<(), Error> {
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: k8sm-test
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: k8sm-admin
  user:
    client-certificate: {cert}
    client-key: {key}
contexts:
- name: k8sm-test
  context:
    cluster: k8sm-test
    user: k8sm-admin
current-context: k8sm-test
",
        ca = pki.ca_cert.display(),
        cert = pki.admin_cert.display(),
        key = pki.admin_key.display(),
    );
    std::fs::write(path, text).map_err(|source| Error::Io {
        context: format!("writing {}", path.display()),
        source,
    })
}
