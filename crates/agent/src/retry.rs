//! Retrying apiserver requests that failed for a passing reason (timeout, connection, 5xx,
//! throttling), so that one dropped request never loses a restart.

use std::future::Future;
use std::time::Duration;

use crate::client::REQUEST_TIMEOUT;

/// Attempts before giving up. With the backoff below that is about a minute: long enough to ride
/// out an apiserver restart, short enough that a persistent failure is reported while the
/// controller still waits for the node.
const ATTEMPTS: u32 = 8;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Runs `attempt` until it succeeds, each attempt bounded by [`REQUEST_TIMEOUT`]. `attempt` turns
/// the answers it expects (404, 409, …) into `Ok`; every `Err` counts as passing. Returns the last
/// error after [`ATTEMPTS`].
pub async fn with_retries<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut backoff = FIRST_BACKOFF;
    let mut last_error = String::new();
    for n in 1..=ATTEMPTS {
        match tokio::time::timeout(REQUEST_TIMEOUT, attempt()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) => last_error = error.to_string(),
            Err(_) => last_error = format!("no answer within {REQUEST_TIMEOUT:?}"),
        }
        if n < ATTEMPTS {
            tracing::warn!(attempt = n, error = %last_error, "{what} failed; retrying in {backoff:?}");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
    Err(last_error)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn transient() -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("overloaded", "TooManyRequests").with_code(429),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn retries_until_success() {
        let calls = AtomicU32::new(0);
        let result = with_retries("test", || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => Err(transient()),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(result, Ok(2));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_with_the_last_error() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retries("test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(transient())
        })
        .await;
        assert!(result.unwrap_err().contains("overloaded"));
        assert_eq!(calls.load(Ordering::SeqCst), ATTEMPTS);
    }
}
