//! Actions the apiserver refused or that failed: each object they are about backs off
//! exponentially (with jitter) before the next attempt, every failed attempt is reported once, and
//! an object that keeps failing is reported blocked in the policy's status (docs/design.md §9), so
//! that a refusal neither comes back every second nor leaves a node "Draining" with nothing said.
//! Like [`crate::memory::in_flight`], it only makes the controller slower, never less careful.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::time::{Duration, Instant};

use k8sm_planner::{ActionKind, PodRef, Reason};

use crate::Error;

/// The delay after the first failure; it doubles with each failure in a row.
const FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest delay: an object that keeps failing is tried again at least this often.
const MAX_DELAY: Duration = Duration::from_secs(300);
/// Each delay is lengthened by up to this fraction, at random, so that the objects a single cause
/// refused (a webhook denying every eviction) do not come back all at once. Below one half, delays
/// still grow with every failure.
const JITTER: f64 = 0.2;
/// The longest delay after a budget's refusal (429), kubectl drain's interval between attempts: a
/// budget frees up as a replacement becomes Ready, a change of the budget and not of the pod, so a
/// longer delay would leave the pod waiting after drain would have gone.
const BUDGET_RETRY: Duration = Duration::from_secs(5);
/// Failures in a row after which an object is reported blocked in status (a budget's refusal is
/// reported at once).
pub const BLOCKED_AFTER: u32 = 3;
/// Longest apiserver answer kept (an admission webhook's message can be long).
const MAX_ANSWER: usize = 400;

/// The object an action is about, whose attempts back off together.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// A pod (its UID tells a pod from a later one of the same name).
    Pod(PodRef),
    /// A node, by name.
    Node(String),
    /// A policy (its finalizer), by name.
    Policy(String),
}

impl Subject {
    pub fn of(kind: &ActionKind) -> Self {
        if let Some(pod) = kind.about_pod() {
            Self::Pod(pod.clone())
        } else if let Some(policy) = kind.policy() {
            Self::Policy(policy.to_owned())
        } else {
            Self::Node(kind.node().unwrap_or_default().to_owned())
        }
    }
}

/// The failures in a row of one object's actions.
#[derive(Clone, Debug)]
pub struct Failures {
    /// What was attempted last, such as "evict pod shop/web-1" (see [`describe`]).
    pub action: String,
    /// `ActionFailed`, or `BlockedByPDB` for an eviction a budget refused.
    pub reason: Reason,
    /// The apiserver's answer to the last attempt (status code and message), or the error,
    /// truncated.
    pub answer: String,
    /// Failures in a row.
    pub count: u32,
    /// Not attempted again before this.
    pub retry_at: Instant,
    /// The object as it failed (see [`Backoff::retry_at`]): when it changes, the backoff ends.
    version: Option<String>,
}

impl Failures {
    /// Whether status reports the object as blocked.
    pub fn blocks(&self) -> bool {
        self.reason == Reason::BlockedByPDB || self.count >= BLOCKED_AFTER
    }

    /// The message status shows for a blocked object.
    pub fn message(&self) -> String {
        if self.reason == Reason::BlockedByPDB {
            // The budget's words are the message: the count would rewrite the status at every
            // attempt.
            return self.answer.clone();
        }
        format!(
            "{} failed {} times in a row: {}; retrying with backoff",
            self.action, self.count, self.answer
        )
    }
}

/// The backoff of every object whose last action failed.
#[derive(Debug)]
pub struct Backoff {
    entries: HashMap<Subject, Failures>,
    /// The last failure reported of each object: (answer, when). Kept across a reset, so that an
    /// object that changes and fails again at once with the same answer is not reported twice
    /// within a backoff window.
    reported: HashMap<Subject, (String, Instant)>,
    /// A number in [0, 1): the jitter of the next delay.
    random: fn() -> f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::with_random(random_fraction)
    }
}

/// What became of a failure: whether to report it, and when to try again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub report: bool,
    pub count: u32,
    pub retry_at: Instant,
}

impl Backoff {
    fn with_random(random: fn() -> f64) -> Self {
        Self {
            entries: HashMap::new(),
            reported: HashMap::new(),
            random,
        }
    }

    /// When an action on `subject` may be attempted again: `None` if it may be now. `version` is
    /// the object as the cache shows it now; a backoff recorded for another version ends here.
    pub fn retry_at(
        &mut self,
        subject: &Subject,
        version: Option<&str>,
        now: Instant,
    ) -> Option<Instant> {
        let entry = self.entries.get(subject)?;
        if entry.version.as_deref() != version {
            self.entries.remove(subject);
            return None;
        }
        (entry.retry_at > now).then_some(entry.retry_at)
    }

    /// An action on `subject` was carried out, or overtaken by a change of the object: its backoff
    /// ends.
    pub fn succeeded(&mut self, subject: &Subject) {
        self.entries.remove(subject);
    }

    /// Records a failed attempt at `action` on `subject`, answered `answer`; `version` as in
    /// [`Backoff::retry_at`].
    pub fn failed(
        &mut self,
        subject: &Subject,
        action: String,
        reason: Reason,
        answer: &str,
        version: Option<String>,
        now: Instant,
    ) -> Recorded {
        let answer = k8sm_api::text::bounded(answer, MAX_ANSWER).into_owned();
        let count = self
            .entries
            .get(subject)
            .filter(|e| e.version == version)
            .map_or(1, |e| e.count + 1);
        let mut delay = delay(count, (self.random)());
        if reason == Reason::BlockedByPDB {
            delay = delay.min(BUDGET_RETRY);
        }
        let retry_at = now + delay;
        // A failure is reported once per attempt, and attempts come no more often than the backoff
        // allows; the same answer is not reported again within the window that preceded
        // this attempt (after a reset by a change).
        let window = self::delay(count.saturating_sub(1).max(1), 0.0);
        let report = self
            .reported
            .get(subject)
            .is_none_or(|(said, at)| *said != answer || now.duration_since(*at) >= window);
        if report {
            self.reported.insert(subject.clone(), (answer.clone(), now));
        }
        self.entries.insert(
            subject.clone(),
            Failures {
                action,
                reason,
                answer,
                count,
                retry_at,
                version,
            },
        );
        Recorded {
            report,
            count,
            retry_at,
        }
    }

    /// Forgets the objects that are gone (`alive` says which remain), and reports older than the
    /// longest delay.
    pub fn retain(&mut self, alive: impl Fn(&Subject) -> bool, now: Instant) {
        self.entries.retain(|subject, _| alive(subject));
        self.reported.retain(|subject, (_, at)| {
            alive(subject) && now.duration_since(*at) < MAX_DELAY + MAX_DELAY
        });
    }

    /// The objects whose failures status reports as blocking (see [`Failures::blocks`]).
    pub fn blocked(&self) -> impl Iterator<Item = (&Subject, &Failures)> {
        self.entries.iter().filter(|(_, f)| f.blocks())
    }

    /// Whether `subject` has failures (cheaper to ask than [`Backoff::retry_at`], which needs its
    /// version).
    pub fn contains(&self, subject: &Subject) -> bool {
        self.entries.contains_key(subject)
    }

    /// Every object with failures.
    pub fn subjects(&self) -> impl Iterator<Item = &Subject> {
        self.entries.keys()
    }

    /// Objects backing off.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The delay after `count` failures in a row, lengthened by `random` (in [0, 1)) times [`JITTER`].
pub fn delay(count: u32, random: f64) -> Duration {
    let doublings = count.saturating_sub(1).min(20);
    let base = FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY);
    base.mul_f64(1.0 + JITTER * random.clamp(0.0, 1.0))
}

/// A random number in [0, 1) without a dependency: each `RandomState` is keyed afresh from the OS's
/// randomness (and a per-thread counter), so hashing nothing with it gives an unpredictable value.
/// Jitter needs no more.
pub fn random_fraction() -> f64 {
    let bits = RandomState::new().build_hasher().finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// The kind of an action, as a bounded metric label.
pub fn name(kind: &ActionKind) -> &'static str {
    match kind {
        ActionKind::AddFinalizer { .. } => "AddFinalizer",
        ActionKind::RemoveFinalizer { .. } => "RemoveFinalizer",
        ActionKind::Mark { .. } => "Mark",
        ActionKind::Admit { .. } => "Admit",
        ActionKind::Cordon { .. } => "Cordon",
        ActionKind::Evict { .. } => "Evict",
        ActionKind::Surge { .. } => "Surge",
        ActionKind::DeletePod { .. } => "DeletePod",
        ActionKind::Progress { .. } => "Progress",
        ActionKind::Stall { .. } => "Stall",
        ActionKind::Kamikaze { .. } => "Kamikaze",
        ActionKind::Complete { .. } => "Complete",
        ActionKind::Release { .. } => "Release",
    }
}

/// What an action attempts, for messages: "evict pod shop/web-1", "admit node n1".
pub fn describe(kind: &ActionKind) -> String {
    let verb = match kind {
        ActionKind::AddFinalizer { .. } => "add the finalizer of",
        ActionKind::RemoveFinalizer { .. } => "remove the finalizer of",
        ActionKind::Mark { .. } => "mark",
        ActionKind::Admit { .. } => "admit",
        ActionKind::Cordon { .. } => "cordon",
        ActionKind::Evict { .. } => "evict",
        ActionKind::Surge { .. } => "start a surge rollout to move",
        ActionKind::DeletePod { .. } => "delete",
        ActionKind::Progress { .. } => "record the drain progress of",
        ActionKind::Stall { .. } => "stall",
        ActionKind::Kamikaze { .. } => "kamikaze",
        ActionKind::Complete { .. } => "complete",
        ActionKind::Release { .. } => "release",
    };
    match (kind.about_pod(), kind.policy(), kind.node()) {
        (Some(pod), _, _) => format!("{verb} pod {pod}"),
        (_, Some(policy), _) => format!("{verb} policy {policy}"),
        (_, _, node) => format!("{verb} node {}", node.unwrap_or_default()),
    }
}

/// The apiserver's answer to a failed call: its status code, reason and message; or what went wrong
/// on the way (a timeout, a connection error, the kamikaze endpoint's answer).
pub fn answer(error: &Error) -> String {
    match error {
        Error::Kube(kube::Error::Api(status))
        | Error::Action {
            source: kube::Error::Api(status),
            ..
        } => {
            match crate::startup::permissions::opt_in_hint(&status.message)
                .filter(|_| status.code == 403)
            {
                // RBAC refused a verb only surge moves or DeleteNode use: first (answers are
                // bounded), what grants it.
                Some(hint) => format!(
                    "{} {}: {hint}; {}",
                    status.code, status.reason, status.message
                ),
                None => format!("{} {}: {}", status.code, status.reason, status.message),
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> f64 {
        0.0
    }

    fn most_jitter() -> f64 {
        0.999_999
    }

    fn pod(uid: &str) -> Subject {
        Subject::Pod(PodRef::new("shop", uid, uid))
    }

    fn fail(backoff: &mut Backoff, subject: &Subject, answer: &str, now: Instant) -> Recorded {
        backoff.failed(
            subject,
            "evict pod shop/web-1".into(),
            Reason::ActionFailed,
            answer,
            Some("7".into()),
            now,
        )
    }

    #[test]
    fn delays_double_from_a_second_to_five_minutes_and_jitter_only_lengthens_them() {
        let delays: Vec<u64> = (1..=12).map(|n| delay(n, 0.0).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(delay(u32::MAX, 0.0), MAX_DELAY);
        for n in 1..12 {
            // The longest jittered delay stays below the next one without jitter: intervals always
            // grow.
            assert!(delay(n, 0.999) >= delay(n, 0.0));
            assert!(delay(n, 0.999) < delay(n + 1, 0.0) || delay(n + 1, 0.0) == MAX_DELAY);
        }
        let r = random_fraction();
        assert!((0.0..1.0).contains(&r), "{r}");
    }

    #[test]
    fn an_object_backs_off_after_each_failure_until_an_action_on_it_succeeds() {
        let mut backoff = Backoff::with_random(no_jitter);
        let t0 = Instant::now();
        let web = pod("web-1");
        assert_eq!(backoff.retry_at(&web, Some("7"), t0), None);
        let first = fail(&mut backoff, &web, "403 Forbidden: denied", t0);
        assert_eq!((first.count, first.retry_at), (1, t0 + FIRST_DELAY));
        assert_eq!(
            backoff.retry_at(&web, Some("7"), t0 + Duration::from_millis(500)),
            Some(t0 + FIRST_DELAY)
        );
        assert_eq!(backoff.retry_at(&pod("other"), Some("7"), t0), None);
        let t1 = t0 + FIRST_DELAY;
        assert_eq!(backoff.retry_at(&web, Some("7"), t1), None, "due again");
        let second = fail(&mut backoff, &web, "403 Forbidden: denied", t1);
        assert_eq!(
            (second.count, second.retry_at),
            (2, t1 + Duration::from_secs(2))
        );
        backoff.succeeded(&web);
        assert_eq!(backoff.retry_at(&web, Some("7"), t1), None);
        let again = fail(
            &mut backoff,
            &web,
            "403 Forbidden: denied",
            t1 + Duration::from_secs(9),
        );
        assert_eq!(again.count, 1, "a success ends the run of failures");
    }

    #[test]
    fn a_change_of_the_object_ends_its_backoff() {
        let mut backoff = Backoff::with_random(most_jitter);
        let t0 = Instant::now();
        let web = pod("web-1");
        fail(&mut backoff, &web, "403 Forbidden: denied", t0);
        fail(&mut backoff, &web, "403 Forbidden: denied", t0);
        assert!(backoff.retry_at(&web, Some("7"), t0).is_some());
        assert_eq!(
            backoff.retry_at(&web, Some("8"), t0),
            None,
            "relabelled: try at once"
        );
        assert_eq!(fail(&mut backoff, &web, "x", t0).count, 1);
        backoff.retain(|s| *s != web, t0);
        assert_eq!(backoff.len(), 0, "gone");
    }

    #[test]
    fn every_attempt_is_reported_once_and_a_repeat_within_the_window_is_not() {
        let mut backoff = Backoff::with_random(no_jitter);
        let t0 = Instant::now();
        let web = pod("web-1");
        let mut now = t0;
        let mut reports = Vec::new();
        for _ in 0..5 {
            let recorded = fail(&mut backoff, &web, "403 Forbidden: denied", now);
            reports.push(recorded.report);
            now = recorded.retry_at;
        }
        assert_eq!(reports, [true; 5], "attempts come after their windows");
        // A change resets the backoff; failing again at once (within a second of the last report)
        // with the same answer is not reported again...
        let now = now - Duration::from_secs(16) + Duration::from_millis(200);
        assert_eq!(backoff.retry_at(&web, Some("changed"), now), None);
        let recorded = backoff.failed(
            &web,
            "evict".into(),
            Reason::ActionFailed,
            "403 Forbidden: denied",
            Some("changed".into()),
            now,
        );
        assert!(!recorded.report);
        // ...but another answer is.
        let recorded = backoff.failed(
            &web,
            "evict".into(),
            Reason::ActionFailed,
            "422 Invalid: other",
            Some("changed".into()),
            now,
        );
        assert!(recorded.report);
    }

    #[test]
    fn status_reports_an_object_after_three_failures_or_a_budget_at_once() {
        let mut backoff = Backoff::with_random(no_jitter);
        let t0 = Instant::now();
        let web = pod("web-1");
        for n in 1..=3 {
            fail(&mut backoff, &web, "403 Forbidden: denied", t0);
            assert_eq!(backoff.blocked().count(), usize::from(n >= BLOCKED_AFTER));
        }
        let (_, failures) = backoff.blocked().next().unwrap();
        assert_eq!(
            failures.message(),
            "evict pod shop/web-1 failed 3 times in a row: 403 Forbidden: denied; retrying with backoff"
        );
        let vault = pod("vault-1");
        backoff.failed(
            &vault,
            "evict pod shop/vault-1".into(),
            Reason::BlockedByPDB,
            "eviction refused by a PodDisruptionBudget: Cannot evict pod",
            None,
            t0,
        );
        let blocked: HashMap<&Subject, String> =
            backoff.blocked().map(|(s, f)| (s, f.message())).collect();
        assert_eq!(
            blocked[&vault],
            "eviction refused by a PodDisruptionBudget: Cannot evict pod"
        );
        let long = "x".repeat(2 * MAX_ANSWER);
        fail(&mut backoff, &pod("long"), &long, t0);
        assert!(backoff.entries[&pod("long")].answer.len() <= MAX_ANSWER + 3);
    }

    /// A budget's refusal is asked again at least as often as kubectl drain asks (every 5 s),
    /// however many refusals came before: the budget frees up without the pod changing. Other
    /// failures keep doubling.
    #[test]
    fn a_budget_refusal_is_retried_as_often_as_drain_retries() {
        let mut backoff = Backoff::with_random(most_jitter);
        let t0 = Instant::now();
        let (vault, web) = (pod("vault-1"), pod("web-1"));
        let mut last = (Duration::ZERO, Duration::ZERO);
        for _ in 0..10 {
            let refused = backoff.failed(
                &vault,
                "evict pod shop/vault-1".into(),
                Reason::BlockedByPDB,
                "429 Too Many Requests",
                None,
                t0,
            );
            let failed = fail(&mut backoff, &web, "403 Forbidden: denied", t0);
            last = (refused.retry_at - t0, failed.retry_at - t0);
            assert!(last.0 <= BUDGET_RETRY, "{last:?}");
        }
        assert!(last.1 > Duration::from_secs(60), "{last:?}");
    }

    #[test]
    fn actions_are_described_by_verb_and_object() {
        let pod = PodRef::new("shop", "web-1", "u");
        assert_eq!(
            describe(&ActionKind::DeletePod {
                pod: pod.clone(),
                eviction_api: false,
            }),
            "delete pod shop/web-1"
        );
        assert_eq!(
            describe(&ActionKind::Cordon { node: "n1".into() }),
            "cordon node n1"
        );
        assert_eq!(
            describe(&ActionKind::RemoveFinalizer {
                policy: "fleet".into()
            }),
            "remove the finalizer of policy fleet"
        );
        assert_eq!(
            Subject::of(&ActionKind::DeletePod {
                pod: pod.clone(),
                eviction_api: false,
            }),
            Subject::Pod(pod)
        );
    }
}
