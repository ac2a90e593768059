//! `k8sm-replay`: the controller's caches and pass fed synthetic watch streams, with no apiserver.
//! A fleet's first lists fill the caches, then each step delivers an upgrade's next events and the
//! controller's pass (the view built from the caches, then the plan) runs once, timed. The
//! process's resident memory is the caches' and the pass's: the harness keeps a few bytes per pod
//! of its own.

pub mod fleet;
pub mod objects;

use std::fmt::Write;
use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use k8sm_api::MaxConcurrentNodes;
use k8sm_controller::Planning;
use k8sm_controller::Stores;
use k8sm_planner::Calls;

use crate::process::status_kb;
use crate::spread::Spread;
use crate::stats::percentile;
use fleet::Fleet;

pub struct Config {
    pub nodes: usize,
    pub pods_per_node: usize,
    pub max_concurrent_nodes: MaxConcurrentNodes,
    /// Timed passes, after the first (which converts every pod and owner).
    pub passes: usize,
    /// The calls the controller may have at once: a pass plans no more evictions, and each step
    /// carries out at most so many.
    pub calls: usize,
}

/// A replay's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figures {
    pub nodes: usize,
    pub pods: usize,
    pub draining_nodes: usize,
    pub passes: usize,
    pub calls: usize,
    /// Watch events delivered per step (mean).
    pub events_per_step: f64,
    pub evictions_per_step: f64,
    pub node_writes_per_step: f64,
    /// Nodes upgraded by the end of the replay.
    pub upgraded_nodes: usize,
    /// The most owners below their budget's bound at once (the plan's evictions are carried out as
    /// planned).
    pub owners_below_bound: usize,
    /// Parsing and applying one watch event to the caches, mean, microseconds.
    pub apply_event_us: f64,
    /// The first lists, parsed and applied.
    pub list_s: f64,
    /// The first pass, which converts every pod and owner.
    pub first_pass_ms: f64,
    pub pass_ms: Quantiles,
    pub observe_ms: Quantiles,
    pub plan_ms: Quantiles,
    /// Actions planned per pass (mean).
    pub actions_per_pass: f64,
    pub rss_start_mb: f64,
    /// Once the caches hold the first lists.
    pub rss_listed_mb: f64,
    /// At the end.
    pub rss_end_mb: f64,
    pub rss_peak_mb: f64,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    fn of(samples: &[f64]) -> Self {
        let at = |p| percentile(samples, p).unwrap_or(f64::NAN);
        Self {
            p50: at(50.0),
            p90: at(90.0),
            p99: at(99.0),
            max: at(100.0),
        }
    }
}

fn rss_mb(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status_kb(&status, key).unwrap_or(0) as f64 / 1024.0
}

/// `calls` free for a pass's evictions: the harness carries out at most so many a step, each
/// answered within it.
fn free_calls(calls: usize) -> Option<Calls> {
    Some(Calls {
        limit: calls,
        ..Calls::default()
    })
}

/// Replays an upgrade of `config`'s fleet and times the controller's pass.
pub fn run(config: &Config) -> Figures {
    let rss_start_mb = rss_mb("VmRSS");
    let start = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap_or_default();
    let mut fleet = Fleet::new(
        config.nodes,
        config.pods_per_node,
        config.max_concurrent_nodes,
        start,
    );
    let (stores, mut feeds) = Stores::fed();
    let listing = Instant::now();
    fleet.list(&mut feeds, start);
    let list_s = listing.elapsed().as_secs_f64();
    let rss_listed_mb = rss_mb("VmRSS");

    let mut planning = Planning::default();
    let mut now = start;
    let first = Instant::now();
    let mut last = planning.plan(&stores, free_calls(config.calls), now).plan;
    let first_pass_ms = first.elapsed().as_secs_f64() * 1e3;

    let (mut pass, mut observe, mut plan) = (Vec::new(), Vec::new(), Vec::new());
    let (mut events, mut applying, mut actions) = (0usize, 0.0, 0usize);
    let (mut evictions, mut node_writes, mut upgraded) = (0usize, 0usize, 0usize);
    let mut below_bound = 0;
    for _ in 0..config.passes {
        now += Duration::seconds(1);
        let delivering = Instant::now();
        let delivered = fleet.step(&mut feeds, &last, config.calls, now);
        applying += delivering.elapsed().as_secs_f64();
        events += delivered.events;
        evictions += delivered.evictions;
        node_writes += delivered.node_writes;
        upgraded = delivered.upgraded;
        below_bound = below_bound.max(delivered.below_bound);
        let passing = Instant::now();
        let planned = planning.plan(&stores, free_calls(config.calls), now);
        pass.push(passing.elapsed().as_secs_f64() * 1e3);
        observe.push(planned.observed_in.as_secs_f64() * 1e3);
        plan.push(planned.planned_in.as_secs_f64() * 1e3);
        actions += planned.plan.actions.len();
        last = planned.plan;
    }
    let steps = config.passes.max(1) as f64;
    Figures {
        nodes: fleet.nodes(),
        pods: fleet.pods(),
        draining_nodes: config.max_concurrent_nodes.resolve(config.nodes),
        passes: config.passes,
        calls: config.calls,
        evictions_per_step: evictions as f64 / steps,
        node_writes_per_step: node_writes as f64 / steps,
        upgraded_nodes: upgraded,
        owners_below_bound: below_bound,
        events_per_step: events as f64 / steps,
        apply_event_us: applying * 1e6 / events.max(1) as f64,
        list_s,
        first_pass_ms,
        pass_ms: Quantiles::of(&pass),
        observe_ms: Quantiles::of(&observe),
        plan_ms: Quantiles::of(&plan),
        actions_per_pass: actions as f64 / steps,
        rss_start_mb,
        rss_listed_mb,
        rss_end_mb: rss_mb("VmRSS"),
        rss_peak_mb: rss_mb("VmHWM"),
    }
}

/// The figures as Markdown: per fleet size, each figure's median [min–max] over its runs; then a
/// row per run.
pub fn render(all: &[Figures]) -> String {
    let mut sizes: Vec<(usize, usize)> = all.iter().map(|f| (f.nodes, f.draining_nodes)).collect();
    sizes.dedup();
    let mut out = String::from(
        "| nodes | pods | draining | runs | pass p50 | pass p99 | observe p99 | plan p99 | RSS peak | per pod |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (nodes, draining) in sizes {
        let runs: Vec<&Figures> = all
            .iter()
            .filter(|f| (f.nodes, f.draining_nodes) == (nodes, draining))
            .collect();
        let spread = |figure: fn(&Figures) -> f64, format: fn(f64) -> String| {
            Spread::of(runs.iter().map(|f| figure(f)))
                .map(|s| s.show(format))
                .unwrap_or_default()
        };
        let ms = |v: f64| format!("{v:.1} ms");
        let _ = writeln!(
            out,
            "| {nodes} | {} | {draining} | {} | {} | {} | {} | {} | {} | {} |",
            runs.first().map_or(0, |f| f.pods),
            runs.len(),
            spread(|f| f.pass_ms.p50, ms),
            spread(|f| f.pass_ms.p99, ms),
            spread(|f| f.observe_ms.p99, ms),
            spread(|f| f.plan_ms.p99, ms),
            spread(|f| f.rss_peak_mb, |v| format!("{v:.0} MB")),
            spread(per_pod_kb, |v| format!("{v:.2} KB")),
        );
    }
    out.push_str(
        "\n| nodes | draining | events/step | evictions/step | pass p50 | p90 | p99 | max | observe p99 | plan p99 \
         | first pass | list | RSS listed | RSS peak | below bound |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for f in all {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.1} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} ms \
             | {:.1} s | {:.0} MB | {:.0} MB | {} |",
            f.nodes,
            f.draining_nodes,
            f.events_per_step,
            f.evictions_per_step,
            f.pass_ms.p50,
            f.pass_ms.p90,
            f.pass_ms.p99,
            f.pass_ms.max,
            f.observe_ms.p99,
            f.plan_ms.p99,
            f.first_pass_ms,
            f.list_s,
            f.rss_listed_mb,
            f.rss_peak_mb,
            f.owners_below_bound,
        );
    }
    out
}

/// Peak resident memory above the process's start, per pod.
fn per_pod_kb(f: &Figures) -> f64 {
    (f.rss_peak_mb - f.rss_start_mb) * 1024.0 / f.pods.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness closes the loop: the controller's plans, carried out, upgrade the whole fleet,
    /// and no owner goes below its bound on the way (counted from the fleet's own truth).
    #[test]
    fn the_controllers_plans_carried_out_upgrade_a_small_fleet() {
        let start = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let percent = "20%".parse().expect("a valid maxConcurrentNodes");
        let mut fleet = Fleet::new(20, 10, percent, start);
        let (stores, mut feeds) = Stores::fed();
        fleet.list(&mut feeds, start);
        let mut planning = Planning::default();
        let mut now = start;
        let mut plan = planning.plan(&stores, free_calls(16), now).plan;
        let mut evictions = 0;
        for _ in 0..2_000 {
            now += Duration::seconds(1);
            let delivered = fleet.step(&mut feeds, &plan, 16, now);
            assert_eq!(delivered.below_bound, 0, "an owner went below its bound");
            evictions += delivered.evictions;
            if delivered.upgraded == 20 {
                assert!(
                    evictions >= 200,
                    "every pod moved at least once: {evictions}"
                );
                return;
            }
            plan = planning.plan(&stores, free_calls(16), now).plan;
        }
        panic!("the fleet was not upgraded in 2,000 steps");
    }

    #[test]
    fn a_pod_uid_names_its_slot_and_serial() {
        let owner = objects::OwnerShape {
            namespace: "team-000",
            name: "app-00001",
            replicas: 2,
            ready: 2,
            min_available: 1,
        };
        let pod = objects::pod(
            &objects::PodShape {
                owner: &owner,
                slot: 7,
                serial: 51,
                node: Some("node-00003"),
                stage: objects::PodStage::Ready,
            },
            9,
            DateTime::<Utc>::from_timestamp(0, 0).unwrap_or_default(),
        );
        assert_eq!(objects::pod_of_uid(&pod.view.uid), Some((7, 51)));
        assert!(pod.view.ready);
        assert_eq!(pod.view.node_name.as_deref(), Some("node-00003"));
    }
}
