//! The `Http` kamikaze's HTTPS client: it trusts the agents' CA (`--kamikaze-ca-file`) or the system's roots,
//! follows no redirect, and quotes an agent's refusal short and escaped.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::Error;
use crate::leadership::leader::MAX_WRITE_TIMEOUT;

/// Longest the POST may take to connect: an address nobody answers at fails fast and is retried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of an agent's refusal an error quotes.
const ANSWER_MAX_CHARS: usize = 200;

/// The `Http` kamikaze's HTTP client, built when first needed: building it loads the CA roots, and a controller whose
/// policies never POST a kamikaze must not fail to start where there are none (a minimal image). A build that fails
/// is tried again at the next POST, and the client is built again when the CA file changes (a rotated bundle needs
/// no restart).
pub struct KamikazeClient {
    /// Trust only the CA certificates of this PEM file (the agents' serving CA), not the system's roots.
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

    /// POSTs `body` with `token` to `url`. `Ok(None)`: a 2xx answer; `Ok(Some(refusal))`: any other answer, a
    /// redirect included (not followed); `Err`: no answer. Only 2xx counts: the agent answers 401/403 for a token it
    /// does not accept and 409 for a node it does not see drained by k8sm.
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
        // A redirect would take the POST, and its token, wherever the answer points: never followed, a 3xx is a
        // failure.
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
        // reqwest's own message is only "builder error": the causes say what is missing (CA roots, say).
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
    // The URL was built from the template and parsed values; parsing it again catches what neither could see (a
    // port out of range, say) before anything is sent.
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

/// The first line of an agent's answer, at most [`ANSWER_MAX_CHARS`] characters, control characters escaped.
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
#[path = "kamikaze_client_tests.rs"]
mod tests;
