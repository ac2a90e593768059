//! Fenced writes: the layer every write of the controller goes through (actions, status, Events,
//! reports), below the call sites, so that none can forget it. A write starts only while this
//! replica's term has at least the write timeout left, and is abandoned at that timeout: it is
//! answered or dropped before the term ends, and a standby takes over only `lease duration − renew
//! deadline` later (see [`crate::leadership::leader`]). Reads pass through.
//!
//! A refused write never reaches the network; its error is a [`NotLeader`], which callers tell from
//! a failure by [`never_sent`].

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Method, Request};
use tower::{BoxError, Layer, Service};

use crate::leadership::leader::{Leadership, NotLeader};

/// A write that was not answered within its timeout (the request may or may not have been carried
/// out).
#[derive(Debug, thiserror::Error)]
#[error("no answer within the write timeout ({0:?})")]
pub struct WriteTimedOut(pub Duration);

#[derive(Clone, Debug)]
pub struct FenceLayer {
    leadership: Leadership,
}

impl FenceLayer {
    pub fn new(leadership: Leadership) -> Self {
        Self { leadership }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fence<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Fence {
            inner,
            leadership: self.leadership.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Fence<S> {
    inner: S,
    leadership: Leadership,
}

impl<S, RequestBody> Service<Request<RequestBody>> for Fence<S>
where
    S: Service<Request<RequestBody>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        if !writes(request.method()) {
            let response = self.inner.call(request);
            return Box::pin(async move { response.await.map_err(Into::into) });
        }
        let timeout = self.leadership.write_timeout();
        // Checked here, as the request is handed to the connection, not where the call was decided.
        if let Err(not_leader) = self.leadership.ensure_for(timeout) {
            return Box::pin(async move { Err(not_leader.into()) });
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(timeout, response).await {
                Ok(answer) => answer.map_err(Into::into),
                // Dropping the call closes its connection (HTTP/1.1): nothing of it is sent
                // afterwards.
                Err(_) => Err(WriteTimedOut(timeout).into()),
            }
        })
    }
}

fn writes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether `error` is the fence's refusal: the request was never sent.
pub fn never_sent(error: &kube::Error) -> Option<&NotLeader> {
    match error {
        kube::Error::Service(source) => source.downcast_ref::<NotLeader>(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A service that counts the requests it was handed and answers after `delay`.
    fn counting(
        delay: Duration,
    ) -> (
        Arc<AtomicUsize>,
        impl Service<Request<()>, Response = &'static str, Error = BoxError, Future: Send + 'static>
        + Clone,
    ) {
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = sent.clone();
        let service = tower::service_fn(move |_: Request<()>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(delay).await;
                Ok::<_, BoxError>("answered")
            }
        });
        (sent, service)
    }

    #[tokio::test]
    async fn reads_pass_and_writes_pass_while_leading_for_long_enough() {
        let (sent, service) = counting(Duration::ZERO);
        let mut fenced = FenceLayer::new(Leadership::always()).layer(service);
        for method in [
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::DELETE,
            Method::PUT,
        ] {
            let request = Request::builder().method(method).body(()).unwrap();
            assert_eq!(fenced.call(request).await.unwrap(), "answered");
        }
        assert_eq!(sent.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn a_write_without_enough_term_left_is_never_sent_and_a_read_still_is() {
        let (sent, service) = counting(Duration::ZERO);
        let mut fenced = FenceLayer::new(Leadership::not_acquired()).layer(service);
        for method in [Method::POST, Method::PATCH, Method::DELETE, Method::PUT] {
            let request = Request::builder().method(method).body(()).unwrap();
            let error = fenced.call(request).await.unwrap_err();
            assert_eq!(
                error.downcast_ref::<NotLeader>(),
                Some(&NotLeader::NotAcquired)
            );
            let as_kube = kube::Error::Service(error);
            assert_eq!(never_sent(&as_kube), Some(&NotLeader::NotAcquired));
        }
        assert_eq!(
            sent.load(Ordering::SeqCst),
            0,
            "no write reached the service"
        );
        fenced
            .call(Request::get("/api").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(sent.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_write_is_abandoned_at_the_write_timeout() {
        let leadership = Leadership::always().with_write_timeout(Duration::from_millis(50));
        let (_, service) = counting(Duration::from_millis(500));
        let mut fenced = FenceLayer::new(leadership.clone()).layer(service);
        let error = fenced
            .call(Request::post("/api").body(()).unwrap())
            .await
            .unwrap_err();
        assert!(error.downcast_ref::<WriteTimedOut>().is_some(), "{error}");
        assert!(never_sent(&kube::Error::Service(error)).is_none());
        // A read is not bounded by it.
        let (_, slow) = counting(Duration::from_millis(100));
        let mut fenced = FenceLayer::new(leadership).layer(slow);
        fenced
            .call(Request::get("/api").body(()).unwrap())
            .await
            .unwrap();
    }
}
