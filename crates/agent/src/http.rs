//! The HTTP endpoint of the `Http` kamikaze (`POST /kamikaze/{nodeName}`, or `POST /kamikaze` for
//! the agent's own node) and `GET /healthz`, shared by `run` and `simulate` (docs/design.md §5.4,
//! §9). A request is obeyed only when the [`Gate`] admits it, each token once ([`crate::obeyed`]);
//! before the gate's TokenReview, requests are limited in rate (429) and concurrency (503), with
//! `Retry-After`. The body, read after the gate, may be empty; its `{"kamikaze": "<time>"}`, the
//! annotation's value, is recorded as obeyed so that the annotation is not obeyed again.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::Error;
use crate::gate::{Gate, Refusal};
use crate::obeyed::ObeyedTokens;
use crate::shutdown::Shutdown;
use crate::tls::TlsListener;
use crate::validate::is_node_name;

/// Most TokenReviews (requests not yet authenticated) in flight at once; more get 503 at once.
pub const MAX_CONCURRENT_REVIEWS: usize = 4;

/// Requests that may reach the TokenReview in a burst, refilled at [`REVIEWS_PER_SECOND`]; more get
/// 429.
pub const REVIEW_BURST: usize = 20;

/// Steady rate of requests that may reach the TokenReview.
pub const REVIEWS_PER_SECOND: usize = 5;

/// Longest body read, once authenticated: the controller's is under 40 bytes.
const MAX_BODY: usize = 4096;

/// How a mode answers a kamikaze request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The executor will terminate (or already is terminating): 202.
    Accepted,
    /// This agent plays no such node: 404.
    UnknownNode,
}

/// Receives the kamikaze requests of the HTTP endpoint.
pub trait KamikazeTarget: Clone + Send + Sync + 'static {
    /// The node a request is for, if this agent plays it: `path_node` from `POST
    /// /kamikaze/{nodeName}`, `None` for `POST /kamikaze`.
    fn node_for(&self, path_node: Option<&str>) -> Option<String>;

    /// An admitted request for `node`; `kamikaze`: the kamikaze's value from the body, if it had
    /// one. Must not block: it only schedules the restart.
    fn kamikaze(&self, node: &str, kamikaze: Option<&str>) -> Answer;
}

/// What a kamikaze body must look like, for the 400 answer.
const EXPECTED_BODY: &str = "expected no body, or a JSON object {\"kamikaze\": \"<RFC 3339 time>\"} such as \
     {\"kamikaze\": \"2025-01-01T00:00:00Z\"}: the value the controller writes as the node's kamikaze annotation";

/// The kamikaze's value in a request body: `None` for an empty body, an error saying what is
/// expected otherwise. Fields other than `kamikaze` are ignored, so a newer controller may send
/// more.
pub fn kamikaze_of(body: &[u8]) -> Result<Option<String>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| format!("{EXPECTED_BODY} (not JSON: {error})"))?;
    let Some(object) = value.as_object() else {
        return Err(format!("{EXPECTED_BODY} (not a JSON object)"));
    };
    match object.get("kamikaze") {
        None => Err(format!("{EXPECTED_BODY} (no \"kamikaze\" field)")),
        Some(serde_json::Value::String(time)) if is_rfc3339(time) => Ok(Some(time.clone())),
        Some(other) => Err(format!("{EXPECTED_BODY} ({other} is not an RFC 3339 time)")),
    }
}

/// Whether `time` is an RFC 3339 date-time with an offset. jiff also accepts an RFC 9557 zone
/// suffix (`[UTC]`), which RFC 3339 has not.
fn is_rfc3339(time: &str) -> bool {
    !time.contains('[') && time.parse::<k8s_openapi::jiff::Timestamp>().is_ok()
}

/// The routes, on top of `target`, each request admitted by `gate` and its token obeyed once
/// (`obeyed`).
pub fn router<T: KamikazeTarget, G: Gate>(target: T, gate: G, obeyed: Arc<ObeyedTokens>) -> Router {
    let state = Endpoint {
        target,
        gate,
        limits: Arc::new(Limits::new()),
        obeyed,
    };
    Router::new()
        .route("/kamikaze", post(kamikaze_own::<T, G>))
        .route("/kamikaze/{node}", post(kamikaze_named::<T, G>))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(state)
}

/// What every kamikaze request shares.
#[derive(Clone)]
struct Endpoint<T, G> {
    target: T,
    gate: G,
    limits: Arc<Limits>,
    obeyed: Arc<ObeyedTokens>,
}

/// Bounds on the work that requests can cause before they are authenticated: each costs a
/// TokenReview (and a read of the Node) on the apiserver, so without a bound anyone who reaches the
/// port could load the apiserver through every agent at once.
struct Limits {
    reviews: Semaphore,
    bucket: Mutex<Bucket>,
}

impl Limits {
    fn new() -> Self {
        Self {
            reviews: Semaphore::new(MAX_CONCURRENT_REVIEWS),
            bucket: Mutex::new(Bucket::full(
                REVIEW_BURST,
                REVIEWS_PER_SECOND,
                Instant::now(),
            )),
        }
    }
}

/// A token bucket: `capacity` requests at once, refilled at `per_second`.
#[derive(Debug)]
struct Bucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(capacity: usize, per_second: usize, now: Instant) -> Self {
        Self {
            capacity: capacity as f64,
            per_second: per_second as f64,
            tokens: capacity as f64,
            at: now,
        }
    }

    /// Takes one token at `now`, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - self.tokens) / self.per_second,
            ))
        }
    }
}

/// Binds `addr` now, so a taken port fails the start, and serves `router` until `shutdown`: over
/// HTTPS with `tls`, over plain HTTP without.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    mut shutdown: Shutdown,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Result<JoinHandle<()>, Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let local = listener.local_addr().unwrap_or(addr);
    let scheme = if tls.is_some() { "HTTPS" } else { "HTTP" };
    tracing::info!(addr = %local, scheme, "serving POST /kamikaze/{{nodeName}} and GET /healthz");
    let stop = async move { shutdown.wait().await };
    Ok(match tls {
        Some(config) => {
            let listener = TlsListener::new(listener, config)
                .map_err(|source| Error::Bind { addr, source })?;
            tokio::spawn(async move {
                let server = axum::serve(listener, router).with_graceful_shutdown(stop);
                if let Err(error) = server.await {
                    tracing::error!(%error, "HTTPS server failed");
                }
            })
        }
        None => tokio::spawn(async move {
            let server = axum::serve(listener, router).with_graceful_shutdown(stop);
            if let Err(error) = server.await {
                tracing::error!(%error, "HTTP server failed");
            }
        }),
    })
}

fn answer(status: StatusCode, message: String) -> Response {
    (status, format!("{message}\n")).into_response()
}

async fn kamikaze_own<T: KamikazeTarget, G: Gate>(
    State(endpoint): State<Endpoint<T, G>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(node) = endpoint.target.node_for(None) else {
        return answer(
            StatusCode::NOT_FOUND,
            "this agent plays many nodes: POST /kamikaze/{nodeName}".into(),
        );
    };
    handle(endpoint, node, &headers, body).await
}

async fn kamikaze_named<T: KamikazeTarget, G: Gate>(
    State(endpoint): State<Endpoint<T, G>>,
    Path(node): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // A template whose placeholder was not substituted (`{nodeName}`) lands here: say so rather
    // than "unknown".
    if !is_node_name(&node) {
        return answer(
            StatusCode::BAD_REQUEST,
            format!("{node:?} is not a node name"),
        );
    }
    let Some(node) = endpoint.target.node_for(Some(&node)) else {
        return answer(
            StatusCode::NOT_FOUND,
            format!("this agent does not run node {node}"),
        );
    };
    handle(endpoint, node, &headers, body).await
}

/// A request for `node`, which this agent plays: within the limits, the gate, then a well-formed
/// body, then the restart. The body is read only once the request is authenticated.
async fn handle<T: KamikazeTarget, G: Gate>(
    endpoint: Endpoint<T, G>,
    node: String,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let Endpoint {
        target,
        gate,
        limits,
        obeyed,
    } = endpoint;
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let taken = limits
        .bucket
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take(Instant::now());
    if let Err(wait) = taken {
        return limited(
            &node,
            StatusCode::TOO_MANY_REQUESTS,
            wait,
            format!(
                "too many kamikaze requests: at most {REVIEWS_PER_SECOND} a second are checked"
            ),
        );
    }
    let Ok(permit) = limits.reviews.try_acquire() else {
        return limited(
            &node,
            StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_secs(1),
            format!(
                "too many kamikaze requests at once: at most {MAX_CONCURRENT_REVIEWS} are checked at a time"
            ),
        );
    };
    let admitted = gate.admit(&node, authorization).await;
    drop(permit);
    if let Err(refusal) = admitted {
        return refuse(&node, &refusal);
    }
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(error) => {
            return answer(
                StatusCode::BAD_REQUEST,
                format!("{EXPECTED_BODY} (could not read it, at most {MAX_BODY} bytes: {error})"),
            );
        }
    };
    let kamikaze = match kamikaze_of(&body) {
        Ok(kamikaze) => kamikaze,
        Err(message) => return answer(StatusCode::BAD_REQUEST, message),
    };
    // Remembered before it is obeyed: the gate admitted it, so it is there.
    let token = crate::gate::bearer(authorization).unwrap_or_default();
    if let Err(refusal) = obeyed.claim(token) {
        return refuse(&node, &refusal);
    }
    match target.kamikaze(&node, kamikaze.as_deref()) {
        Answer::Accepted => answer(
            StatusCode::ACCEPTED,
            format!("kamikaze accepted: restarting the executor of {node}"),
        ),
        Answer::UnknownNode => answer(
            StatusCode::NOT_FOUND,
            format!("this agent does not run node {node}"),
        ),
    }
}

/// The answer to a request over the limits, with when to come back; logged at debug only, since a
/// flood would otherwise fill the log.
fn limited(node: &str, status: StatusCode, wait: Duration, message: String) -> Response {
    tracing::debug!(
        node,
        status = status.as_u16(),
        "kamikaze request over the limits; not checked"
    );
    let mut response = answer(status, message);
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

/// The answer to a refused request; logged, since a refusal of the controller is an operator's
/// problem and any other one may be an attack.
fn refuse(node: &str, refusal: &Refusal) -> Response {
    let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
    tracing::warn!(node, status = status.as_u16(), %refusal, "kamikaze over HTTP refused; nothing done");
    let mut response = answer(status, refusal.to_string());
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const AT: &str = "2025-01-01T00:00:00Z";

    /// Records admitted requests; plays `node-0000` (its own) and `node-0001`.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Request>>>);

    /// (node, kamikaze) of one request.
    type Request = (String, Option<String>);

    impl KamikazeTarget for Recorder {
        fn node_for(&self, path_node: Option<&str>) -> Option<String> {
            match path_node {
                None => Some("node-0000".into()),
                Some(node @ ("node-0000" | "node-0001")) => Some(node.into()),
                Some(_) => None,
            }
        }

        fn kamikaze(&self, node: &str, kamikaze: Option<&str>) -> Answer {
            self.0
                .lock()
                .unwrap()
                .push((node.to_owned(), kamikaze.map(str::to_owned)));
            Answer::Accepted
        }
    }

    /// Admits the token `good`; `node-0001` is not drained.
    #[derive(Clone)]
    struct FakeGate;

    impl Gate for FakeGate {
        async fn admit(&self, node: &str, authorization: Option<&str>) -> Result<(), Refusal> {
            match crate::gate::bearer(authorization) {
                None => Err(Refusal::NoToken("a".into())),
                Some(t) if t.starts_with("good.") && node == "node-0001" => {
                    Err(Refusal::NotDrained {
                        node: node.into(),
                        why: crate::contract::NotDrained::NotAdmitted,
                    })
                }
                Some(t) if t.starts_with("good.") => Ok(()),
                Some(_) => Err(Refusal::NotController {
                    user: "someone".into(),
                    controller: "controller".into(),
                }),
            }
        }
    }

    /// A token [`FakeGate`] admits, the `n`th: a JWT whose claims expire in ten minutes.
    fn good(n: u32) -> String {
        use base64::Engine;
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 600;
        let claims = serde_json::json!({ "exp": exp, "jti": n }).to_string();
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims);
        format!("good.{claims}.signature")
    }

    fn obeyed() -> Arc<ObeyedTokens> {
        Arc::new(ObeyedTokens::in_memory())
    }

    /// Sends one raw HTTP/1.1 request with `token` as bearer token (if any) and returns the status
    /// code and the answer (head and body).
    async fn request(
        addr: SocketAddr,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let authorization =
            token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{authorization}\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let code = response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {response:?}"));
        (code, response)
    }

    #[tokio::test]
    async fn routes_answer_by_method_path_node_token_and_body() {
        let recorder = Recorder::default();
        let (shutdown, trigger) = Shutdown::new();
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = router(recorder.clone(), FakeGate, obeyed());
        let mut wait = shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move { wait.wait().await })
                .await
        });
        let tokens: Vec<String> = (0..5).map(good).collect();
        let [t0, t1, t2, t3, t4] = [0, 1, 2, 3, 4].map(|n| Some(tokens[n].as_str()));
        let good = t4;
        let code = |method, path, token, body| async move {
            request(addr, method, path, token, body).await.0
        };
        let told = format!(r#"{{"kamikaze": "{AT}"}}"#);

        assert_eq!(code("POST", "/kamikaze/node-0000", t0, "").await, 202);
        assert_eq!(code("POST", "/kamikaze/node-0000", t1, &told).await, 202);
        assert_eq!(code("POST", "/kamikaze", t2, "").await, 202);
        assert_eq!(
            code("POST", "/kamikaze?node=node-0000", t3, &told).await,
            202
        );
        // Each token is obeyed once: a replay, with whatever body, is refused.
        let (status, replayed) = request(addr, "POST", "/kamikaze", t0, &told).await;
        assert_eq!(status, 401, "{replayed}");
        assert!(replayed.contains("already obeyed"), "{replayed}");
        // Refused by the gate: nothing reaches the target.
        let (status, unauthenticated) =
            request(addr, "POST", "/kamikaze/node-0000", None, &told).await;
        assert_eq!(status, 401);
        assert!(
            unauthenticated
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{unauthenticated}"
        );
        assert_eq!(code("POST", "/kamikaze", None, "").await, 401);
        assert_eq!(
            code("POST", "/kamikaze/node-0000", Some("bad"), &told).await,
            403
        );
        let (status, undrained) = request(addr, "POST", "/kamikaze/node-0001", good, &told).await;
        assert_eq!(status, 409);
        assert!(
            undrained.contains("node node-0001 is not drained by k8sm"),
            "the answer says why: {undrained}"
        );
        // Not a request for a node this agent plays, or malformed: refused before the gate.
        assert_eq!(code("POST", "/kamikaze/node-0009", good, &told).await, 404);
        assert_eq!(
            code("POST", "/kamikaze/%7BnodeName%7D", good, "").await,
            400
        );
        assert_eq!(code("GET", "/kamikaze/node-0000", good, "").await, 405);
        assert_eq!(code("GET", "/healthz", None, "").await, 200);
        assert_eq!(code("POST", "/other", good, "").await, 404);
        let (status, answer) =
            request(addr, "POST", "/kamikaze/node-0000", good, "{\"at\": 1}").await;
        assert_eq!(status, 400);
        assert!(
            answer.contains(r#"{"kamikaze": "<RFC 3339 time>"}"#),
            "the answer says what is expected: {answer:?}"
        );
        assert_eq!(code("POST", "/kamikaze", good, "kamikaze").await, 400);
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            *recorder.0.lock().unwrap(),
            [
                ("node-0000".to_owned(), None),
                ("node-0000".to_owned(), some(AT)),
                ("node-0000".to_owned(), None),
                ("node-0000".to_owned(), some(AT)),
            ],
            "only admitted, well-formed POSTs reach the target, with the kamikaze of their body"
        );

        trigger.fire();
        server.await.unwrap().unwrap();
    }

    /// A gate that takes `delay` to answer (a TokenReview on a slow apiserver) and refuses every
    /// token; counts the reviews it was asked for and the most at once.
    #[derive(Clone, Default)]
    struct SlowGate {
        delay: std::time::Duration,
        reviews: Arc<Mutex<(usize, usize, usize)>>,
    }

    impl Gate for SlowGate {
        async fn admit(&self, _: &str, _: Option<&str>) -> Result<(), Refusal> {
            {
                let mut counts = self.reviews.lock().unwrap();
                counts.0 += 1;
                counts.1 += 1;
                counts.2 = counts.2.max(counts.1);
            }
            tokio::time::sleep(self.delay).await;
            self.reviews.lock().unwrap().1 -= 1;
            Err(Refusal::InvalidToken {
                audience: "a".into(),
                why: "forged".into(),
            })
        }
    }

    /// Serves `router` on a loopback port until the test ends.
    async fn serve_router(router: Router) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        addr
    }

    #[tokio::test]
    async fn the_body_is_read_only_after_authentication() {
        let addr = serve_router(router(Recorder::default(), FakeGate, obeyed())).await;
        // A malformed body costs nothing to someone who cannot authenticate: the answer is about
        // the token.
        let not_json = "{\"kamikaze\": ";
        assert_eq!(
            request(addr, "POST", "/kamikaze/node-0000", None, not_json)
                .await
                .0,
            401
        );
        assert_eq!(
            request(addr, "POST", "/kamikaze/node-0000", Some("bad"), not_json)
                .await
                .0,
            403
        );
        // A request that announces a large body and never sends it is answered at once, without
        // waiting for it.
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /kamikaze/node-0000 HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer bad\r\n\
             Content-Length: 1000000\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = [0; 12];
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.read_exact(&mut answer),
        )
        .await
        .expect("answered without the body")
        .unwrap();
        assert_eq!(&answer, b"HTTP/1.1 403");
    }

    #[tokio::test]
    async fn token_reviews_are_limited_in_concurrency() {
        let gate = SlowGate {
            delay: std::time::Duration::from_millis(500),
            ..SlowGate::default()
        };
        let addr = serve_router(router(Recorder::default(), gate.clone(), obeyed())).await;
        let requests = (0..12).map(|_| request(addr, "POST", "/kamikaze", Some("forged"), ""));
        let codes: Vec<u16> = futures::future::join_all(requests)
            .await
            .into_iter()
            .map(|(code, _)| code)
            .collect();
        let (reviews, _, most_at_once) = *gate.reviews.lock().unwrap();
        assert_eq!(
            most_at_once, MAX_CONCURRENT_REVIEWS,
            "at most {MAX_CONCURRENT_REVIEWS} TokenReviews at once: {codes:?}"
        );
        assert_eq!(reviews, MAX_CONCURRENT_REVIEWS, "{codes:?}");
        assert_eq!(codes.iter().filter(|c| **c == 401).count(), reviews);
        assert_eq!(
            codes.iter().filter(|c| **c == 503).count(),
            12 - reviews,
            "the others are told to come back: {codes:?}"
        );
    }

    #[tokio::test]
    async fn token_reviews_are_limited_in_rate() {
        let gate = SlowGate::default();
        let addr = serve_router(router(Recorder::default(), gate.clone(), obeyed())).await;
        let mut codes = Vec::new();
        for _ in 0..REVIEW_BURST + 5 {
            codes.push(request(addr, "POST", "/kamikaze", Some("forged"), "").await);
        }
        let reviews = gate.reviews.lock().unwrap().0;
        // A few may have come back into the bucket while the requests were sent.
        assert!(
            (REVIEW_BURST..REVIEW_BURST + 3).contains(&reviews),
            "{reviews} reviews for {} requests",
            codes.len()
        );
        let (code, last) = codes.last().unwrap();
        assert_eq!(*code, 429, "{last}");
        assert!(
            last.to_ascii_lowercase().contains("retry-after: 1"),
            "{last}"
        );
    }

    #[test]
    fn the_bucket_lets_a_burst_through_then_its_rate() {
        let start = Instant::now();
        let mut bucket = Bucket::full(3, 2, start);
        for _ in 0..3 {
            assert_eq!(bucket.take(start), Ok(()));
        }
        assert_eq!(bucket.take(start), Err(Duration::from_millis(500)));
        let later = start + Duration::from_millis(500);
        assert_eq!(bucket.take(later), Ok(()), "one back after 1/rate");
        assert!(bucket.take(later).is_err());
        let much_later = later + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.take(much_later), Ok(()));
        }
        assert!(
            bucket.take(much_later).is_err(),
            "never more than the burst"
        );
    }

    #[test]
    fn a_kamikaze_body_is_optional_and_validated() {
        let ok = |body: &str| kamikaze_of(body.as_bytes());
        // (body, the kamikaze it carries)
        for (body, expected) in [
            ("", None),
            (" \r\n", None),
            (r#"{"kamikaze": "2025-01-01T00:00:00Z"}"#, Some(AT)),
            (
                r#"{"kamikaze":"2025-01-01T00:00:00Z","executorId":"old"}"#,
                Some(AT),
            ),
            (
                r#"{"kamikaze": "2025-01-01T01:00:00+01:00"}"#,
                Some("2025-01-01T01:00:00+01:00"),
            ),
            (
                r#"{"kamikaze": "2025-01-01T00:00:00.5Z"}"#,
                Some("2025-01-01T00:00:00.5Z"),
            ),
        ] {
            assert_eq!(ok(body), Ok(expected.map(str::to_owned)), "{body:?}");
        }
        for (body, why) in [
            ("2025-01-01T00:00:00Z", "not JSON"),
            (r#"{"kamikaze": "2025-01-01T00:00:00Z""#, "not JSON"),
            (r#"["2025-01-01T00:00:00Z"]"#, "not a JSON object"),
            ("{}", "no \"kamikaze\" field"),
            (
                r#"{"Kamikaze": "2025-01-01T00:00:00Z"}"#,
                "no \"kamikaze\" field",
            ),
            (
                r#"{"kamikaze": 1735689600}"#,
                "1735689600 is not an RFC 3339 time",
            ),
            (r#"{"kamikaze": null}"#, "null is not an RFC 3339 time"),
            (r#"{"kamikaze": "2025-01-01"}"#, "is not an RFC 3339 time"),
            (
                r#"{"kamikaze": "2025-01-01T00:00:00"}"#,
                "is not an RFC 3339 time",
            ),
            (
                r#"{"kamikaze": "2025-01-01T00:00:00Z[UTC]"}"#,
                "is not an RFC 3339 time",
            ),
            (r#"{"kamikaze": "now"}"#, "is not an RFC 3339 time"),
        ] {
            let error = ok(body).expect_err(body);
            assert!(error.starts_with(EXPECTED_BODY), "{body:?}: {error}");
            assert!(error.contains(why), "{body:?}: {error}");
        }
    }
}
