//! The admin kubeconfig that tests, kubectl and the cluster's own components use, and those of more
//! admins under their own names.

use std::path::Path;

use crate::Error;
use crate::pki::{Pki, UserCert};

/// Writes a kubeconfig for `server` authenticating with the admin client certificate.
pub fn write_admin(path: &Path, server: &str, pki: &Pki) -> Result<(), Error> {
    write(path, server, &pki.ca_cert, &pki.admin_cert, &pki.admin_key)
}

/// Writes a kubeconfig for `server` authenticating as `user`.
pub fn write_user(path: &Path, server: &str, pki: &Pki, user: &UserCert) -> Result<(), Error> {
    write(path, server, &pki.ca_cert, &user.cert, &user.key)
}

fn write(path: &Path, server: &str, ca: &Path, cert: &Path, key: &Path) -> Result<(), Error> {
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
        ca = ca.display(),
        cert = cert.display(),
        key = key.display(),
    );
    std::fs::write(path, text).map_err(|source| Error::Io {
        context: format!("writing {}", path.display()),
        source,
    })
}
