//! The HTTP endpoint of the `Http` kamikaze mechanism (`POST /kamikaze/{nodeName}`, or `POST /kamikaze` for the
//! agent's own node) and `GET /healthz`, shared by `run` and `simulate`.
//!
//! A request is obeyed only when the [`Gate`] admits it: the controller's token, bound to the node, on a node k8sm
//! drained (401, 403 or 409 otherwise, and nothing happens). The controller's POST carries
//! `{"kamikaze": "<RFC 3339 time>"}`: the value it then writes as the kamikaze annotation, which the executor records
//! as obeyed so that the annotation is not obeyed a second time. A POST without a body is accepted too.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::Error;
use crate::gate::{Gate, Refusal};
use crate::shutdown::Shutdown;
use crate::validate::is_node_name;

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
    /// The node a request is for, if this agent plays it: `path_node` from `POST /kamikaze/{nodeName}`, `None` for
    /// `POST /kamikaze`.
    fn node_for(&self, path_node: Option<&str>) -> Option<String>;

    /// An admitted request for `node`; `kamikaze`: the kamikaze's value from the body, if it had one. Must not block:
    /// it only schedules the restart.
    fn kamikaze(&self, node: &str, kamikaze: Option<&str>) -> Answer;
}

/// What a kamikaze body must look like, for the 400 answer.
const EXPECTED_BODY: &str = "expected no body, or a JSON object {\"kamikaze\": \"<RFC 3339 time>\"} such as \
     {\"kamikaze\": \"2025-01-01T00:00:00Z\"}: the value the controller writes as the node's kamikaze annotation";

/// The kamikaze's value in a request body: `None` for an empty body, an error saying what is expected otherwise.
/// Fields other than `kamikaze` are ignored, so a newer controller may send more.
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

/// Whether `time` is an RFC 3339 date-time with an offset. jiff also accepts an RFC 9557 zone suffix (`[UTC]`),
/// which RFC 3339 has not.
fn is_rfc3339(time: &str) -> bool {
    !time.contains('[') && time.parse::<k8s_openapi::jiff::Timestamp>().is_ok()
}

/// The routes, on top of `target`, each request admitted by `gate`.
pub fn router<T: KamikazeTarget, G: Gate>(target: T, gate: G) -> Router {
    Router::new()
        .route("/kamikaze", post(kamikaze_own::<T, G>))
        .route("/kamikaze/{node}", post(kamikaze_named::<T, G>))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state((target, gate))
}

/// Binds `addr` now, so a taken port fails the start, and serves `router` until `shutdown`.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    mut shutdown: Shutdown,
) -> Result<JoinHandle<()>, Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let local = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %local, "serving POST /kamikaze/{{nodeName}} and GET /healthz");
    Ok(tokio::spawn(async move {
        let server = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.wait().await });
        if let Err(error) = server.await {
            tracing::error!(%error, "HTTP server failed");
        }
    }))
}

fn answer(status: StatusCode, message: String) -> Response {
    (status, format!("{message}\n")).into_response()
}

async fn kamikaze_own<T: KamikazeTarget, G: Gate>(
    State((target, gate)): State<(T, G)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(node) = target.node_for(None) else {
        return answer(
            StatusCode::NOT_FOUND,
            "this agent plays many nodes: POST /kamikaze/{nodeName}".into(),
        );
    };
    handle(target, gate, node, &headers, &body).await
}

async fn kamikaze_named<T: KamikazeTarget, G: Gate>(
    State((target, gate)): State<(T, G)>,
    Path(node): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // A template whose placeholder was not substituted (`{nodeName}`) lands here: say so rather than "unknown".
    if !is_node_name(&node) {
        return answer(
            StatusCode::BAD_REQUEST,
            format!("{node:?} is not a node name"),
        );
    }
    let Some(node) = target.node_for(Some(&node)) else {
        return answer(
            StatusCode::NOT_FOUND,
            format!("this agent does not run node {node}"),
        );
    };
    handle(target, gate, node, &headers, &body).await
}

/// A request for `node`, which this agent plays: a well-formed body, then the gate, then the restart.
async fn handle<T: KamikazeTarget, G: Gate>(
    target: T,
    gate: G,
    node: String,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let kamikaze = match kamikaze_of(body) {
        Ok(kamikaze) => kamikaze,
        Err(message) => return answer(StatusCode::BAD_REQUEST, message),
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    if let Err(refusal) = gate.admit(&node, authorization).await {
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

/// The answer to a refused request; logged, since a refusal of the controller is an operator's problem and any other
/// one may be an attack.
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
                Some("good") if node == "node-0001" => Err(Refusal::NotDrained {
                    node: node.into(),
                    why: crate::contract::NotDrained::NotAdmitted,
                }),
                Some("good") => Ok(()),
                Some(_) => Err(Refusal::NotController {
                    user: "someone".into(),
                    controller: "controller".into(),
                }),
            }
        }
    }

    /// Sends one raw HTTP/1.1 request with `token` as bearer token (if any) and returns the status code and the
    /// answer (head and body).
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
        let router = router(recorder.clone(), FakeGate);
        let mut wait = shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move { wait.wait().await })
                .await
        });
        let good = Some("good");
        let code = |method, path, token, body| async move {
            request(addr, method, path, token, body).await.0
        };
        let told = format!(r#"{{"kamikaze": "{AT}"}}"#);

        assert_eq!(code("POST", "/kamikaze/node-0000", good, "").await, 202);
        assert_eq!(code("POST", "/kamikaze/node-0000", good, &told).await, 202);
        assert_eq!(code("POST", "/kamikaze", good, "").await, 202);
        assert_eq!(
            code("POST", "/kamikaze?node=node-0000", good, &told).await,
            202
        );
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
