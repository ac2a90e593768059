//! The one polling loop of the harness and the tests, and how often it looks by default.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a wait looks unless it says otherwise: often enough that a test sees a change within a
/// moment, seldom enough to leave the apiserver to the controller.
pub const POLL: Duration = Duration::from_millis(250);

/// Calls `check` every `every` until it answers `Ok`, and returns that; once `timeout` has passed,
/// its last `Err`. The one polling loop of the harness and the tests: each caller panics its own
/// way, with what it knows.
pub async fn poll<T, E, F, Fut>(timeout: Duration, every: Duration, mut check: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(value) => return Ok(value),
            Err(last) => last,
        };
        if Instant::now() > deadline {
            return Err(last);
        }
        tokio::time::sleep(every).await;
    }
}
