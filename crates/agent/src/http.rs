//! The HTTP endpoint of the `Http` kamikaze mechanism (`POST /kamikaze/{nodeName}`, or `POST /kamikaze` for the
//! agent's own node) and `GET /healthz`, shared by `run` and `simulate`.
//!
//! The controller's POST carries `{"kamikaze": "<RFC 3339 time>"}`: the value it then writes as the kamikaze
//! annotation, which the executor records as obeyed so that the annotation is not obeyed a second time. A POST
//! without a body (by hand, or from an older controller) is accepted too.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::Error;
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
    /// A request for `node`, or for the agent's own node when `None`; `kamikaze`: the kamikaze's value from the body,
    /// if it had one. Must not block: it only schedules the restart.
    fn kamikaze(&self, node: Option<&str>, kamikaze: Option<&str>) -> Answer;
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

/// The routes, on top of `target`.
pub fn router<T: KamikazeTarget>(target: T) -> Router {
    Router::new()
        .route("/kamikaze", post(kamikaze_own::<T>))
        .route("/kamikaze/{node}", post(kamikaze_named::<T>))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(target)
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

fn bad_request(message: String) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, format!("{message}\n"))
}

async fn kamikaze_own<T: KamikazeTarget>(
    State(target): State<T>,
    body: Bytes,
) -> (StatusCode, String) {
    let kamikaze = match kamikaze_of(&body) {
        Ok(kamikaze) => kamikaze,
        Err(message) => return bad_request(message),
    };
    match target.kamikaze(None, kamikaze.as_deref()) {
        Answer::Accepted => accepted("this node"),
        Answer::UnknownNode => (
            StatusCode::NOT_FOUND,
            "this agent plays many nodes: POST /kamikaze/{nodeName}\n".to_owned(),
        ),
    }
}

async fn kamikaze_named<T: KamikazeTarget>(
    State(target): State<T>,
    Path(node): Path<String>,
    body: Bytes,
) -> (StatusCode, String) {
    // A template whose placeholder was not substituted (`{nodeName}`) lands here: say so rather than "unknown".
    if !is_node_name(&node) {
        return bad_request(format!("{node:?} is not a node name"));
    }
    let kamikaze = match kamikaze_of(&body) {
        Ok(kamikaze) => kamikaze,
        Err(message) => return bad_request(message),
    };
    match target.kamikaze(Some(&node), kamikaze.as_deref()) {
        Answer::Accepted => accepted(&node),
        Answer::UnknownNode => (
            StatusCode::NOT_FOUND,
            format!("this agent does not run node {node}\n"),
        ),
    }
}

fn accepted(node: &str) -> (StatusCode, String) {
    (
        StatusCode::ACCEPTED,
        format!("kamikaze accepted: restarting the executor of {node}\n"),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const AT: &str = "2025-01-01T00:00:00Z";

    /// Records requests; knows only `node-0000`.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Request>>>);

    /// (node, kamikaze) of one request.
    type Request = (Option<String>, Option<String>);

    impl KamikazeTarget for Recorder {
        fn kamikaze(&self, node: Option<&str>, kamikaze: Option<&str>) -> Answer {
            self.0
                .lock()
                .unwrap()
                .push((node.map(str::to_owned), kamikaze.map(str::to_owned)));
            match node {
                None | Some("node-0000") => Answer::Accepted,
                Some(_) => Answer::UnknownNode,
            }
        }
    }

    /// Sends one raw HTTP/1.1 request and returns the status code and the body of the answer.
    async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
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
        let answer = response
            .split_once("\r\n\r\n")
            .map(|(_, answer)| answer.to_owned())
            .unwrap_or_default();
        (code, answer)
    }

    #[tokio::test]
    async fn routes_answer_by_method_path_node_and_body() {
        let recorder = Recorder::default();
        let (shutdown, trigger) = Shutdown::new();
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = router(recorder.clone());
        let mut wait = shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move { wait.wait().await })
                .await
        });
        let code = |method, path, body| async move { request(addr, method, path, body).await.0 };
        let told = format!(r#"{{"kamikaze": "{AT}"}}"#);

        assert_eq!(code("POST", "/kamikaze/node-0000", "").await, 202);
        assert_eq!(code("POST", "/kamikaze/node-0000", &told).await, 202);
        assert_eq!(code("POST", "/kamikaze/node-0009", &told).await, 404);
        assert_eq!(code("POST", "/kamikaze", "").await, 202);
        assert_eq!(code("POST", "/kamikaze?node=node-0000", &told).await, 202);
        assert_eq!(code("POST", "/kamikaze/%7BnodeName%7D", "").await, 400);
        assert_eq!(code("GET", "/kamikaze/node-0000", "").await, 405);
        assert_eq!(code("GET", "/healthz", "").await, 200);
        assert_eq!(code("POST", "/other", "").await, 404);
        let (status, answer) = request(addr, "POST", "/kamikaze/node-0000", "{\"at\": 1}").await;
        assert_eq!(status, 400);
        assert!(
            answer.contains(r#"{"kamikaze": "<RFC 3339 time>"}"#),
            "the answer says what is expected: {answer:?}"
        );
        assert_eq!(code("POST", "/kamikaze", "kamikaze").await, 400);
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            *recorder.0.lock().unwrap(),
            [
                (some("node-0000"), None),
                (some("node-0000"), some(AT)),
                (some("node-0009"), some(AT)),
                (None, None),
                (None, some(AT)),
            ],
            "only well-formed POSTs reach the target, with the kamikaze of their body"
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
