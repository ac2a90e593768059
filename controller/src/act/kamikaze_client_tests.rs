//! The kamikaze POST against loopback servers: what it sends, redirects, refusals, and TLS verified by the CA file.

use super::*;

/// Accepts one connection on a loopback port, answers it with `answer` (a raw HTTP response), and hands back
/// the request it read.
async fn answer_once(answer: String) -> (String, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        // The head, then as many bytes as its Content-Length says.
        let complete = |request: &[u8]| {
            let text = String::from_utf8_lossy(request).to_ascii_lowercase();
            let Some((head, body)) = text.split_once("\r\n\r\n") else {
                return false;
            };
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|l| l.trim().parse::<usize>().ok())
                .unwrap_or(0);
            body.len() >= length
        };
        while !complete(&request) {
            let n = stream.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the client hung up mid-request");
            request.extend_from_slice(&buffer[..n]);
        }
        stream.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    (format!("http://{addr}/kamikaze/n"), served)
}

/// The kamikaze client, with the crypto provider `run` installs for the process.
fn test_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    build(None).unwrap()
}

fn response(status: &str, headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn the_kamikaze_post_carries_the_token_and_the_body() {
    let (url, served) = answer_once(response("202 Accepted", "", "ok")).await;
    let body = r#"{"kamikaze":"2026-11-29T17:00:00Z"}"#.to_owned();
    let answer = post_kamikaze(&test_client(), &url, "secret-token", body)
        .await
        .unwrap();
    assert!(answer.is_none(), "{answer:?}");
    let request = served.await.unwrap().to_ascii_lowercase();
    assert!(
        request.starts_with("post /kamikaze/n http/1.1"),
        "{request}"
    );
    assert!(
        request.contains("authorization: bearer secret-token"),
        "{request}"
    );
    assert!(
        request.contains("content-type: application/json"),
        "{request}"
    );
    assert!(
        request.ends_with(r#"{"kamikaze":"2026-11-29t17:00:00z"}"#),
        "{request}"
    );
}

#[tokio::test]
async fn a_redirect_is_a_refusal_and_is_not_followed() {
    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let location = format!(
        "Location: http://{}/kamikaze/n\r\n",
        elsewhere.local_addr().unwrap()
    );
    for status in [
        "302 Found",
        "307 Temporary Redirect",
        "308 Permanent Redirect",
    ] {
        let (url, served) = answer_once(response(status, &location, "")).await;
        let refusal = post_kamikaze(&test_client(), &url, "t", "{}".into())
            .await
            .unwrap()
            .expect("a refusal");
        served.await.unwrap();
        assert!(refusal.status.is_redirection(), "{status}");
        assert_eq!(refusal.why, "redirects are not followed");
    }
    // A client that followed would have connected before its answer came back.
    assert_eq!(
        elsewhere.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "nothing went to the redirect's target"
    );
}

#[tokio::test]
async fn a_refusal_quotes_the_agents_first_line() {
    let (url, served) = answer_once(response(
        "409 Conflict",
        "",
        "node n is not drained by k8sm\nsecond line",
    ))
    .await;
    let refusal = post_kamikaze(&test_client(), &url, "t", "{}".into())
        .await
        .unwrap()
        .expect("a refusal");
    served.await.unwrap();
    assert_eq!(
        refusal.to_string(),
        "answered 409 Conflict: node n is not drained by k8sm"
    );
}

#[test]
fn an_answer_is_quoted_short_and_escaped() {
    assert_eq!(
        quote_answer("bad\u{1b}[31m token\r\nmore"),
        "bad\\u{1b}[31m token"
    );
    let long = quote_answer(&"x".repeat(5_000));
    assert_eq!(long.chars().count(), ANSWER_MAX_CHARS + 1);
    assert!(long.ends_with('…'));
    assert_eq!(quote_answer(""), "");
}

/// A CA's certificate (PEM) and a server configuration for 127.0.0.1 whose certificate it signed.
fn pki() -> (String, std::sync::Arc<rustls::ServerConfig>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from(cert.der().to_vec())],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    (ca_pem, std::sync::Arc::new(config))
}

/// Serves HTTPS on a loopback port, answering every request 202; its URL.
async fn https_agent(config: std::sync::Arc<rustls::ServerConfig>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let mut buffer = [0u8; 4096];
                let _ = tls.read(&mut buffer).await;
                let answer = response("202 Accepted", "", "ok");
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    format!("https://{addr}/kamikaze/n")
}

#[tokio::test]
async fn https_is_verified_by_the_ca_file_and_a_new_file_is_read_again() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (ca, config) = pki();
    let url = https_agent(config).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    let (other_ca, _) = pki();
    std::fs::write(&ca_file, &other_ca).unwrap();
    let client = KamikazeClient::new(Some(ca_file.clone()));
    let refused = client.post(&url, "t", "{}".into()).await.unwrap_err();
    assert!(
        refused.to_string().contains("certificate")
            || refused.to_string().contains("error sending request"),
        "another CA's certificate is not trusted: {refused}"
    );
    // Rotated to the agents' CA: read again without a restart.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&ca_file, &ca).unwrap();
    let file = std::fs::File::options().write(true).open(&ca_file).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(1))
        .unwrap();
    assert!(client.post(&url, "t", "{}".into()).await.unwrap().is_none());
    // The system's roots do not know a private CA.
    assert!(
        KamikazeClient::new(None)
            .post(&url, "t", "{}".into())
            .await
            .is_err()
    );
    // A file without a certificate says so.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(2))
        .unwrap();
    let error = client.post(&url, "t", "{}".into()).await.unwrap_err();
    assert!(error.to_string().contains("no PEM certificate"), "{error}");
}
