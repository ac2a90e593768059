//! The controller's calls that a pass's evictions take ([`crate::Calls`], docs/design.md §8): the
//! controller launches a planned eviction at once if a call is free, and one it cannot launch waits
//! for a later pass. Planning only the evictions it can launch, the pass spends nothing on the
//! others (their messages, actions and order), and its ledger counts only pods that go.

use crate::Calls;

/// What the pass's evictions took of the calls so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallCount {
    /// `None`: every eviction is planned.
    calls: Option<Calls>,
    /// Evictions that take an ordinary call.
    ordinary: usize,
    /// Evictions that continue a workload. Counted apart: the controller launches them first
    /// (`continuations_first`), so they may take the calls the ordinary ones were counted on,
    /// and those wait for a later pass as before.
    continuations: usize,
}

impl CallCount {
    pub(crate) fn new(calls: Option<&Calls>) -> Self {
        Self {
            calls: calls.cloned(),
            ..Self::default()
        }
    }

    /// Whether the eviction of `pod` (its UID), of the `workload` (its UID), on `node` may be
    /// planned, taking a call if so. `written`: a write of this pass to the node goes before its
    /// pods' calls, which wait for it (as for a write on its way, and for a pod backing off, the
    /// eviction is planned and takes no call: it is not launched in this pass).
    pub(crate) fn take(&mut self, workload: &str, pod: &str, node: &str, written: bool) -> bool {
        match self.call_for(workload, pod, node, written) {
            Call::NotNeeded => true,
            Call::Free { continuation } => {
                *self.taken(continuation) += 1;
                true
            }
            Call::NoneFree => false,
        }
    }

    /// Whether [`Self::take`] would let the eviction be planned now, taking nothing.
    pub(crate) fn would_take(&self, workload: &str, pod: &str, node: &str, written: bool) -> bool {
        self.call_for(workload, pod, node, written) != Call::NoneFree
    }

    /// Whether no eviction of a pod on `node` may be planned now, whatever its workload: no call
    /// is free, and none of them is let through without one (no pod backs off, the node waits
    /// for no write). Read without any pod's UID.
    pub(crate) fn refuses_all(&self, node: &str, written: bool) -> bool {
        let Some(calls) = &self.calls else {
            return false;
        };
        !written
            && calls.backing_off.is_empty()
            && self.all_taken(calls, false)
            && (calls.continuing.is_empty() || self.all_taken(calls, true))
            && !calls.held_nodes.contains(node)
    }

    fn call_for(&self, workload: &str, pod: &str, node: &str, written: bool) -> Call {
        let Some(calls) = &self.calls else {
            return Call::NotNeeded;
        };
        if written || calls.held_nodes.contains(node) || calls.backing_off.contains(pod) {
            return Call::NotNeeded;
        }
        let continuation = calls.continuing.contains(workload);
        if self.all_taken(calls, continuation) {
            Call::NoneFree
        } else {
            Call::Free { continuation }
        }
    }

    /// Whether every call an ordinary eviction (or a `continuation`) may take is taken.
    fn all_taken(&self, calls: &Calls, continuation: bool) -> bool {
        let (taken, cap) = if continuation {
            (self.continuations, calls.limit + calls.for_continuations)
        } else {
            (self.ordinary, calls.limit)
        };
        calls.running + taken >= cap
    }

    fn taken(&mut self, continuation: bool) -> &mut usize {
        if continuation {
            &mut self.continuations
        } else {
            &mut self.ordinary
        }
    }
}

/// What an eviction needs of the calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    /// It is not launched in this pass: it takes none.
    NotNeeded,
    /// One is free for it (of those for continuations, or the ordinary ones).
    Free {
        continuation: bool,
    },
    NoneFree,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(limit: usize, running: usize) -> Calls {
        Calls {
            limit,
            running,
            for_continuations: 2,
            continuing: ["c".to_owned()].into(),
            backing_off: ["backing-off".to_owned()].into(),
            held_nodes: ["held".to_owned()].into(),
        }
    }

    fn taken(count: &mut CallCount, workload: &str, tries: usize) -> usize {
        (0..tries)
            .filter(|i| count.take(workload, &format!("p{i}"), "n", false))
            .count()
    }

    #[test]
    fn evictions_take_the_free_calls_and_continuations_two_more() {
        let mut count = CallCount::new(Some(&calls(5, 2)));
        assert_eq!(taken(&mut count, "w", 10), 3);
        // Counted apart: the controller launches them first.
        assert_eq!(taken(&mut count, "c", 10), 5);
        let mut busy = CallCount::new(Some(&calls(5, 7)));
        assert_eq!(taken(&mut busy, "w", 10), 0);
        assert_eq!(taken(&mut busy, "c", 10), 0);
    }

    #[test]
    fn evictions_not_launched_in_this_pass_take_no_call() {
        let mut count = CallCount::new(Some(&calls(1, 1)));
        assert!(!count.take("w", "p", "n", false));
        assert!(count.take("w", "backing-off", "n", false));
        assert!(count.take("w", "p", "held", false));
        assert!(count.take("w", "p", "n", true));
        let mut unlimited = CallCount::new(None);
        assert_eq!(taken(&mut unlimited, "w", 1000), 1000);
    }
}
