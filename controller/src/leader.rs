//! Leader election on a `coordination.k8s.io` Lease, so that of several replicas exactly one acts.
//!
//! The holder renews the Lease every `lease_duration / 3`; another replica takes over only once the Lease has not
//! been renewed for `lease_duration`. Every write carries the Lease's resourceVersion, so two candidates can never
//! both win. A leader that cannot renew steps down on its own before its claim could have expired.

use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;

use k8sm_view::time::{from_timestamp, to_micro_time};

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
}

/// Whether this replica leads now. Acting code checks it right before every pass and every action.
#[derive(Debug, Clone)]
pub struct Leadership {
    receiver: watch::Receiver<bool>,
    /// Held when leadership is fixed (election off), so the channel never closes.
    _fixed: Option<std::sync::Arc<watch::Sender<bool>>>,
}

impl Leadership {
    /// Always the leader (leader election off).
    pub fn always() -> Self {
        let (sender, receiver) = watch::channel(true);
        Self {
            receiver,
            _fixed: Some(std::sync::Arc::new(sender)),
        }
    }

    pub fn is_leader(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Resolves when leadership changes (never, when it is fixed).
    pub async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Starts the election loop in the background.
pub fn start(client: Client, config: LeaseConfig) -> Leadership {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let renew_every = config.lease_duration / 3;
        let mut last_renewal: Option<Instant> = None;
        loop {
            let mut sleep_for = renew_every
                .min(Duration::from_secs(2))
                .max(Duration::from_millis(200));
            match try_acquire_or_renew(&api, &config).await {
                Ok(Round::Holding) => last_renewal = Some(Instant::now()),
                Ok(Round::HeldByOther { expires_in }) => {
                    last_renewal = None;
                    // Try again right when the holder's claim lapses, so a dead leader is replaced within the
                    // lease duration rather than up to one polling interval later.
                    if let Some(expires_in) = expires_in {
                        sleep_for = sleep_for.min(expires_in + Duration::from_millis(50));
                    }
                }
                Err(error) => tracing::warn!(%error, "leader election: could not reach the Lease"),
            }
            // Step down a margin before the claim expires for the others.
            let leading =
                last_renewal.is_some_and(|at| at.elapsed() < config.lease_duration.mul_f32(0.8));
            if *tx.borrow() != leading {
                tracing::info!(identity = %config.identity, leading, "leadership changed");
                let _ = tx.send(leading);
            }
            tokio::time::sleep(sleep_for).await;
        }
    });
    Leadership {
        receiver: rx,
        _fixed: None,
    }
}

/// What one round of the election found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// This replica holds the Lease (acquired or renewed).
    Holding,
    /// Another replica holds it; its claim lapses in `expires_in` unless renewed (`None`: unknown, or a lost race).
    HeldByOther { expires_in: Option<Duration> },
}

/// One round: acquire the Lease if it is free or expired, renew it if held.
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaseConfig,
) -> Result<Round, kube::Error> {
    let now_utc = Utc::now();
    let now = to_micro_time(now_utc);
    let duration_seconds = config.lease_duration.as_secs().max(1) as i32;
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(duration_seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return conflict_is_false(api.create(&PostParams::default(), &lease).await);
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder != config.identity {
        let expires_at = match (&spec.renew_time, spec.lease_duration_seconds) {
            (Some(renewed), Some(seconds)) => {
                Some(from_timestamp(&renewed.0) + chrono::Duration::seconds(i64::from(seconds)))
            }
            _ => None,
        };
        let expired = expires_at.is_none_or(|at| at < now_utc);
        if !holder.is_empty() && !expired {
            let expires_in = expires_at.and_then(|at| (at - now_utc).to_std().ok());
            return Ok(Round::HeldByOther { expires_in });
        }
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(duration_seconds);
    // `replace` sends the resourceVersion we read: a concurrent writer makes this fail with 409.
    conflict_is_false(
        api.replace(&config.name, &PostParams::default(), &lease)
            .await,
    )
}

fn conflict_is_false(result: Result<Lease, kube::Error>) -> Result<Round, kube::Error> {
    match result {
        Ok(_) => Ok(Round::Holding),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            Ok(Round::HeldByOther { expires_in: None })
        }
        Err(error) => Err(error),
    }
}
