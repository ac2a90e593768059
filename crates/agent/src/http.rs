//! The HTTP endpoint of the `Http` kamikaze mechanism (`POST /kamikaze/{nodeName}`, or `POST /kamikaze` for the
//! agent's own node) and `GET /healthz`, shared by `run` and `simulate`.

use std::net::SocketAddr;

use axum::Router;
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
    /// A request for `node`, or for the agent's own node when `None`. Must not block: it only schedules the restart.
    fn kamikaze(&self, node: Option<&str>) -> Answer;
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

async fn kamikaze_own<T: KamikazeTarget>(State(target): State<T>) -> (StatusCode, String) {
    match target.kamikaze(None) {
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
) -> (StatusCode, String) {
    // A template whose placeholder was not substituted (`{nodeName}`) lands here: say so rather than "unknown".
    if !is_node_name(&node) {
        return (
            StatusCode::BAD_REQUEST,
            format!("{node:?} is not a node name\n"),
        );
    }
    match target.kamikaze(Some(&node)) {
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

    /// Records requests; knows only `node-0000`.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Option<String>>>>);

    impl KamikazeTarget for Recorder {
        fn kamikaze(&self, node: Option<&str>) -> Answer {
            self.0.lock().unwrap().push(node.map(str::to_owned));
            match node {
                None | Some("node-0000") => Answer::Accepted,
                Some(_) => Answer::UnknownNode,
            }
        }
    }

    /// Sends one raw HTTP/1.1 request and returns the status code.
    async fn request(addr: SocketAddr, method: &str, path: &str) -> u16 {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {response:?}"))
    }

    #[tokio::test]
    async fn routes_answer_by_method_path_and_node() {
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

        assert_eq!(request(addr, "POST", "/kamikaze/node-0000").await, 202);
        assert_eq!(request(addr, "POST", "/kamikaze/node-0009").await, 404);
        assert_eq!(request(addr, "POST", "/kamikaze").await, 202);
        assert_eq!(request(addr, "POST", "/kamikaze/%7BnodeName%7D").await, 400);
        assert_eq!(request(addr, "GET", "/kamikaze/node-0000").await, 405);
        assert_eq!(request(addr, "GET", "/healthz").await, 200);
        assert_eq!(request(addr, "POST", "/other").await, 404);
        assert_eq!(
            *recorder.0.lock().unwrap(),
            [
                Some("node-0000".to_owned()),
                Some("node-0009".to_owned()),
                None
            ],
            "only well-formed POSTs reach the target"
        );

        trigger.fire();
        server.await.unwrap().unwrap();
    }
}
