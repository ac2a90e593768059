//! The `Http` kamikaze's HTTPS client: it trusts the agents' CA (`--kamikaze-ca-file`) or the
//! system's roots, follows no redirect, and quotes an agent's refusal short and escaped.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::Error;
use crate::leadership::leader::MAX_WRITE_TIMEOUT;

/// Longest the POST may take to connect: an address nobody answers at fails fast and is retried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of an agent's refusal an error quotes.
const ANSWER_MAX_CHARS: usize = 200;

/// The `Http` kamikaze's HTTP client, built when first needed: building it loads the CA roots, and
/// a controller whose policies never POST a kamikaze must not fail to start where there are none (a
/// minimal image). A build that fails is tried again at the next POST, and the client is built
/// again when the CA file changes (a rotated bundle needs no restart).
pub struct KamikazeClient {
    /// Trust only the CA certificates of this PEM file (the agents' serving CA), not the system's
    /// roots.
    ca_file: Option<PathBuf>,
    built: Mutex<Option<Built>>,
}

struct Built {
    /// The CA file's modification time when the client was built.
    ca_modified: Option<SystemTime>,
    client: reqwest::Client,
}

impl KamikazeClient {
    pub fn new(ca_file: Option<PathBuf>) -> Self {
        Self {
            ca_file,
            built: Mutex::new(None),
        }
    }

    /// POSTs `body` with `token` to `url`. `Ok(None)`: a 2xx answer; `Ok(Some(refusal))`: any other
    /// answer, a redirect included (not followed); `Err`: no answer. Only 2xx counts: the agent
    /// answers 401/403 for a token it does not accept and 409 for a node it does not see
    /// drained by k8sm.
    pub async fn post(
        &self,
        url: &str,
        token: &str,
        body: String,
    ) -> Result<Option<Refusal>, Error> {
        let client = self.client()?;
        post_kamikaze(&client, url, token, body).await
    }

    fn client(&self) -> Result<reqwest::Client, Error> {
        let ca_modified = match &self.ca_file {
            None => None,
            Some(path) => Some(std::fs::metadata(path).and_then(|m| m.modified()).map_err(
                |e| Error::Other(format!("--kamikaze-ca-file {}: {e}", path.display())),
            )?),
        };
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(built) = built.as_ref()
            && built.ca_modified == ca_modified
        {
            return Ok(built.client.clone());
        }
        let client = build(self.ca_file.as_deref()).map_err(Error::Other)?;
        *built = Some(Built {
            ca_modified,
            client: client.clone(),
        });
        Ok(client)
    }
}

fn build(ca_file: Option<&Path>) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .timeout(MAX_WRITE_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        // A redirect would take the POST, and its token, wherever the answer points: never
        // followed, a 3xx is a failure.
        .redirect(reqwest::redirect::Policy::none());
    if let Some(path) = ca_file {
        let pem = std::fs::read(path)
            .map_err(|e| format!("--kamikaze-ca-file {}: {e}", path.display()))?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("--kamikaze-ca-file {}: {e}", path.display()))?;
        if certificates.is_empty() {
            return Err(format!(
                "--kamikaze-ca-file {}: no PEM certificate in it",
                path.display()
            ));
        }
        builder = builder.tls_certs_only(certificates);
    }
    builder.build().map_err(|e| {
        // reqwest's own message is only "builder error": the causes say what is missing (CA roots,
        // say).
        let mut message = format!("building the kamikaze HTTP client: {e}");
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            message.push_str(&format!(": {c}"));
            cause = c.source();
        }
        message
    })
}

/// An answer other than 2xx.
#[derive(Debug)]
pub struct Refusal {
    pub status: reqwest::StatusCode,
    /// Why, from the answer: the first line of the agent's body, bounded and escaped.
    pub why: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "answered {}: {}", self.status, self.why)
    }
}

async fn post_kamikaze(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: String,
) -> Result<Option<Refusal>, Error> {
    let http_error = |message: String| Error::Http {
        url: url.to_owned(),
        message,
    };
    // The URL was built from the template and parsed values; parsing it again catches what neither
    // could see (a port out of range, say) before anything is sent.
    let parsed = reqwest::Url::parse(url).map_err(|e| http_error(format!("not a URL: {e}")))?;
    let response = http
        .post(parsed)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        // reqwest's error names the URL and the cause, never the request's headers (the token).
        .map_err(|e| http_error(e.to_string()))?;
    let status = response.status();
    if status.is_success() {
        return Ok(None);
    }
    let why = if status.is_redirection() {
        "redirects are not followed".to_owned()
    } else {
        let text = tokio::time::timeout(CONNECT_TIMEOUT, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        quote_answer(&text)
    };
    Ok(Some(Refusal { status, why }))
}

/// The first line of an agent's answer, at most [`ANSWER_MAX_CHARS`] characters, control characters
/// escaped.
fn quote_answer(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let cut: String = line.chars().take(ANSWER_MAX_CHARS).collect();
    let escaped: String = cut.escape_debug().collect();
    if cut.len() < line.len() {
        format!("{escaped}…")
    } else {
        escaped
    }
}

#[cfg(test)]
mod tests {
    //! The kamikaze POST against loopback servers: what it sends, redirects, refusals, and TLS
    //! verified by the CA file.

    use super::*;

    /// Accepts one connection on a loopback port, answers it with `answer` (a raw HTTP response),
    /// and hands back the request it read.
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

    /// A CA's certificate (PEM) and a server configuration for 127.0.0.1 whose certificate it
    /// signed.
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
}
