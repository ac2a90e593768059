//! The arithmetic of the report: percentiles and the scenario's lower bound on the makespan.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0 < p ≤ 100) of `samples` by the nearest-rank method: the smallest sample that at least
/// `p`% of the samples are less than or equal to. `None` without samples.
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

/// The least time any tool can take to upgrade every node without breaking the SLA, and how it was derived.
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
    /// `(waves − 1) · pod_ready_delay + restart_delay`.
    pub seconds: f64,
}

/// The lower bound of a scenario whose owners have `replicas`, under threshold `threshold_percent`.
///
/// Every pod runs on a node that must be upgraded, so every pod is disrupted at least once. The SLA lets an owner of
/// `d` replicas have at most `a = d − floor` pods down at once, where `floor = min(ceil(t·d), d−1)` is the
/// invariant's bound, so its pods go in at least `ceil(d / a)` waves, and a wave can start only when the previous
/// wave's replacements are Ready, at least one pod-ready delay later. The last wave need not wait for its own
/// replacements, but its node must still restart its executor. Hence, with unlimited nodes in parallel and zero
/// scheduling and reaction latency:
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
        // 10 replicas at 90%: floor 9, one at a time, 10 waves. 50 replicas: floor 45, 5 at a time, 10 waves.
        // 15 replicas: ceil(13.5) = 14, one at a time, 15 waves: the critical owner.
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
}
