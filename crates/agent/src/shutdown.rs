//! Clean shutdown on SIGTERM (the service manager, a Pod's deletion) or SIGINT (Ctrl-C): every
//! long-running part waits on one clonable [`Shutdown`].

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::Error;

/// Resolves once shutdown was requested. Clones share the request.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// Requests shutdown.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

impl Shutdown {
    pub fn new() -> (Self, Trigger) {
        let (sender, receiver) = watch::channel(false);
        (Self(receiver), Trigger(sender))
    }

    /// A [`Shutdown`] requested by the first SIGTERM or SIGINT.
    pub fn on_signals() -> Result<Self, Error> {
        let mut terminate = signal(SignalKind::terminate()).map_err(Error::Signal)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::Signal)?;
        let (shutdown, trigger) = Self::new();
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            };
            tracing::info!(signal = name, "shutting down");
            trigger.fire();
        });
        Ok(shutdown)
    }

    /// Waits for the request. A dropped [`Trigger`] counts as one: nobody is left to ask, so
    /// waiting is pointless.
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|requested| *requested).await;
    }
}

impl Trigger {
    pub fn fire(&self) {
        // Only fails when every Shutdown is gone, and then nobody waits.
        let _ = self.0.send(true);
    }
}
