//! What the loop does about failures: which planned actions it withholds (their object backs off
//! after a failure, or the view is stale because a watch has failed for too long), how a failed
//! action is recorded and reported, and what status reports beyond the plan.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Instant;

use kube::runtime::reflector::ObjectRef;

use k8sm_planner::{Action, Plan, Reason};

use super::Controller;
use super::pass_result::{Hold, PassResult};
use crate::memory::backoff::{self, Subject};
use crate::observe::watches::{self, Failing};
use crate::report::metrics::Withheld;
use crate::report::status::Troubles;

impl Controller {
    /// Whether to attempt `action` in this pass. Not when its node was written already in this pass
    /// or its own action did not happen (the node's pods then wait for it), when the view is
    /// stale (a watch has failed for too long: its cache may show evicted pods Ready, or miss a
    /// node's state), or when its object backs off after a failure.
    pub(super) fn may_attempt<'p>(
        &mut self,
        action: &'p Action,
        stale: &BTreeMap<String, Failing>,
        written: &HashSet<&'p str>,
        held: &mut HashMap<String, Hold>,
        result: &mut PassResult,
    ) -> bool {
        let node = match (action.kind.node(), action.kind.about_pod()) {
            (Some(node), _) if written.contains(node) => {
                held.insert(node.to_owned(), Hold::Soon);
                result.retry_soon = true;
                return false;
            }
            (Some(node), _) => Some(node.to_owned()),
            (None, Some(pod)) => self.node_of(pod),
            (None, None) => None,
        };
        match node.as_ref().and_then(|n| held.get(n)) {
            Some(Hold::Soon) => {
                result.retry_soon = true;
                return false;
            }
            Some(Hold::Later(at)) => {
                if let Some(at) = at {
                    result.retry_at(*at);
                }
                return false;
            }
            // The write's answer wakes the loop.
            Some(Hold::Writing) => return false,
            None => {}
        }
        let hold = if !stale.is_empty() {
            self.metrics.withheld(&action.policy, Withheld::StaleView);
            Hold::Later(None)
        } else {
            let subject = Subject::of(&action.kind);
            if !self.backoff.contains(&subject) {
                return true;
            }
            let version = self.version_of(&subject);
            let Some(at) = self
                .backoff
                .retry_at(&subject, version.as_deref(), Instant::now())
            else {
                return true;
            };
            self.metrics.withheld(&action.policy, Withheld::Backoff);
            result.retry_at(at);
            Hold::Later(Some(at))
        };
        if let Some(node) = action.kind.node() {
            held.insert(node.to_owned(), hold);
        }
        false
    }

    /// The object of a backoff as the cache shows it now, so that a change ends its backoff: a
    /// pod's resourceVersion; a node's labels, annotations and spec (not its status, which its
    /// kubelet keeps rewriting); a policy's generation. `None` when the cache does not hold it.
    pub(super) fn version_of(&self, subject: &Subject) -> Option<String> {
        match subject {
            Subject::Pod(pod) => {
                let cached = self.stores.pods.get(pod.namespace(), pod.name())?;
                (*cached.view.uid == *pod.uid()).then(|| cached.resource_version.into())
            }
            Subject::Node(name) => {
                let node = self.stores.nodes.get(&ObjectRef::new(name))?;
                let mut hasher = std::hash::DefaultHasher::new();
                let meta = &node.metadata;
                std::hash::Hash::hash(&(&meta.uid, &meta.labels, &meta.annotations), &mut hasher);
                std::hash::Hash::hash(&serde_json::to_string(&node.spec).ok(), &mut hasher);
                Some(format!("{:x}", std::hash::Hasher::finish(&hasher)))
            }
            Subject::Policy(name) => {
                let policy = self.stores.policies.get(&ObjectRef::new(name))?;
                Some(policy.metadata.generation.unwrap_or_default().to_string())
            }
        }
    }

    /// Forgets the backoff of objects that are gone.
    pub(super) fn forget_gone(&mut self) {
        if self.backoff.len() == 0 {
            return;
        }
        let alive: HashSet<Subject> = self
            .backoff
            .subjects()
            .filter(|s| self.version_of(s).is_some())
            .cloned()
            .collect();
        self.backoff.retain(|s| alive.contains(s), Instant::now());
    }

    /// What status reports beyond the plan: the objects that keep failing, and why the view is
    /// stale.
    pub(super) fn troubles(&self, stale: &BTreeMap<String, Failing>) -> Troubles {
        let mut troubles = Troubles {
            stale_view: (!stale.is_empty()).then(|| watches::describe(stale, self.max_staleness)),
            ..Troubles::default()
        };
        for (subject, failures) in self.backoff.blocked() {
            match subject {
                Subject::Pod(pod) => {
                    troubles
                        .pods
                        .insert(pod.uid().to_string(), (failures.reason, failures.message()));
                }
                Subject::Node(name) => {
                    troubles.nodes.insert(name.clone(), failures.message());
                }
                Subject::Policy(name) => {
                    troubles.policies.insert(name.clone(), failures.message());
                }
            }
        }
        troubles
    }

    /// Reports (log, and a Warning Event on every policy) when watches become stale, once per
    /// episode.
    pub(super) async fn report_stale(&mut self, plan: &Plan, stale: &BTreeMap<String, Failing>) {
        let kinds: BTreeSet<String> = stale.keys().cloned().collect();
        if kinds.is_empty() && !self.stale_reported.is_empty() {
            tracing::info!("every watch works again: acting on the view again");
        }
        let new = !kinds.is_subset(&self.stale_reported);
        self.stale_reported = kinds;
        let policies: Vec<&str> = plan.policies.iter().map(|p| p.policy.as_str()).collect();
        if new {
            let message = watches::describe(stale, self.max_staleness);
            tracing::warn!("{message}");
            self.events
                .stale_view(&policies, &message, &self.stores)
                .await;
        }
        // Silences whose watch came back before this pass saw it failing: reported all the same.
        let mut recovered = self.stores.health.take_silences();
        recovered.retain(|kind, _| !stale.contains_key(kind));
        if !recovered.is_empty() {
            let message = watches::describe_silences(&recovered);
            tracing::warn!("{message}");
            self.events
                .stale_view(&policies, &message, &self.stores)
                .await;
        }
    }

    /// Records a failed or refused attempt at `action`, answered `answer` (HTTP `code`): its object
    /// backs off, and the failure is reported (a Warning Event on the object: `reason`) once
    /// per attempt. Returns when the object may be tried again.
    pub(super) async fn failed(
        &mut self,
        action: &Action,
        reason: Reason,
        answer: String,
        code: Option<u16>,
    ) -> Instant {
        let subject = Subject::of(&action.kind);
        let version = self.version_of(&subject);
        let what = backoff::describe(&action.kind);
        let recorded = self.backoff.failed(
            &subject,
            what.clone(),
            reason,
            &answer,
            version,
            Instant::now(),
        );
        self.metrics.action_failed(action, code);
        let retry_in = recorded.retry_at.saturating_duration_since(Instant::now());
        tracing::warn!(
            action = %what,
            attempt = recorded.count,
            retry_in = ?retry_in,
            "action failed: {answer}"
        );
        if recorded.report {
            // A budget's refusal keeps its own reason: it is a wait that ends by itself, not a
            // fault.
            let message = match reason {
                Reason::BlockedByPDB => answer,
                _ => format!("{what} failed: {answer}; retrying with exponential backoff"),
            };
            self.events
                .action_failed(action, reason, &message, &self.stores)
                .await;
        }
        recorded.retry_at
    }
}
