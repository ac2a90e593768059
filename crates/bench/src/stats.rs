//! The arithmetic of the report: percentiles and the scenario's lower bound on the makespan (the
//! per-owner bound of the earlier reports, and the bound that also accounts for node concurrency,
//! grace periods, per-owner readiness delays and the apiserver's eviction throughput).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0 < p ≤ 100) of `samples` by the nearest-rank method: the smallest sample
/// that at least `p`% of the samples are less than or equal to. `None` without samples.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    if samples.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    // Nearest rank: ceil(p/100 · n), 1-based.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The least time any tool can take to upgrade every node without breaking the SLA, and how it was
/// derived.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LowerBound {
    /// The most sequential waves any owner needs: `max over owners of ceil(d / a)`.
    pub waves: u32,
    /// Desired replicas of the owner that needs that many waves (the smallest such owner).
    pub critical_replicas: u32,
    /// Pods that owner may have down at once under the SLA: `a = d − min(ceil(t·d), d−1)`.
    pub critical_allowed: u32,
    pub pod_ready_delay_s: f64,
    pub restart_delay_s: f64,
    /// `(waves − 1) · pod_ready_delay + restart_delay` ([`lower_bound`]), or the largest of the
    /// terms of [`concurrency_bound`].
    pub seconds: f64,
    /// The terms of [`concurrency_bound`] (absent from the earlier reports' JSON).
    #[serde(default)]
    pub terms: Option<BoundTerms>,
    /// A markdown paragraph that derives `seconds` with the scenario's numbers, for the report.
    #[serde(default)]
    pub derivation: String,
}

/// Each term of [`concurrency_bound`], seconds: each alone is a lower bound on the makespan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoundTerms {
    /// `ceil(nodes / C) · (grace + restart)`.
    pub node_waves_s: f64,
    pub node_waves: u32,
    /// Nodes in progress at once (maxConcurrentNodes resolved against the fleet).
    pub max_concurrent_nodes: usize,
    /// The owner term: `max over owners of (ceil(d / a) − 1) · gap + grace + restart`.
    pub owner_waves_s: f64,
    /// The owner that sets it.
    pub critical_owner: String,
    /// `evictions / evictions_per_second` when the throughput was measured.
    pub eviction_throughput_s: Option<f64>,
    pub evictions: usize,
    pub evictions_per_second: Option<f64>,
    pub grace_period_s: f64,
    /// Which term is the bound: `node waves`, `owner waves` or `eviction throughput`.
    pub limit: String,
}

/// One owner, as the bound sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundOwner {
    pub name: String,
    pub replicas: u32,
    /// Its pods become Ready this long after they are scheduled.
    pub ready_delay: Duration,
    /// A StatefulSet: a replacement (same name) is created only once the evicted pod is gone, a
    /// grace period later.
    pub replaced_after_removal: bool,
}

/// What [`concurrency_bound`] needs to know about a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundInput {
    /// Owners whose pods must all be evicted (not one that a rollout replaces by itself).
    pub owners: Vec<BoundOwner>,
    pub nodes: usize,
    /// maxConcurrentNodes resolved against `nodes` (at least 1).
    pub max_concurrent_nodes: usize,
    pub threshold_percent: u8,
    pub restart_delay: Duration,
    /// Every pod's termination grace period: an evicted pod is gone, and its node drained, that
    /// long later.
    pub grace_period: Duration,
    /// Every node hosts at least one pod to evict (true of any fleet with a few pods per node: the
    /// scheduler spreads), so every node wave waits for a grace period before its restart.
    pub every_node_hosts_pods: bool,
    /// Evictions that must go through the Eviction API (every pod of `owners` once).
    pub evictions: usize,
    /// The apiserver's eviction throughput measured alone on the machine (see `calibrate`), if
    /// measured.
    pub evictions_per_second: Option<f64>,
}

/// The lower bound of a scenario whose owners have `replicas`, under threshold `threshold_percent`.
///
/// Every pod runs on a node that must be upgraded, so every pod is disrupted at least once. The SLA
/// lets an owner of `d` replicas have at most `a = d − floor` pods down at once, where `floor =
/// min(ceil(t·d), d−1)` is the invariant's bound, so its pods go in at least `ceil(d / a)` waves,
/// and a wave can start only when the previous wave's replacements are Ready, at least one
/// pod-ready delay later. The last wave need not wait for its own replacements, but its node must
/// still restart its executor. Hence, with unlimited nodes in parallel and zero scheduling and
/// reaction latency:
///
/// `lower bound = (max over owners of ceil(d / a) − 1) · pod_ready_delay + restart_delay`.
pub fn lower_bound(
    replicas: &[u32],
    threshold_percent: u8,
    pod_ready_delay: Duration,
    restart_delay: Duration,
) -> LowerBound {
    let mut waves = 1;
    let mut critical = (1, 1);
    for &d in replicas.iter().filter(|d| **d > 0) {
        let allowed = d - k8sm_planner::sla_floor(threshold_percent, d);
        let w = d.div_ceil(allowed);
        if w > waves || (w == waves && d < critical.0) {
            waves = w;
            critical = (d, allowed);
        }
    }
    let ready = pod_ready_delay.as_secs_f64();
    let restart = restart_delay.as_secs_f64();
    LowerBound {
        waves,
        critical_replicas: critical.0,
        critical_allowed: critical.1,
        pod_ready_delay_s: ready,
        restart_delay_s: restart,
        seconds: f64::from(waves - 1) * ready + restart,
        terms: None,
        derivation: format!(
            "At most a = d − min(ceil({threshold_percent}%·d), d−1) pods of an owner of d replicas are down at once, \
             so the owner of {} replicas (a = {}) needs {waves} waves, each after the previous one's replacements are \
             Ready: ({waves} − 1) × {ready:.1} s + {restart:.1} s restart = {:.1} s.",
            critical.0,
            critical.1,
            f64::from(waves - 1) * ready + restart,
        ),
    }
}

/// The least time any tool can take to upgrade every node without breaking the SLA, accounting for
/// node concurrency, grace periods, each owner's readiness delay and the apiserver's eviction
/// throughput: the largest of three terms, each a lower bound on its own (scheduling and reaction
/// latencies count as zero).
///
/// - **Node waves.** A node is in progress (counted against maxConcurrentNodes `C`) from the moment
///   a tool starts draining it until it runs the new executor: at least a grace period (its pods
///   must be gone) plus the restart. `C` slots run `N` such nodes, so some slot runs `ceil(N / C)`
///   of them one after another: `ceil(N / C) · (grace + restart)`.
/// - **Owner waves.** Every pod of an owner of `d` replicas is evicted at least once (every node is
///   upgraded); an evicted pod is unavailable at once and until its replacement is Ready, so at
///   most `a = d − min(ceil(t·d), d−1)` evictions fit in any window of one replacement time — the
///   owner's readiness delay, plus the grace period for a StatefulSet (its replacement is created
///   only when the old pod is gone). So the last of its `ceil(d / a)` waves starts at least
///   `(ceil(d / a) − 1) · gap` after the first, and its node still needs the grace period and the
///   restart: `(ceil(d / a) − 1) · gap + grace + restart`, the largest over owners.
/// - **Eviction throughput.** The apiserver serves evictions at a rate measured alone on the
///   machine (at the controller's call concurrency, no budgets, no controller logic): `evictions /
///   rate`.
pub fn concurrency_bound(input: &BoundInput) -> LowerBound {
    let grace = input.grace_period.as_secs_f64();
    let restart = input.restart_delay.as_secs_f64();
    let slots = input.max_concurrent_nodes.max(1);
    let node_waves = u32::try_from(input.nodes.div_ceil(slots)).unwrap_or(u32::MAX);
    let node_grace = if input.every_node_hosts_pods {
        grace
    } else {
        0.0
    };
    let node_waves_s = f64::from(node_waves) * (node_grace + restart);

    // The critical owner: the longest owner term; ties go to the smaller owner, as in
    // `lower_bound`.
    let mut critical: Option<(&BoundOwner, u32, u32, f64, f64)> = None;
    for owner in input.owners.iter().filter(|o| o.replicas > 0) {
        let d = owner.replicas;
        let allowed = d - k8sm_testcluster::sla::bound(d, u32::from(input.threshold_percent));
        let waves = d.div_ceil(allowed);
        let gap = owner.ready_delay.as_secs_f64()
            + if owner.replaced_after_removal {
                grace
            } else {
                0.0
            };
        let seconds = f64::from(waves - 1) * gap + grace + restart;
        let better = critical
            .is_none_or(|(c, _, _, _, best)| seconds > best || (seconds == best && d < c.replicas));
        if better {
            critical = Some((owner, waves, allowed, gap, seconds));
        }
    }
    let owner_waves_s = critical.map_or(grace + restart, |c| c.4);
    let eviction_throughput_s = input
        .evictions_per_second
        .filter(|r| *r > 0.0)
        .map(|r| input.evictions as f64 / r);

    let mut limit = ("node waves", node_waves_s);
    if owner_waves_s > limit.1 {
        limit = ("owner waves", owner_waves_s);
    }
    if let Some(t) = eviction_throughput_s.filter(|t| *t > limit.1) {
        limit = ("eviction throughput", t);
    }
    let seconds = limit.1;

    let headline = if eviction_throughput_s.is_some() {
        format!("**{seconds:.1} s**, set by the {}", limit.0)
    } else {
        format!(
            "unknown, since the third was not measured; the two others give at least {seconds:.1} s (the {})",
            limit.0
        )
    };
    let mut derivation = format!(
        "The lower bound is the largest of three bounds, each valid alone (scheduling and reaction latencies taken as \
         zero): {headline}. *Node waves*: {} nodes, at most {slots} in progress at once, each \
         for at least {}the {restart:.1} s restart: ceil({} / {slots}) = {node_waves} waves × {:.1} s = \
         {node_waves_s:.1} s. ",
        input.nodes,
        if node_grace > 0.0 {
            format!("the {grace:.1} s grace period of its pods plus ")
        } else {
            String::new()
        },
        input.nodes,
        node_grace + restart,
    );
    match critical {
        Some((owner, waves, allowed, gap, s)) => {
            derivation += &format!(
                "*Owner waves*: every pod is evicted once and an owner of d replicas may have a = d − min(ceil({t}%·d), \
             d−1) pods unavailable at once, each until its replacement is Ready; the longest is {} ({} replicas, a = \
             {allowed}: {waves} waves), whose waves are at least {gap:.1} s apart ({:.1} s readiness{}): ({waves} − 1) \
             × {gap:.1} s + {grace:.1} s grace + {restart:.1} s restart = {s:.1} s. ",
                owner.name,
                owner.replicas,
                owner.ready_delay.as_secs_f64(),
                if owner.replaced_after_removal {
                    format!(
                        " + {grace:.1} s grace: a StatefulSet's replacement waits for the old pod to go"
                    )
                } else {
                    String::new()
                },
                t = input.threshold_percent,
            )
        }
        None => derivation += "*Owner waves*: no owner. ",
    }
    match (eviction_throughput_s, input.evictions_per_second) {
        (Some(t), Some(rate)) => {
            derivation += &format!(
                "*Eviction throughput*: {} evictions at the {rate:.1} evictions/s the apiserver served alone on this \
             machine = {t:.1} s.",
                input.evictions
            )
        }
        _ => derivation += "*Eviction throughput*: not measured.",
    }

    let (critical_replicas, critical_allowed, waves, ready) = critical
        .map_or((1, 1, 1, 0.0), |c| {
            (c.0.replicas, c.2, c.1, c.0.ready_delay.as_secs_f64())
        });
    LowerBound {
        waves,
        critical_replicas,
        critical_allowed,
        pod_ready_delay_s: ready,
        restart_delay_s: restart,
        seconds,
        terms: Some(BoundTerms {
            node_waves_s,
            node_waves,
            max_concurrent_nodes: slots,
            owner_waves_s,
            critical_owner: critical.map(|c| c.0.name.clone()).unwrap_or_default(),
            eviction_throughput_s,
            evictions: input.evictions,
            evictions_per_second: input.evictions_per_second,
            grace_period_s: grace,
            limit: limit.0.to_owned(),
        }),
        derivation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), Some(50.0));
        assert_eq!(percentile(&samples, 99.0), Some(99.0));
        assert_eq!(percentile(&samples, 100.0), Some(100.0));
        // Order does not matter.
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        // Few samples: p99 is the largest.
        assert_eq!(percentile(&[0.2, 0.1, 0.4, 0.3], 99.0), Some(0.4));
        assert_eq!(percentile(&[7.0], 1.0), Some(7.0));
    }

    #[test]
    fn no_percentile_without_samples_or_with_a_bad_rank() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0], 0.0), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
    }

    #[test]
    fn the_lower_bound_follows_the_owner_that_needs_the_most_waves() {
        let secs = Duration::from_secs;
        // 10 replicas at 90%: floor 9, one at a time, 10 waves. 50 replicas: floor 45, 5 at a time,
        // 10 waves. 15 replicas: ceil(13.5) = 14, one at a time, 15 waves: the critical
        // owner.
        let bound = lower_bound(&[1, 10, 15, 50], 90, secs(2), secs(3));
        assert_eq!(bound.waves, 15);
        assert_eq!(bound.critical_replicas, 15);
        assert_eq!(bound.critical_allowed, 1);
        assert_eq!(bound.seconds, 14.0 * 2.0 + 3.0);
    }

    #[test]
    fn single_replicas_and_no_owners_need_only_the_restart() {
        let bound = lower_bound(
            &[1, 1, 0],
            90,
            Duration::from_secs(2),
            Duration::from_secs(2),
        );
        assert_eq!((bound.waves, bound.seconds), (1, 2.0));
        assert_eq!(
            lower_bound(&[], 90, Duration::ZERO, Duration::from_secs(1)).seconds,
            1.0
        );
    }

    #[test]
    fn a_lower_threshold_allows_more_parallelism() {
        // 50% of 20: floor 10, 10 at a time, 2 waves.
        let bound = lower_bound(&[20], 50, Duration::from_secs(2), Duration::ZERO);
        assert_eq!((bound.waves, bound.critical_allowed), (2, 10));
        assert_eq!(bound.seconds, 2.0);
    }

    fn owner(name: &str, replicas: u32, ready_s: u64, stateful: bool) -> BoundOwner {
        BoundOwner {
            name: name.into(),
            replicas,
            ready_delay: Duration::from_secs(ready_s),
            replaced_after_removal: stateful,
        }
    }

    fn input(nodes: usize, concurrent: usize, owners: Vec<BoundOwner>) -> BoundInput {
        BoundInput {
            owners,
            nodes,
            max_concurrent_nodes: concurrent,
            threshold_percent: 90,
            restart_delay: Duration::from_secs(2),
            grace_period: Duration::from_secs(3),
            every_node_hosts_pods: true,
            evictions: 90,
            evictions_per_second: Some(10.0),
        }
    }

    #[test]
    fn light_nodes_two_at_a_time_are_bound_by_node_waves() {
        // 30 nodes, 2 at a time: 15 waves of 3 s grace + 2 s restart = 75 s. The owner of 3 at 90%:
        // floor min(ceil(2.7), 2) = 2, one at a time, 3 waves 4 s apart: 2·4 + 3 + 2 = 13
        // s. 90 evictions at 10/s: 9 s.
        let bound = concurrency_bound(&input(30, 2, vec![owner("a", 3, 4, false)]));
        let terms = bound.terms.clone().unwrap();
        assert_eq!(terms.node_waves, 15);
        assert_eq!(terms.node_waves_s, 75.0);
        assert_eq!(terms.owner_waves_s, 13.0);
        assert_eq!(terms.eviction_throughput_s, Some(9.0));
        assert_eq!((bound.seconds, terms.limit.as_str()), (75.0, "node waves"));
        assert!(bound.derivation.contains("75.0 s"), "{}", bound.derivation);
    }

    #[test]
    fn the_owner_with_the_longest_waves_sets_the_pace_with_its_own_readiness_delay() {
        // 20 nodes, 4 at a time: 5 × 5 s = 25 s.
        // 15 replicas, 10 s: floor min(14, 14) = 14, a = 1, 15 waves: 14·10 + 5 = 145 s.
        // StatefulSet of 10, 6 s: floor 9, a = 1, 10 waves, gap 6 + 3 (grace): 9·9 + 5 = 86 s.
        // 50 replicas, 20 s: floor min(45, 49) = 45, a = 5, 10 waves: 9·20 + 5 = 185 s.
        let owners = vec![
            owner("fifteen", 15, 10, false),
            owner("ordered", 10, 6, true),
            owner("fifty", 50, 20, false),
        ];
        let bound = concurrency_bound(&input(20, 4, owners.clone()));
        let terms = bound.terms.clone().unwrap();
        assert_eq!(terms.node_waves_s, 25.0);
        assert_eq!(bound.seconds, 185.0);
        assert_eq!(terms.critical_owner, "fifty");
        assert_eq!(terms.limit, "owner waves");
        assert_eq!(
            (bound.waves, bound.critical_replicas, bound.critical_allowed),
            (10, 50, 5)
        );
        assert_eq!(bound.pod_ready_delay_s, 20.0);
        // A slower StatefulSet: 10 waves, gap 19 + 3 = 22 s: 9·22 + 5 = 203 s, its grace included.
        let mut slower = owners;
        slower[1] = owner("ordered", 10, 19, true);
        let bound = concurrency_bound(&input(20, 4, slower));
        assert_eq!(bound.seconds, 203.0);
        assert_eq!(bound.terms.unwrap().critical_owner, "ordered");
    }

    #[test]
    fn the_apiserver_throughput_bounds_many_evictions() {
        // 10 nodes, 2 at a time: 5 × 5 = 25 s; owner of 2: floor min(2, 1) = 1, 2 waves: 2 + 5 = 7
        // s; 3000 evictions at 20/s: 150 s.
        let mut many = input(10, 2, vec![owner("b", 2, 2, false)]);
        many.evictions = 3000;
        many.evictions_per_second = Some(20.0);
        let bound = concurrency_bound(&many);
        assert_eq!(bound.seconds, 150.0);
        assert_eq!(bound.terms.unwrap().limit, "eviction throughput");
        assert!(
            bound
                .derivation
                .contains("**150.0 s**, set by the eviction throughput")
        );
        // Unmeasured: the other terms only, and the derivation says the bound is unknown.
        many.evictions_per_second = None;
        let unknown = concurrency_bound(&many);
        assert_eq!(unknown.seconds, 25.0);
        assert!(
            unknown.derivation.contains(
                "unknown, since the third was not measured; the two others give at least 25.0 s"
            ),
            "{}",
            unknown.derivation
        );
    }

    #[test]
    fn nodes_without_pods_need_only_their_restart_and_ties_go_to_the_smaller_owner() {
        // 4 nodes one at a time, no grace to wait for: 4 × 2 = 8 s.
        let mut bare = input(4, 1, Vec::new());
        bare.every_node_hosts_pods = false;
        bare.evictions_per_second = None;
        let bound = concurrency_bound(&bare);
        assert_eq!(bound.seconds, 8.0);
        // 10 replicas (a = 1, 10 waves) at 2 s and 20 replicas (floor 18, a = 2, 10 waves) at 2 s:
        // both 9·2 + 5 = 23 s; the smaller owner is named.
        bare.owners = vec![owner("twenty", 20, 2, false), owner("ten", 10, 2, false)];
        let bound = concurrency_bound(&bare);
        assert_eq!(bound.seconds, 23.0);
        assert_eq!(bound.terms.unwrap().critical_owner, "ten");
    }
}
