//! What each watch last delivered, read at the HTTP layer of the watches' client: kube's watcher
//! consumes bookmarks without yielding them, and a watch whose connection stalls without an error
//! (a half-open TCP connection behind a load balancer, a hung apiserver) yields nothing at all. A
//! response that starts (a watch the server accepted, which it ends after
//! [`crate::observe::stores::WATCH_TIMEOUT`]) and each data frame (an event, a bookmark, a list
//! page) show that the path to the apiserver works; data frames alone show what the cache has
//! caught up with.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tower::{Layer, Service};

/// A delivery: on this process's monotonic clock (for bounds), and on the wall clock (to compare
/// with the time an eviction was answered, and for reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub at: Instant,
    pub wall: DateTime<Utc>,
}

impl Delivery {
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            wall: Utc::now(),
        }
    }
}

/// The last deliveries of every collection the watches' client reads, by its path (such as
/// `/api/v1/pods`): list pages and watch events alike.
#[derive(Clone, Debug, Default)]
pub struct Deliveries {
    last: Arc<Mutex<HashMap<String, Last>>>,
}

/// A path's last response started and last data frame.
#[derive(Clone, Copy, Debug)]
struct Last {
    response: Delivery,
    data: Option<Delivery>,
}

impl Deliveries {
    /// The layer that records the deliveries of a client's responses here.
    pub fn layer(&self) -> DeliveryLayer {
        DeliveryLayer {
            deliveries: self.clone(),
        }
    }

    /// The last sign of life on `path`: a response started or a data frame.
    pub fn last(&self, path: &str) -> Option<Delivery> {
        let last = self.lock().get(path).copied()?;
        Some(match last.data {
            Some(data) if data.at > last.response.at => data,
            _ => last.response,
        })
    }

    /// The last data frame on `path`: what the cache has caught up with.
    pub fn last_data(&self, path: &str) -> Option<Delivery> {
        self.lock().get(path)?.data
    }

    fn record(&self, path: &str, data: bool) {
        let now = Delivery::now();
        let mut last = self.lock();
        match last.get_mut(path) {
            Some(entry) if data => entry.data = Some(now),
            Some(entry) => entry.response = now,
            None => {
                let data = data.then_some(now);
                last.insert(
                    path.to_owned(),
                    Last {
                        response: now,
                        data,
                    },
                );
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Last>> {
        // A poisoned lock only means a panic elsewhere while holding it; the map is always
        // consistent.
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// See [`Deliveries::layer`].
#[derive(Clone, Debug)]
pub struct DeliveryLayer {
    deliveries: Deliveries,
}

impl<S> Layer<S> for DeliveryLayer {
    type Service = DeliveryService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeliveryService {
            inner,
            deliveries: self.deliveries.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct DeliveryService<S> {
    inner: S,
    deliveries: Deliveries,
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for DeliveryService<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
    S::Future: Send + 'static,
{
    type Response = Response<Tapped<ResponseBody>>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let deliveries = self.deliveries.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            deliveries.record(&path, false);
            Ok(response.map(|inner| Tapped {
                inner: Box::pin(inner),
                path,
                deliveries,
            }))
        })
    }
}

/// A response body that records each data frame it yields as a delivery on its path.
pub struct Tapped<B> {
    inner: Pin<Box<B>>,
    path: String,
    deliveries: Deliveries,
}

impl<B: Body> Body for Tapped<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = this.inner.as_mut().poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && frame.is_data()
        {
            this.deliveries.record(&this.path, true);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, StreamBody};

    #[tokio::test]
    async fn a_response_and_each_of_its_data_frames_are_deliveries_on_its_path() {
        let deliveries = Deliveries::default();
        let service = tower::service_fn(|_: Request<()>| async {
            let frames = futures::stream::iter([
                Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(
                    b"{\"type\":\"BOOKMARK\"}\n",
                ))),
                Ok(Frame::data(Bytes::from_static(b"{\"type\":\"ADDED\"}\n"))),
            ]);
            Ok::<_, std::convert::Infallible>(Response::new(StreamBody::new(frames)))
        });
        let mut tapped = deliveries.layer().layer(service);
        let request = Request::get("/api/v1/pods?watch=true").body(()).unwrap();
        let before = Instant::now();
        let response = tapped.call(request).await.unwrap();
        let started = deliveries.last("/api/v1/pods").expect("a response started");
        assert!(started.at >= before);
        assert_eq!(
            deliveries.last_data("/api/v1/pods"),
            None,
            "nothing read yet"
        );
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap();
        assert!(first.is_data());
        let delivered = deliveries.last_data("/api/v1/pods").expect("a data frame");
        assert!(delivered.at >= started.at);
        assert_eq!(deliveries.last("/api/v1/pods"), Some(delivered));
        body.frame().await.unwrap().unwrap();
        assert!(deliveries.last_data("/api/v1/pods").unwrap().at >= delivered.at);
        assert!(body.frame().await.is_none());
        assert_eq!(deliveries.last("/api/v1/nodes"), None);
    }
}
