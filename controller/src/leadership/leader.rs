//! Leader election on a `coordination.k8s.io` Lease, in the manner of client-go's `leaderelection`:
//! of several replicas at most one acts at any moment, also when a replica freezes, its Lease calls
//! hang, or its clock is off (docs/design.md §9). Leadership is a deadline on clocks that count
//! through a pause, checked before every write ([`Leadership::ensure_for`]); another holder's claim
//! expires by this replica's own observation, never by the holder's timestamps. Why no crate does
//! this instead: docs/decisions/0004-leader-election.md.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use k8sm_view::time::to_micro_time;

use crate::leadership::term_clock::Reading;

/// The longest pause between two rounds: how soon a candidate sees a released Lease.
const MAX_RETRY_PERIOD: Duration = Duration::from_secs(1);
const MIN_RETRY_PERIOD: Duration = Duration::from_millis(100);
/// Attempts to clear the Lease on release when it changes under us (our own renewal still landing,
/// say).
const RELEASE_ATTEMPTS: usize = 3;
/// The longest a write may take, when nothing shorter is needed: also the bound without leader
/// election.
pub const MAX_WRITE_TIMEOUT: Duration = Duration::from_secs(15);
/// The shortest write timeout a configuration may imply: shorter, a loaded apiserver would time out
/// ordinary writes.
const MIN_WRITE_TIMEOUT: Duration = Duration::from_millis(500);

/// The election's settings, validated: [`LeaseConfig::new`].
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// How long a record must stand unchanged before a candidate may take over.
    pub lease_duration: Duration,
    /// How long after the start of its last successful renewal round the leader stops acting.
    pub renew_deadline: Duration,
}

impl LeaseConfig {
    /// `renew_deadline` defaults to two thirds of `lease_duration`. Fails when the leader could
    /// still act after a candidate may take over, or when a failed renewal could not be retried
    /// before the deadline.
    pub fn new(
        namespace: String,
        name: String,
        identity: String,
        lease_duration: Duration,
        renew_deadline: Option<Duration>,
    ) -> Result<Self, String> {
        let renew_deadline = renew_deadline.unwrap_or(lease_duration * 2 / 3);
        let config = Self {
            namespace,
            name,
            identity,
            lease_duration,
            renew_deadline,
        };
        if lease_duration < Duration::from_secs(1) {
            return Err(format!(
                "--leader-elect-lease-duration ({lease_duration:?}) must be at least 1s"
            ));
        }
        if renew_deadline >= lease_duration {
            return Err(format!(
                "--leader-elect-renew-deadline ({renew_deadline:?}) must be shorter than --leader-elect-lease-duration \
                 ({lease_duration:?}): a standby may take over once the lease duration has passed, so the leader must \
                 have stopped before"
            ));
        }
        if renew_deadline < config.retry_period() * 2 {
            return Err(format!(
                "--leader-elect-renew-deadline ({renew_deadline:?}) must be at least twice the retry period ({:?}), \
                 so that a failed renewal can be tried again before leadership ends",
                config.retry_period()
            ));
        }
        if config.write_timeout() < MIN_WRITE_TIMEOUT {
            return Err(format!(
                "--leader-elect-lease-duration ({lease_duration:?}) and --leader-elect-renew-deadline \
                 ({renew_deadline:?}) leave writes {:?}, less than {MIN_WRITE_TIMEOUT:?}: a write must be answered \
                 within four fifths of the difference between the two, and within the renew deadline less two retry \
                 periods; lengthen the lease duration",
                config.write_timeout()
            ));
        }
        Ok(config)
    }

    /// How long one write may take. A write starts only while the term has this much left, so it is
    /// answered or abandoned before the deadline; and it stays below `lease_duration −
    /// renew_deadline` (four fifths of it), so that even a write checked only at the deadline
    /// ends before a standby may take over. It also leaves room in a term renewed on time: the
    /// term has `renew_deadline` less one retry period and one round left at worst.
    pub fn write_timeout(&self) -> Duration {
        let margin = (self.lease_duration - self.renew_deadline) * 4 / 5;
        let in_term = self.renew_deadline.saturating_sub(self.retry_period() * 2);
        MAX_WRITE_TIMEOUT.min(margin).min(in_term)
    }

    /// The pause between rounds: the leader renews this often, and a candidate looks at the Lease
    /// this often.
    pub fn retry_period(&self) -> Duration {
        (self.lease_duration / 6).clamp(MIN_RETRY_PERIOD, MAX_RETRY_PERIOD)
    }

    /// The longest one round (or the release) may take.
    fn round_timeout(&self) -> Duration {
        self.renew_deadline / 2
    }

    /// `leaseDurationSeconds` as written: rounded up, so that candidates never wait less than this
    /// replica promised.
    fn lease_seconds(&self) -> i32 {
        let seconds =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(seconds).unwrap_or(i32::MAX)
    }
}

/// Why this replica may not write now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotLeader {
    #[error("not the leader (deadline passed {:.1}s ago)", .0.as_secs_f64())]
    DeadlinePassed(Duration),
    #[error("not the leader (this replica has not acquired the Lease)")]
    NotAcquired,
    #[error("not the leader (another replica holds the Lease)")]
    Superseded,
    #[error("not the leader (stepped down to release the Lease)")]
    Released,
    #[error(
        "not the leader for long enough (the term ends in {:.1}s, a write may take {:.1}s)",
        left.as_secs_f64(),
        needed.as_secs_f64()
    )]
    TooLittleLeft { left: Duration, needed: Duration },
}

/// Whether this replica may act now: a cheap check ([`Leadership::ensure`]) made right before every
/// write.
#[derive(Debug, Clone)]
pub struct Leadership {
    shared: Arc<Shared>,
    changes: watch::Receiver<bool>,
    /// See [`LeaseConfig::write_timeout`].
    write_timeout: Duration,
}

#[derive(Debug)]
struct Shared {
    /// `None`: election off, always the leader.
    term: Option<Mutex<Tenure>>,
    /// What the election task last reported (`true`: leading); wakes the loop when leadership is
    /// won.
    changes: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Leadership {
    /// Always the leader (leader election off).
    pub fn always() -> Self {
        let (changes, receiver) = watch::channel(true);
        let (stop, _) = watch::channel(false);
        Self {
            shared: Arc::new(Shared {
                term: None,
                changes,
                stop,
                task: Mutex::new(None),
            }),
            changes: receiver,
            write_timeout: MAX_WRITE_TIMEOUT,
        }
    }

    /// A replica that has not acquired the Lease (and never will: no election runs).
    #[cfg(test)]
    pub fn not_acquired() -> Self {
        let (changes, receiver) = watch::channel(false);
        let (stop, _) = watch::channel(false);
        Self {
            shared: Arc::new(Shared {
                term: Some(Mutex::new(Tenure::default())),
                changes,
                stop,
                task: Mutex::new(None),
            }),
            changes: receiver,
            write_timeout: MAX_WRITE_TIMEOUT,
        }
    }

    #[cfg(test)]
    pub fn with_write_timeout(mut self, write_timeout: Duration) -> Self {
        self.write_timeout = write_timeout;
        self
    }

    /// `Ok` while this process's leadership deadline lies ahead. The answer holds for that instant
    /// only: a write checks [`Leadership::ensure_for`].
    pub fn ensure(&self) -> Result<(), NotLeader> {
        self.ensure_for(Duration::ZERO)
    }

    /// `Ok` while this process's term has at least `needed` left: a write bounded by `needed` that
    /// starts now is answered or abandoned within the term.
    pub fn ensure_for(&self, needed: Duration) -> Result<(), NotLeader> {
        match &self.shared.term {
            None => Ok(()),
            Some(term) => lock(term).term.check(Reading::now(), needed),
        }
    }

    /// How long a write may take (see [`LeaseConfig::write_timeout`]).
    pub fn write_timeout(&self) -> Duration {
        self.write_timeout
    }

    pub fn is_leader(&self) -> bool {
        self.ensure().is_ok()
    }

    /// While leading, which of this process's terms it is. Another replica may have led between two
    /// terms, so what a term read from the cluster is read again in the next.
    pub fn term(&self) -> Option<u64> {
        match &self.shared.term {
            None => Some(0),
            Some(term) => lock(term).current(Reading::now()),
        }
    }

    /// Resolves when the election task reports a change (never, when leadership is fixed).
    /// Leadership can also end without a report, when the deadline passes:
    /// [`Leadership::ensure`] is what decides.
    pub async fn changed(&mut self) {
        // The sender lives in `shared`, which `self` holds: this never fails.
        let _ = self.changes.changed().await;
    }

    /// Ends leadership at once (every later [`Leadership::ensure`] fails), stops the election and,
    /// if this replica holds the Lease, writes it with no holder so that a standby acquires it
    /// at once. Time-boxed.
    pub async fn release(&self) {
        let Some(term) = &self.shared.term else {
            return;
        };
        lock(term).term.release();
        let _ = self.shared.stop.send(true);
        let task = lock(&self.shared.task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; a poisoned one still holds a consistent value.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// This replica's term: until when it may act.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Term {
    #[default]
    NotAcquired,
    /// Leading until this moment (on both clocks of [`Reading`]).
    Until(Reading),
    /// A round found another holder.
    Superseded,
    /// Stepped down for good, to release the Lease.
    Released,
}

impl Term {
    /// `Ok` when the term has at least `needed` left at `now`.
    fn check(&self, now: Reading, needed: Duration) -> Result<(), NotLeader> {
        match *self {
            Self::Until(deadline) => match now.until(deadline) {
                Ok(left) if left >= needed => Ok(()),
                Ok(left) => Err(NotLeader::TooLittleLeft { left, needed }),
                Err(ago) => Err(NotLeader::DeadlinePassed(ago)),
            },
            Self::NotAcquired => Err(NotLeader::NotAcquired),
            Self::Superseded => Err(NotLeader::Superseded),
            Self::Released => Err(NotLeader::Released),
        }
    }

    /// A round that started at `round_started` wrote the Lease as its holder.
    fn renewed(&mut self, round_started: Reading, renew_deadline: Duration) {
        if *self != Self::Released {
            *self = Self::Until(round_started.plus(renew_deadline));
        }
    }

    /// A round found another holder (its claim was legitimate only if this term had ended; or an
    /// operator deleted the Lease and a candidate created it afresh): stop now rather than at
    /// the deadline.
    fn lost(&mut self) {
        if *self != Self::Released {
            *self = Self::Superseded;
        }
    }

    fn release(&mut self) {
        *self = Self::Released;
    }
}

/// This replica's term, and how many it has begun.
#[derive(Debug, Default)]
struct Tenure {
    term: Term,
    begun: u64,
}

impl Tenure {
    /// A round that started at `round_started` wrote the Lease as its holder: a new term unless the
    /// last one still held when the round started.
    fn renewed(&mut self, round_started: Reading, renew_deadline: Duration) {
        let held = self.term.check(round_started, Duration::ZERO).is_ok();
        self.term.renewed(round_started, renew_deadline);
        if !held && matches!(self.term, Term::Until(_)) {
            self.begun += 1;
        }
    }

    /// The number of the term under way at `now`, if any.
    fn current(&self, now: Reading) -> Option<u64> {
        self.term
            .check(now, Duration::ZERO)
            .ok()
            .map(|()| self.begun)
    }
}

/// The parts of a Lease that tell one record from the next.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    /// Empty when nobody holds it.
    holder: String,
    /// As written by the holder: compared with the next record, never with this replica's clock.
    renew_time: Option<String>,
    resource_version: Option<String>,
    /// How long the holder promised its claim lasts without renewal.
    lease_duration: Duration,
}

impl Record {
    fn of(lease: &Lease, config: &LeaseConfig) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default(),
            renew_time: spec.and_then(|s| s.renew_time.as_ref().map(|t| t.0.to_string())),
            resource_version: lease.resource_version(),
            lease_duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .map_or(config.lease_duration, |s| {
                    Duration::from_secs(u64::try_from(s).unwrap_or(0))
                }),
        }
    }
}

/// The record this replica last saw, and when it first saw it (on its own monotonic clock).
#[derive(Debug, Default)]
struct Observation {
    seen: Option<(Record, Instant)>,
}

impl Observation {
    /// Notes the record read at `now`; the record's age restarts only when it differs from the last
    /// one seen.
    fn see(&mut self, record: Record, now: Instant) {
        if self.seen.as_ref().is_none_or(|(seen, _)| *seen != record) {
            self.seen = Some((record, now));
        }
    }

    /// How long another replica's claim still stands at `now`, judged by when this replica first
    /// saw the record: `None` when nobody else holds a standing claim (no holder, this replica,
    /// or a record unchanged for its whole lease duration).
    fn claim_of_other(&self, identity: &str, now: Instant) -> Option<Duration> {
        let (record, seen_at) = self.seen.as_ref()?;
        if record.holder.is_empty() || record.holder == identity {
            return None;
        }
        (*seen_at + record.lease_duration)
            .checked_duration_since(now)
            .filter(|left| !left.is_zero())
    }
}

/// Starts the election in the background.
pub fn start(client: Client, config: LeaseConfig) -> Leadership {
    let (changes, receiver) = watch::channel(false);
    let (stop, stopping) = watch::channel(false);
    let shared = Arc::new(Shared {
        term: Some(Mutex::new(Tenure::default())),
        changes,
        stop,
        task: Mutex::new(None),
    });
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let write_timeout = config.write_timeout();
    let task = tokio::spawn(elect(api, config, shared.clone(), stopping));
    *lock(&shared.task) = Some(task);
    Leadership {
        shared,
        changes: receiver,
        write_timeout,
    }
}

/// What one round found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Round {
    /// This replica holds the Lease now; `from`: the previous holder, when it was just acquired.
    Holding { from: Option<String> },
    /// Another replica's claim stands; this replica's next chance comes in `expires_in`.
    HeldByOther {
        holder: String,
        expires_in: Duration,
    },
    /// Someone wrote the Lease between our read and our write: nothing won.
    Conflict,
}

async fn elect(
    api: Api<Lease>,
    config: LeaseConfig,
    shared: Arc<Shared>,
    mut stopping: watch::Receiver<bool>,
) {
    let term = shared.term.as_ref().expect("an elected term");
    let retry = config.retry_period();
    let mut observed = Observation::default();
    // Whether the Lease may carry this replica's name: then it is cleared on release.
    let mut may_hold = false;
    let mut leading = false;
    // Logs and announces a change of leadership; called before each round too, so that a process
    // that wakes from a freeze says at once that its deadline passed (its writes were refused
    // from that moment on anyway).
    let report = |leading: &mut bool| {
        let now = lock(term).term.check(Reading::now(), Duration::ZERO);
        if now.is_ok() != *leading {
            *leading = now.is_ok();
            match &now {
                Ok(()) => tracing::info!(identity = %config.identity, "leading"),
                Err(why) => tracing::warn!(identity = %config.identity, "stopped leading: {why}"),
            }
            shared.changes.send_replace(*leading);
        }
    };
    loop {
        report(&mut leading);
        let started = Reading::now();
        let round =
            tokio::time::timeout(config.round_timeout(), round(&api, &config, &mut observed));
        let outcome = tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => break,
            outcome = round => outcome,
        };
        let mut sleep_for = retry;
        match outcome {
            Ok(Ok(Round::Holding { from })) => {
                may_hold = true;
                lock(term).renewed(started, config.renew_deadline);
                if let Some(from) = from {
                    tracing::info!(identity = %config.identity, previous = %from, "acquired the Lease");
                }
            }
            Ok(Ok(Round::HeldByOther { holder, expires_in })) => {
                may_hold = false;
                lock(term).term.lost();
                // Try again right when the claim lapses (by our own observation), not up to a
                // period later.
                sleep_for = retry.min(expires_in + Duration::from_millis(10));
                tracing::debug!(%holder, ?expires_in, "the Lease is held by another replica");
            }
            Ok(Ok(Round::Conflict)) => {
                tracing::debug!("the Lease changed between read and write; trying again")
            }
            Ok(Err(error)) => tracing::warn!(%error, "leader election: the Lease round failed"),
            Err(_) => tracing::warn!(
                timeout = ?config.round_timeout(),
                "leader election: the Lease round did not finish in time"
            ),
        }
        report(&mut leading);
        tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => break,
            _ = tokio::time::sleep(sleep_for) => {}
        }
    }
    shared.changes.send_replace(false);
    if may_hold {
        match tokio::time::timeout(config.round_timeout(), release(&api, &config)).await {
            Ok(Ok(true)) => tracing::info!(identity = %config.identity, "released the Lease"),
            Ok(Ok(false)) => tracing::info!("the Lease was not ours to release"),
            Ok(Err(error)) => tracing::warn!(%error, "could not release the Lease"),
            Err(_) => tracing::warn!(
                timeout = ?config.round_timeout(),
                "releasing the Lease did not finish in time; a standby takes over once it expires"
            ),
        }
    }
}

/// One round: acquire the Lease if nobody holds a standing claim on it, renew it if this replica
/// holds it.
async fn round(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observed: &mut Observation,
) -> Result<Round, kube::Error> {
    let now = to_micro_time(Utc::now());
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(config.lease_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return written(
            api.create(&crate::leadership::write_params::post(), &lease)
                .await,
            config,
            observed,
            Some(String::new()),
        );
    };
    observed.see(Record::of(&lease, config), Instant::now());
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let mut from = None;
    if holder != config.identity {
        if let Some(expires_in) = observed.claim_of_other(&config.identity, Instant::now()) {
            return Ok(Round::HeldByOther { holder, expires_in });
        }
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        from = Some(holder);
    }
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(config.lease_seconds());
    // `replace` sends the resourceVersion read above: a concurrent writer makes it fail with 409.
    written(
        api.replace(
            &config.name,
            &crate::leadership::write_params::post(),
            &lease,
        )
        .await,
        config,
        observed,
        from,
    )
}

/// The round's outcome from its write.
fn written(
    result: Result<Lease, kube::Error>,
    config: &LeaseConfig,
    observed: &mut Observation,
    from: Option<String>,
) -> Result<Round, kube::Error> {
    match result {
        Ok(lease) => {
            observed.see(Record::of(&lease, config), Instant::now());
            Ok(Round::Holding { from })
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Round::Conflict),
        Err(error) => Err(error),
    }
}

/// Clears the Lease if this replica holds it: no holder, `leaseDurationSeconds: 1`. `Ok(false)`: it
/// was not ours.
async fn release(api: &Api<Lease>, config: &LeaseConfig) -> Result<bool, kube::Error> {
    for _ in 0..RELEASE_ATTEMPTS {
        let Some(mut lease) = api.get_opt(&config.name).await? else {
            return Ok(false);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(to_micro_time(Utc::now()));
        match api
            .replace(
                &config.name,
                &crate::leadership::write_params::post(),
                &lease,
            )
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => return Err(error),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    //! The election's pure logic: claims judged by observation time, whatever the holder's clock
    //! says; leadership as a deadline on clocks that count through suspend; the write timeout's
    //! arithmetic; the settings' validation.

    use super::*;

    const ME: &str = "me";

    fn in_millis(lease_ms: u64, renew_ms: Option<u64>) -> Result<LeaseConfig, String> {
        LeaseConfig::new(
            "ns".into(),
            "lease".into(),
            ME.into(),
            Duration::from_millis(lease_ms),
            renew_ms.map(Duration::from_millis),
        )
    }

    const MS: Duration = Duration::from_millis(1);

    fn in_secs(lease: u64, renew: Option<u64>) -> Result<LeaseConfig, String> {
        in_millis(lease * 1000, renew.map(|r| r * 1000))
    }

    fn record(holder: &str, renew_time: &str, version: &str) -> Record {
        Record {
            holder: holder.into(),
            renew_time: Some(renew_time.into()),
            resource_version: Some(version.into()),
            lease_duration: Duration::from_secs(15),
        }
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_claim_expires_by_the_observers_clock_whatever_the_holders_renew_time_says() {
        // The holder's clock runs years behind ours (by its renewTime the claim looks long
        // expired), or decades ahead (it would stand for decades), or agrees: the claim
        // stands for its lease duration from when this replica saw it.
        for renew_time in ["2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z", "now"] {
            let t0 = Instant::now();
            let mut observed = Observation::default();
            observed.see(record("other", renew_time, "7"), t0);
            assert_eq!(
                observed.claim_of_other(ME, t0),
                Some(15 * S),
                "{renew_time}"
            );
            // The same record read again later does not restart its age.
            observed.see(record("other", renew_time, "7"), t0 + 10 * S);
            assert_eq!(
                observed.claim_of_other(ME, t0 + 14 * S),
                Some(S),
                "{renew_time}"
            );
            assert_eq!(
                observed.claim_of_other(ME, t0 + 15 * S),
                None,
                "{renew_time}"
            );
        }
    }

    #[test]
    fn a_renewal_restarts_the_claim_from_when_it_is_seen() {
        let t0 = Instant::now();
        let mut observed = Observation::default();
        observed.see(record("other", "10:00:00", "7"), t0);
        // A new renewTime or a new resourceVersion is a new record, seen at t0 + 12 s.
        observed.see(record("other", "10:00:05", "8"), t0 + 12 * S);
        assert_eq!(observed.claim_of_other(ME, t0 + 20 * S), Some(7 * S));
        observed.see(record("other", "10:00:05", "9"), t0 + 20 * S);
        assert_eq!(observed.claim_of_other(ME, t0 + 30 * S), Some(5 * S));
    }

    #[test]
    fn no_standing_claim_when_nobody_or_this_replica_holds_it() {
        let t0 = Instant::now();
        let mut observed = Observation::default();
        assert_eq!(observed.claim_of_other(ME, t0), None);
        // Released: no holder, 1 s. A candidate acquires at once, without waiting that second.
        observed.see(
            Record {
                lease_duration: S,
                ..record("", "10:00:00", "9")
            },
            t0,
        );
        assert_eq!(observed.claim_of_other(ME, t0), None);
        observed.see(record(ME, "10:00:01", "10"), t0);
        assert_eq!(observed.claim_of_other(ME, t0), None);
    }

    #[test]
    fn the_holders_promised_duration_counts_not_ours() {
        let t0 = Instant::now();
        let mut observed = Observation::default();
        let long = Record {
            lease_duration: 60 * S,
            ..record("other", "10:00:00", "7")
        };
        observed.see(long, t0);
        assert!(observed.claim_of_other(ME, t0 + 59 * S).is_some());
        assert_eq!(observed.claim_of_other(ME, t0 + 60 * S), None);
    }

    /// A reading `secs` after an origin, on both clocks.
    fn at(secs: Duration) -> Reading {
        Reading::at(secs + 1000 * S, secs + 1_000_000 * S)
    }

    #[test]
    fn leadership_is_a_deadline_from_the_start_of_the_last_successful_round() {
        let zero = Duration::ZERO;
        let mut term = Term::default();
        assert_eq!(term.check(at(zero), zero), Err(NotLeader::NotAcquired));
        term.renewed(at(zero), 10 * S);
        assert_eq!(term.check(at(9 * S), zero), Ok(()));
        // A process frozen past its deadline learns it at the first check after it wakes, with no
        // round in between.
        assert_eq!(
            term.check(at(12 * S), zero),
            Err(NotLeader::DeadlinePassed(2 * S))
        );
        term.renewed(at(11 * S), 10 * S);
        assert_eq!(term.check(at(20 * S), zero), Ok(()));
        assert_eq!(
            term.check(at(21 * S), zero),
            Err(NotLeader::DeadlinePassed(Duration::ZERO))
        );
        term.lost();
        assert_eq!(term.check(at(12 * S), zero), Err(NotLeader::Superseded));
    }

    #[test]
    fn a_write_starts_only_while_the_term_has_its_timeout_left() {
        let mut term = Term::default();
        term.renewed(at(Duration::ZERO), 10 * S);
        assert_eq!(term.check(at(6 * S), 4 * S), Ok(()));
        assert_eq!(
            term.check(at(7 * S), 4 * S),
            Err(NotLeader::TooLittleLeft {
                left: 3 * S,
                needed: 4 * S
            })
        );
        assert_eq!(
            NotLeader::TooLittleLeft {
                left: 3 * S,
                needed: 4 * S
            }
            .to_string(),
            "not the leader for long enough (the term ends in 3.0s, a write may take 4.0s)"
        );
    }

    #[test]
    fn a_pause_of_the_monotonic_clock_does_not_extend_the_term() {
        let mut term = Term::default();
        term.renewed(Reading::at(100 * S, 1000 * S), 10 * S);
        // Paused for a minute one second after renewing: the monotonic clock would read 101 s, boot
        // time and the wall clock read 161 s and 1061 s.
        assert_eq!(
            term.check(Reading::at(161 * S, 1061 * S), Duration::ZERO),
            Err(NotLeader::DeadlinePassed(51 * S))
        );
    }

    #[test]
    fn a_released_term_never_comes_back() {
        let mut term = Term::default();
        term.renewed(at(Duration::ZERO), 10 * S);
        term.release();
        assert_eq!(
            term.check(at(Duration::ZERO), Duration::ZERO),
            Err(NotLeader::Released)
        );
        // A renewal round that was under way when the release began does not revive it.
        term.renewed(at(S), 10 * S);
        assert_eq!(term.check(at(S), Duration::ZERO), Err(NotLeader::Released));
    }

    #[test]
    fn every_write_ends_before_a_standby_may_take_over_and_fits_a_term_renewed_on_time() {
        assert_eq!(in_secs(15, None).unwrap().write_timeout(), 4 * S);
        assert_eq!(in_secs(6, None).unwrap().write_timeout(), 1600 * MS);
        assert_eq!(
            in_secs(60, Some(40)).unwrap().write_timeout(),
            MAX_WRITE_TIMEOUT
        );
        let mut checked = 0;
        for lease_ms in (1_000..=120_000).step_by(1_000) {
            for renew_ms in (100..lease_ms).step_by(250) {
                let Ok(config) = in_millis(lease_ms, Some(renew_ms)) else {
                    continue;
                };
                checked += 1;
                let (lease, renew, write) = (
                    config.lease_duration,
                    config.renew_deadline,
                    config.write_timeout(),
                );
                assert!(
                    write >= MIN_WRITE_TIMEOUT && write <= MAX_WRITE_TIMEOUT,
                    "{config:?}"
                );
                // Checked only by `ensure` at the deadline's last instant, a write still ends
                // before a standby's turn.
                assert!(write < lease - renew, "{config:?}");
                // A term renewed on time (every retry period, a round taking up to another) leaves
                // room for a write.
                assert!(write <= renew - 2 * config.retry_period(), "{config:?}");
                // A write allowed by `ensure_for` at any moment of the term ends within it.
                let mut term = Term::default();
                term.renewed(at(Duration::ZERO), renew);
                for started_ms in (0..renew_ms).step_by(100) {
                    let started = Duration::from_millis(started_ms);
                    if term.check(at(started), write).is_ok() {
                        assert!(started + write <= renew, "{config:?} at {started:?}");
                    }
                }
            }
        }
        assert!(checked > 5_000, "{checked} configurations");
        assert!(
            in_millis(15_000, Some(14_500))
                .unwrap_err()
                .contains("leave writes")
        );
    }

    #[test]
    fn the_error_says_how_long_ago_the_deadline_passed() {
        let error = NotLeader::DeadlinePassed(Duration::from_millis(8_250));
        assert_eq!(
            error.to_string(),
            "not the leader (deadline passed 8.2s ago)"
        );
    }

    #[test]
    fn the_renew_deadline_defaults_below_the_lease_duration_and_must_stay_below() {
        let config = in_secs(15, None).unwrap();
        assert_eq!(config.renew_deadline, 10 * S);
        assert_eq!(config.retry_period(), S);
        assert!(config.round_timeout() < config.renew_deadline);
        let short = in_millis(6_000, None).unwrap();
        assert_eq!(short.renew_deadline, 4 * S);
        assert_eq!(short.retry_period(), S);
        assert!(
            in_secs(15, Some(15))
                .unwrap_err()
                .contains("must be shorter")
        );
        assert!(in_secs(15, Some(20)).is_err());
        assert!(in_millis(500, None).unwrap_err().contains("at least 1s"));
        assert!(
            in_secs(15, Some(1))
                .unwrap_err()
                .contains("twice the retry period")
        );
        assert_eq!(in_secs(2, None).unwrap().retry_period(), 2 * S / 6);
    }

    #[test]
    fn the_written_lease_duration_rounds_up() {
        assert_eq!(in_secs(15, None).unwrap().lease_seconds(), 15);
        assert_eq!(in_millis(6_500, None).unwrap().lease_seconds(), 7);
    }

    #[test]
    fn a_records_duration_is_the_holders_or_ours_when_it_has_none() {
        let config = in_secs(6, None).unwrap();
        let mut lease = Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some("other".into()),
                lease_duration_seconds: Some(30),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        assert_eq!(Record::of(&lease, &config).lease_duration, 30 * S);
        lease.spec.as_mut().unwrap().lease_duration_seconds = None;
        assert_eq!(Record::of(&lease, &config).lease_duration, 6 * S);
        assert_eq!(Record::of(&Lease::default(), &config).holder, "");
    }

    #[test]
    fn a_term_won_again_is_a_new_term_and_a_renewal_is_not() {
        let renew = 10 * S;
        let mut tenure = Tenure::default();
        assert_eq!(tenure.current(at(Duration::ZERO)), None);
        tenure.renewed(at(Duration::ZERO), renew);
        assert_eq!(tenure.current(at(1 * S)), Some(1));
        tenure.renewed(at(5 * S), renew);
        assert_eq!(
            tenure.current(at(12 * S)),
            Some(1),
            "renewed within the term"
        );
        tenure.term.lost();
        assert_eq!(tenure.current(at(13 * S)), None);
        tenure.renewed(at(40 * S), renew);
        assert_eq!(
            tenure.current(at(41 * S)),
            Some(2),
            "won again after another holder"
        );
        // The deadline (50 s) passed before the next round: another replica may have led in
        // between.
        tenure.renewed(at(70 * S), renew);
        assert_eq!(tenure.current(at(71 * S)), Some(3));
        tenure.term.release();
        tenure.renewed(at(72 * S), renew);
        assert_eq!(tenure.current(at(73 * S)), None, "released for good");
    }
}
