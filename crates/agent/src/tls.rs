//! HTTPS for the `Http` kamikaze: the agent serves its endpoint with a certificate and key read
//! from files (a Secret mounted, say), so that the controller can verify whom it sends its token to
//! and nobody on the way can read it.
//!
//! Handshakes run in tasks of their own, at most [`MAX_HANDSHAKES`] at once and each within
//! [`HANDSHAKE_TIMEOUT`]: a client that opens connections and never finishes a handshake holds
//! neither the accept loop nor memory.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Most TLS handshakes in progress at once; more connections wait in the kernel's backlog.
pub const MAX_HANDSHAKES: usize = 64;

/// Longest a handshake may take; then the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server configuration of the certificate chain in `cert` and the key in `key` (PEM): TLS 1.2
/// and 1.3, ring.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|error| format!("reading the certificate {}: {error}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("no certificate in {}", cert.display()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|error| format!("reading the private key {}: {error}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS versions: {error}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|error| {
            format!(
                "the certificate {} and the key {} do not go together: {error}",
                cert.display(),
                key.display()
            )
        })?;
    Ok(Arc::new(config))
}

/// A listener that yields connections once their TLS handshake is done, for `axum::serve`.
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (done, handshaken) = mpsc::channel(MAX_HANDSHAKES);
        let acceptor = TlsAcceptor::from(config);
        let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        let accepting = tokio::spawn(async move {
            loop {
                let Ok(permit) = handshakes.clone().acquire_owned().await else {
                    return;
                };
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors, say: wait rather than spin.
                        tracing::warn!(%error, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            drop(permit);
                            let _ = done.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self {
            handshaken,
            local,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accept loop ended (it never does but on a closed semaphore): no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A CA's certificate (PEM), and a serving certificate for 127.0.0.1 it signed, written as
    /// `dir`/tls.crt and tls.key.
    fn pki(dir: &Path) -> String {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let serving = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        let cert = serving.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
        ca_pem
    }

    /// GET /healthz over TLS, trusting only `ca` (PEM); the status line, or the TLS error.
    async fn get_healthz(addr: SocketAddr, ca: &str) -> Result<String, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::IpAddress(addr.ip().into());
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        tls.read_to_string(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        Ok(answer.lines().next().unwrap_or_default().to_owned())
    }

    #[tokio::test]
    async fn the_endpoint_serves_https_with_the_given_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let ca = pki(dir.path());
        let config =
            server_config(&dir.path().join("tls.crt"), &dir.path().join("tls.key")).unwrap();
        let router = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok\n" }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = TlsListener::new(listener, config).unwrap();
        tokio::spawn(async move { axum::serve(tls, router).await });

        // A client that opens a connection and never says hello holds up nobody.
        let _silent = TcpStream::connect(addr).await.unwrap();
        assert_eq!(
            get_healthz(addr, &ca).await.as_deref(),
            Ok("HTTP/1.1 200 OK")
        );

        // A client that trusts another CA does not get through the handshake.
        let other = tempfile::tempdir().unwrap();
        let other_ca = pki(other.path());
        let refused = get_healthz(addr, &other_ca).await.unwrap_err();
        assert!(refused.contains("certificate"), "{refused}");

        // Plain HTTP gets no HTTP answer.
        let mut plain = TcpStream::connect(addr).await.unwrap();
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut answer)).await;
        assert!(
            !answer.starts_with(b"HTTP/"),
            "{:?}",
            String::from_utf8_lossy(&answer)
        );
    }

    #[test]
    fn a_certificate_and_key_must_be_readable_and_match() {
        let dir = tempfile::tempdir().unwrap();
        pki(dir.path());
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let missing = server_config(&dir.path().join("none.crt"), &key).unwrap_err();
        assert!(missing.contains("none.crt"), "{missing}");
        let other = tempfile::tempdir().unwrap();
        pki(other.path());
        let mismatch = server_config(&cert, &other.path().join("tls.key")).unwrap_err();
        assert!(mismatch.contains("do not go together"), "{mismatch}");
        let no_cert = server_config(&key, &key).unwrap_err();
        assert!(no_cert.contains("no certificate"), "{no_cert}");
    }
}
