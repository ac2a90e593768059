//! The cluster's certificates and keys: one CA, the apiserver's serving certificate, an admin
//! client certificate (group `system:masters`), more such admins under their own names, and the
//! service-account signing key.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::Error;

/// Paths of the PEM files written by [`Pki::write`].
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_public_key: PathBuf,
    /// Admins of their own names (see `ClusterOptions::users`).
    pub users: Vec<UserCert>,
}

/// A client certificate of an admin (group `system:masters`) named `name`.
#[derive(Debug, Clone)]
pub struct UserCert {
    pub name: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    /// Generates fresh keys (ECDSA P-256) and writes them under `dir`, with a client certificate
    /// for each of `users`.
    pub fn write(dir: &Path, users: &[String]) -> Result<Self, Error> {
        let mut pki = Self {
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            service_account_key: dir.join("service-account.key"),
            service_account_public_key: dir.join("service-account.pub"),
            users: Vec::new(),
        };

        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name = name("k8sm-testcluster-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        write(&pki.ca_cert, &ca_cert.pem())?;
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])?;
        serving.distinguished_name = name("kube-apiserver", None);
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        write(
            &pki.serving_cert,
            &serving.signed_by(&serving_key, &issuer)?.pem(),
        )?;
        write(&pki.serving_key, &serving_key.serialize_pem())?;

        write_admin_cert(&issuer, "k8sm-admin", &pki.admin_cert, &pki.admin_key)?;
        for user in users {
            let cert = UserCert {
                name: user.clone(),
                cert: dir.join(format!("user-{user}.crt")),
                key: dir.join(format!("user-{user}.key")),
            };
            write_admin_cert(&issuer, user, &cert.cert, &cert.key)?;
            pki.users.push(cert);
        }

        // Tokens are signed with an ECDSA key (PKCS#8); the apiserver verifies them with the public
        // half, which it only reads from a PUBLIC KEY block.
        let service_account = KeyPair::generate()?;
        write(&pki.service_account_key, &service_account.serialize_pem())?;
        write(
            &pki.service_account_public_key,
            &service_account.public_key_pem(),
        )?;
        Ok(pki)
    }
}

/// A client certificate for user `user` in group `system:masters`, signed by the CA.
fn write_admin_cert(
    issuer: &Issuer<'_, KeyPair>,
    user: &str,
    cert_path: &Path,
    key_path: &Path,
) -> Result<(), Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = name(user, Some("system:masters"));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    write(cert_path, &params.signed_by(&key, issuer)?.pem())?;
    write(key_path, &key.serialize_pem())
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

fn write(path: &Path, pem: &str) -> Result<(), Error> {
    std::fs::write(path, pem).map_err(|source| Error::Io {
        context: format!("writing {}", path.display()),
        source,
    })
}
