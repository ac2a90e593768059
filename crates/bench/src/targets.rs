//! The bench's targets (bench/results/README.md, "Targets"), judged from one invocation's runs:
//! met, missed (with the reason) or not judged (the scenario does not measure it).

use crate::results::{Run, Scenario, Summary, Tool};
use crate::spread::Spread;
use crate::units::{bucket, megabytes, millis, ratio, secs, two_decimals};

/// k8sm's median makespan within this factor of the lower bound.
pub const MAKESPAN_RATIO: f64 = 1.2;
/// k8sm at least this much faster than parallel drain + PDB where the owners set the pace.
pub const SPEEDUP: f64 = 1.5;
/// Reaction p99, judged at this many nodes or more.
pub const REACTION_P99_S: f64 = 0.5;
pub const REACTION_AT_NODES: usize = 500;
/// A planner pass at 5,000 nodes.
pub const PLAN_MS: f64 = 20.0;
pub const PLAN_AT_NODES: usize = 5000;
/// The controller's own mean pass is judged against `PLAN_MS` from this many nodes.
pub const PLAN_IN_CONTROLLER_AT_NODES: usize = 1000;
/// The criterion group of passes by a planner kept from pass to pass, as the controller plans.
pub const KEPT_PLANNER: &str = "plan-kept/";
/// k8sm's disruptions per pod at most this many…
pub const DISRUPTIONS_PER_POD: f64 = 1.05;
/// …and at most this far above the floor the fleet's free capacity allowed.
pub const ABOVE_FLOOR: f64 = 0.03;
/// Peak RSS, judged at 1,000 nodes / 30,000 pods or more.
pub const RSS_BYTES: f64 = 150e6;
pub const RSS_AT: (usize, usize) = (1000, 30_000);

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Met,
    Missed(String),
    NotJudged(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Short, stable name (the index's column).
    pub key: &'static str,
    pub target: String,
    pub figure: String,
    pub verdict: Verdict,
}

fn met_or(met: bool, reason: impl FnOnce() -> String) -> Verdict {
    if met {
        Verdict::Met
    } else {
        Verdict::Missed(reason())
    }
}

/// Every target, in the order the reports list them.
pub fn judge(summary: &Summary) -> Vec<Target> {
    let k8sm = summary.runs_of(Tool::K8sm);
    let parallel = summary.runs_of(Tool::DrainPdbParallel);
    let speedup = speedup(makespan(&k8sm), makespan(&parallel));
    vec![
        judge_bound(summary),
        judge_makespan(&summary.scenario, &k8sm),
        judge_vs_parallel(speedup),
        judge_speedup(&summary.scenario, speedup),
        judge_unavailable(&k8sm, &parallel),
        judge_landing(&k8sm),
        judge_reaction(&summary.scenario, &k8sm),
        judge_planner(summary, &k8sm),
        judge_rss(&summary.scenario, &k8sm),
        judge_at_scale(&summary.scenario, &k8sm),
    ]
}

/// The makespan over `runs`.
fn makespan(runs: &[&Run]) -> Option<Spread> {
    Spread::over(runs, |r| r.makespan_s)
}

/// The unavailable replica-seconds over `runs`, summed over owners.
fn unavailable(runs: &[&Run]) -> Option<Spread> {
    Spread::over(runs, |r| Some(r.unavailable_replica_s()))
}

/// k8sm's makespan, parallel drain + PDB's and how many times faster k8sm's median is.
type Speedup = (Spread, Spread, f64);

fn speedup(k8sm: Option<Spread>, parallel: Option<Spread>) -> Option<Speedup> {
    match (k8sm, parallel) {
        (Some(k), Some(p)) => Some((k, p, p.median / k.median)),
        _ => None,
    }
}

/// k8sm's runs that did not complete.
fn incomplete(k8sm: &[&Run]) -> usize {
    k8sm.iter().filter(|r| !r.completed).count()
}

/// The scenario is as large as the RSS and at-scale targets ask.
fn at_scale(s: &Scenario) -> bool {
    s.nodes >= RSS_AT.0 && s.pods >= RSS_AT.1
}

/// No owner below its bound, for every tool in every run.
fn judge_bound(summary: &Summary) -> Target {
    let tools = summary.tools();
    let below: Vec<(Tool, usize, usize)> = tools
        .iter()
        .map(|t| {
            let runs = summary.runs_of(*t);
            let worst = runs.iter().map(|r| r.owners_violated()).max().unwrap_or(0);
            let runs_below = runs.iter().filter(|r| r.owners_violated() > 0).count();
            (*t, worst, runs_below)
        })
        .collect();
    let figure = below
        .iter()
        .map(|(t, worst, _)| format!("{}: {worst}", t.slug()))
        .collect::<Vec<_>>()
        .join(", ");
    let offenders: Vec<String> = below
        .iter()
        .filter(|(_, worst, _)| *worst > 0)
        .map(|(t, worst, runs)| {
            format!(
                "{} ({worst} owners in its worst run, {runs} run(s))",
                t.slug()
            )
        })
        .collect();
    Target {
        key: "bound",
        target: "0 owners below their bound, every tool, every run".into(),
        figure: if tools.is_empty() {
            "–".into()
        } else {
            format!("most owners below in a run: {figure}")
        },
        verdict: if tools.is_empty() {
            Verdict::NotJudged("no runs".into())
        } else {
            met_or(offenders.is_empty(), || {
                format!("below their bound: {}", offenders.join(", "))
            })
        },
    }
}

/// k8sm near the bound.
fn judge_makespan(s: &Scenario, k8sm: &[&Run]) -> Target {
    let bound = s.bound_seconds();
    let k8sm_makespan = makespan(k8sm);
    let incomplete = incomplete(k8sm);
    Target {
        key: "makespan",
        // The bound is the scenario's, so it goes with the figure, not in the target: the index
        // shows one target row for every scenario.
        target: format!("k8sm's makespan ≤ {MAKESPAN_RATIO}× the scenario's lower bound"),
        figure: k8sm_makespan.map_or("–".into(), |m| {
            if s.bound_unknown().is_some() {
                return format!("{}; bound unknown", m.show(secs));
            }
            let spread = Spread {
                median: m.median / bound,
                min: m.min / bound,
                max: m.max / bound,
                n: m.n,
            };
            format!("{} of {}", spread.show(ratio), secs(bound))
        }),
        verdict: match k8sm_makespan {
            None => Verdict::NotJudged("no completed k8sm run".into()),
            Some(_) if incomplete > 0 => {
                Verdict::Missed(format!("{incomplete} k8sm run(s) did not complete"))
            }
            Some(_) if s.bound_unknown().is_some() => Verdict::NotJudged(format!(
                "bound unknown: {}",
                s.bound_unknown().unwrap_or_default()
            )),
            Some(m) => met_or(m.median <= MAKESPAN_RATIO * bound, || {
                format!(
                    "median {} is {} the bound of {}",
                    secs(m.median),
                    ratio(m.median / bound),
                    secs(bound)
                )
            }),
        },
    }
}

/// Never slower than parallel drain + PDB at equal concurrency.
fn judge_vs_parallel(speedup: Option<Speedup>) -> Target {
    Target {
        key: "vs-parallel",
        target: "k8sm never slower than parallel drain + PDB at equal concurrency (medians)".into(),
        figure: speedup.map_or("–".into(), |(k, p, x)| {
            format!(
                "{} against {}: {} faster",
                secs(k.median),
                secs(p.median),
                ratio(x)
            )
        }),
        verdict: match speedup {
            None => {
                Verdict::NotJudged("needs k8sm and drain-pdb-parallel runs that completed".into())
            }
            Some((k, p, _)) => met_or(k.median <= p.median, || {
                format!("k8sm's median {} > {}", secs(k.median), secs(p.median))
            }),
        },
    }
}

/// ≥ 1.5× faster where the owners set the pace.
fn judge_speedup(s: &Scenario, speedup: Option<Speedup>) -> Target {
    let set_by = s.bound_set_by();
    Target {
        key: "speedup",
        target: format!("≥ {SPEEDUP}× faster than parallel drain + PDB where owners set the pace"),
        figure: speedup.map_or("–".into(), |(_, _, x)| ratio(x)),
        verdict: match (speedup, set_by) {
            (None, _) => {
                Verdict::NotJudged("needs k8sm and drain-pdb-parallel runs that completed".into())
            }
            (Some(_), None) => Verdict::NotJudged(format!(
                "bound unknown: {}",
                s.bound_unknown().unwrap_or_default()
            )),
            (Some((_, _, x)), Some("owner waves")) => {
                met_or(x >= SPEEDUP, || format!("{} < {SPEEDUP}×", ratio(x)))
            }
            (Some(_), Some(term)) => Verdict::NotJudged(format!(
                "the {term} set the pace in this scenario, not the owners"
            )),
        },
    }
}

/// No more unavailable replica-seconds than parallel drain + PDB.
fn judge_unavailable(k8sm: &[&Run], parallel: &[&Run]) -> Target {
    let availability = match (unavailable(k8sm), unavailable(parallel)) {
        (Some(k), Some(p)) => Some((k.median, p.median)),
        _ => None,
    };
    Target {
        key: "unavailable",
        target:
            "no more unavailable replica-seconds than parallel drain + PDB (medians of the sums)"
                .into(),
        figure: availability.map_or("–".into(), |(k, p)| format!("{k:.1} against {p:.1}")),
        verdict: match availability {
            None => Verdict::NotJudged("needs k8sm and drain-pdb-parallel runs".into()),
            Some((k, p)) => met_or(k <= p, || format!("k8sm {k:.1} > {p:.1}")),
        },
    }
}

/// Land once: k8sm's median disruptions per pod, against the absolute target and against the median
/// floor its runs' placements allowed (docs/decisions/0002-land-once.md).
fn judge_landing(k8sm: &[&Run]) -> Target {
    let complete: Vec<&Run> = k8sm.iter().copied().filter(|r| r.completed).collect();
    let per_pod = Spread::over(&complete, Run::disruptions_per_pod);
    let floor = Spread::over(&complete, Run::disruptions_floor);
    Target {
        key: "land-once",
        target: format!(
            "k8sm's disruptions per pod ≤ {DISRUPTIONS_PER_POD:.2} and within {ABOVE_FLOOR:.2} of the floor the \
             fleet's free capacity allowed (medians of its complete runs)"
        ),
        figure: match (per_pod, floor) {
            (Some(p), Some(f)) => {
                format!("{} (floor {})", p.show(two_decimals), f.show(two_decimals))
            }
            (Some(p), None) => format!("{} (floor not measured)", p.show(two_decimals)),
            _ => "–".into(),
        },
        verdict: match (per_pod, floor) {
            (Some(p), Some(f)) => {
                let above = p.median - f.median;
                met_or(
                    p.median <= DISRUPTIONS_PER_POD && above <= ABOVE_FLOOR,
                    || {
                        format!(
                            "{:.2} per pod, {above:.2} above the floor {:.2}",
                            p.median, f.median
                        )
                    },
                )
            }
            (Some(_), None) => Verdict::NotJudged("the floor was not measured".into()),
            _ => Verdict::NotJudged("no complete k8sm run".into()),
        },
    }
}

/// Reaction p99, by the benchmark's watches (the controller's histogram is shown beside it, never
/// instead).
fn judge_reaction(s: &Scenario, k8sm: &[&Run]) -> Target {
    let worst = k8sm
        .iter()
        .filter_map(|r| r.reaction_p99())
        .max_by(f64::total_cmp);
    let histogram = k8sm
        .iter()
        .filter_map(|r| r.controller_reaction())
        .max_by(|a, b| a.p99.seconds().total_cmp(&b.p99.seconds()));
    let beside = histogram.map_or(String::new(), |h| {
        format!("; controller histogram {}", bucket(h.p99))
    });
    Target {
        key: "reaction",
        target: format!(
            "reaction p99 < {} at {REACTION_AT_NODES} nodes, by the benchmark's watches",
            millis(REACTION_P99_S)
        ),
        figure: worst.map_or("–".into(), |p| {
            format!("{} (worst run){beside}", millis(p))
        }),
        verdict: match worst {
            None => Verdict::NotJudged("no reaction measured".into()),
            Some(_) if s.nodes < REACTION_AT_NODES => {
                Verdict::NotJudged(format!("{} nodes; judged at {REACTION_AT_NODES}", s.nodes))
            }
            Some(p) => met_or(p < REACTION_P99_S, || format!("p99 {}", millis(p))),
        },
    }
}

/// Planner pass at 5,000 nodes: the slowest of the controller's way of planning (a kept planner,
/// `plan-kept/…`, with and without budgets) when criterion measured it, else the slowest pass
/// measured; and, at scale, the mean pass inside the controller during the runs.
fn judge_planner(summary: &Summary, k8sm: &[&Run]) -> Target {
    let s = &summary.scenario;
    let at_size = || summary.planner.iter().filter(|p| p.nodes == PLAN_AT_NODES);
    let kept = at_size().any(|p| p.id.starts_with(KEPT_PLANNER));
    let plan = at_size()
        .filter(|p| !kept || p.id.starts_with(KEPT_PLANNER))
        .max_by(|a, b| a.mean_ms.total_cmp(&b.mean_ms));
    let in_controller = k8sm
        .iter()
        .filter_map(|r| r.controller.as_ref()?.plan_mean_ms)
        .max_by(f64::total_cmp);
    let judged_in_controller = in_controller.filter(|_| s.nodes >= PLAN_IN_CONTROLLER_AT_NODES);
    let mut figure = plan.map_or("–".into(), |p| {
        format!(
            "{:.2} ms (slowest: `{}`)",
            p.mean_ms,
            if p.id.is_empty() { "plan" } else { &p.id }
        )
    });
    if let Some(ms) = in_controller {
        figure += &format!("; in the controller {ms:.2} ms at {} nodes", s.nodes);
    }
    Target {
        key: "planner",
        target: format!(
            "planner pass < {PLAN_MS} ms at {PLAN_AT_NODES} nodes (criterion mean of the slowest variant), and in \
             the controller from {PLAN_IN_CONTROLLER_AT_NODES} nodes"
        ),
        figure,
        verdict: match plan {
            None => Verdict::NotJudged(
                "criterion did not run (`cargo xtask bench` runs it first)".into(),
            ),
            Some(p) => {
                let slow: Vec<String> = [
                    (p.mean_ms >= PLAN_MS).then(|| format!("{:.2} ms", p.mean_ms)),
                    judged_in_controller
                        .filter(|ms| *ms >= PLAN_MS)
                        .map(|ms| format!("{ms:.2} ms in the controller")),
                ]
                .into_iter()
                .flatten()
                .collect();
                met_or(slow.is_empty(), || slow.join(", "))
            }
        },
    }
}

/// Peak RSS at 1,000 nodes / 30,000 pods.
fn judge_rss(s: &Scenario, k8sm: &[&Run]) -> Target {
    let rss = k8sm
        .iter()
        .filter_map(|r| Some(r.controller.as_ref()?.peak_rss_bytes as f64))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    Target {
        key: "rss",
        target: format!(
            "controller peak RSS < {} at {} nodes / {} pods",
            megabytes(RSS_BYTES),
            RSS_AT.0,
            RSS_AT.1
        ),
        figure: rss.map_or("–".into(), |r| {
            format!(
                "{} (largest run) at {} nodes / {} pods",
                megabytes(r),
                s.nodes,
                s.pods
            )
        }),
        verdict: match rss {
            None => Verdict::NotJudged("no k8sm run".into()),
            Some(_) if !at_scale(s) => Verdict::NotJudged(format!(
                "{} nodes / {} pods; judged at {} / {}",
                s.nodes, s.pods, RSS_AT.0, RSS_AT.1
            )),
            Some(r) => met_or(r < RSS_BYTES, || megabytes(r)),
        },
    }
}

/// The 1,000-node upgrade completes.
fn judge_at_scale(s: &Scenario, k8sm: &[&Run]) -> Target {
    let incomplete = incomplete(k8sm);
    Target {
        key: "at-scale",
        target: format!(
            "a {}-node / {}-pod upgrade by k8sm runs to completion",
            RSS_AT.0, RSS_AT.1
        ),
        figure: format!(
            "{} of {} k8sm runs completed",
            k8sm.len() - incomplete,
            k8sm.len()
        ),
        verdict: if !at_scale(s) || k8sm.is_empty() {
            Verdict::NotJudged(format!("{} nodes / {} pods", s.nodes, s.pods))
        } else {
            met_or(incomplete == 0, || {
                format!("{incomplete} run(s) incomplete")
            })
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::summary;
    use crate::landing::Landed;
    use crate::results::PlannerBench;

    fn verdict<'a>(targets: &'a [Target], key: &str) -> &'a Verdict {
        &targets.iter().find(|t| t.key == key).unwrap().verdict
    }

    #[test]
    fn targets_are_judged_on_the_medians() {
        let targets = judge(&summary());
        // The sequential drain + PDB had 2 owners below their bound in its run.
        assert!(
            matches!(verdict(&targets, "bound"), Verdict::Missed(r) if r.contains("drain-pdb (2 owners")),
            "{targets:?}"
        );
        // k8sm's median 33 s against a 30 s bound: 1.10×.
        assert_eq!(verdict(&targets, "makespan"), &Verdict::Met);
        assert_eq!(
            targets.iter().find(|t| t.key == "makespan").unwrap().figure,
            "1.10× [1.00×–1.20×] of 30.0 s"
        );
        // 60 s against 33 s: 1.82× faster, owners set the pace.
        assert_eq!(verdict(&targets, "vs-parallel"), &Verdict::Met);
        assert_eq!(verdict(&targets, "speedup"), &Verdict::Met);
        // 12.0 against 20.0 replica-seconds.
        assert_eq!(verdict(&targets, "unavailable"), &Verdict::Met);
        // 10 nodes: the reaction and RSS targets apply at scale only; the planner ran at 25 ms.
        assert!(matches!(
            verdict(&targets, "reaction"),
            Verdict::NotJudged(_)
        ));
        assert!(matches!(verdict(&targets, "rss"), Verdict::NotJudged(_)));
        assert!(matches!(verdict(&targets, "planner"), Verdict::Missed(r) if r == "25.00 ms"));
    }

    /// Land once is judged on k8sm's complete runs, against 1.05 per pod and against the floor
    /// their placements allowed; reports from before the floor was measured are not judged.
    #[test]
    fn land_once_is_judged_against_the_floor_and_the_absolute_target() {
        let with = |disruptions: u64, forced: u64| {
            let mut s = summary();
            for run in s.runs.iter_mut().filter(|r| r.tool == Tool::K8sm) {
                run.disruptions = disruptions;
                run.landed = Some(Landed {
                    to_drain: forced + 3,
                    forced,
                });
            }
            judge(&s)
        };
        assert!(matches!(
            verdict(&judge(&summary()), "land-once"),
            Verdict::NotJudged(r) if r.contains("floor")
        ));
        // 100 pods: 1.04 per pod against a floor of 1.02.
        assert_eq!(verdict(&with(104, 2), "land-once"), &Verdict::Met);
        // Within 0.02 of the floor, above 1.05.
        assert!(
            matches!(verdict(&with(108, 6), "land-once"), Verdict::Missed(r) if r.contains("1.08"))
        );
        // Under 1.05, 0.04 above the floor.
        assert!(matches!(
            verdict(&with(105, 1), "land-once"),
            Verdict::Missed(r) if r.contains("0.04 above the floor 1.01")
        ));
        let mut s = summary();
        for run in s.runs.iter_mut().filter(|r| r.tool == Tool::K8sm) {
            run.completed = false;
        }
        assert!(matches!(
            verdict(&judge(&s), "land-once"),
            Verdict::NotJudged(_)
        ));
    }

    /// The controller plans with a kept planner: when criterion measured one, the target is judged
    /// on the slowest of its variants (with budgets, typically), even if a fresh pass measured
    /// faster; without one, on the slowest pass. At scale, the controller's own passes are
    /// judged too.
    #[test]
    fn the_planner_target_is_judged_on_the_slowest_kept_variant_and_in_the_controller() {
        let mut s = summary();
        let bench = |id: &str, mean_ms: f64| PlannerBench {
            id: id.into(),
            measured_at: None,
            nodes: 5000,
            pods: 150_000,
            mean_ms,
            median_ms: mean_ms,
        };
        s.planner = vec![
            bench("plan/nodes/5000", 15.0),
            bench("plan-kept/nodes/5000", 12.0),
            bench("plan-kept/nodes-with-budgets/5000", 22.0),
        ];
        let targets = judge(&s);
        assert!(matches!(verdict(&targets, "planner"), Verdict::Missed(r) if r == "22.00 ms"));
        s.planner[2].mean_ms = 18.0;
        assert_eq!(verdict(&judge(&s), "planner"), &Verdict::Met);
        s.planner.truncate(1);
        assert_eq!(verdict(&judge(&s), "planner"), &Verdict::Met);

        // The fixture's controller planned in 1.2 ms per pass; at 1,000 nodes, 36 ms is judged.
        s.scenario.nodes = 1000;
        for run in s.runs.iter_mut().filter(|r| r.tool == Tool::K8sm) {
            run.controller.as_mut().unwrap().plan_mean_ms = Some(36.0);
        }
        let planner = judge(&s).into_iter().find(|t| t.key == "planner").unwrap();
        assert_eq!(
            planner.verdict,
            Verdict::Missed("36.00 ms in the controller".into())
        );
        assert!(
            planner
                .figure
                .ends_with("in the controller 36.00 ms at 1000 nodes"),
            "{planner:?}"
        );
        s.scenario.nodes = 999;
        assert_eq!(verdict(&judge(&s), "planner"), &Verdict::Met);
    }

    /// Without the apiserver's eviction throughput the bound is unknown: neither the makespan nor
    /// the speedup is judged against the terms that were measured.
    #[test]
    fn an_uncalibrated_bound_is_unknown_and_not_judged() {
        let mut s = summary();
        let terms = s.scenario.lower_bound.terms.as_mut().unwrap();
        terms.evictions_per_second = None;
        terms.eviction_throughput_s = None;
        let targets = judge(&s);
        for key in ["makespan", "speedup"] {
            assert!(
                matches!(verdict(&targets, key), Verdict::NotJudged(r) if r.contains("not calibrated")),
                "{key}: {targets:?}"
            );
        }
        assert!(
            targets
                .iter()
                .find(|t| t.key == "makespan")
                .unwrap()
                .figure
                .ends_with("bound unknown"),
            "{targets:?}"
        );
        // The eviction throughput set the pace: the owners did not.
        let mut s = summary();
        s.scenario.lower_bound.terms.as_mut().unwrap().limit = "eviction throughput".into();
        assert!(matches!(
            verdict(&judge(&s), "speedup"),
            Verdict::NotJudged(r) if r.contains("eviction throughput set the pace")
        ));
    }

    #[test]
    fn a_slower_median_misses_and_nodes_pace_is_not_judged_for_speed() {
        let mut s = summary();
        for run in s.runs.iter_mut().filter(|r| r.tool == Tool::K8sm) {
            run.makespan_s = run.makespan_s.map(|m| m * 2.0);
        }
        s.scenario.lower_bound.terms.as_mut().unwrap().limit = "node waves".into();
        let targets = judge(&s);
        assert!(matches!(
            verdict(&targets, "vs-parallel"),
            Verdict::Missed(_)
        ));
        assert!(matches!(verdict(&targets, "makespan"), Verdict::Missed(r) if r.contains("2.20×")));
        assert!(matches!(
            verdict(&targets, "speedup"),
            Verdict::NotJudged(_)
        ));
    }

    #[test]
    fn at_scale_the_reaction_and_memory_are_judged() {
        let mut s = summary();
        s.scenario.nodes = 1000;
        s.scenario.pods = 30_000;
        let targets = judge(&s);
        // The benchmark's watches saw 250 ms at most, though the worst run's histogram p99 is above
        // its last bucket: the watches judge, the histogram is shown beside.
        assert_eq!(verdict(&targets, "reaction"), &Verdict::Met);
        assert_eq!(
            targets.iter().find(|t| t.key == "reaction").unwrap().figure,
            "250 ms (worst run); controller histogram > 120 s"
        );
        s.runs[3].reaction_p99_s = Some(0.7);
        assert!(matches!(verdict(&judge(&s), "reaction"), Verdict::Missed(r) if r == "p99 700 ms"));
        // 40 MB.
        assert_eq!(verdict(&targets, "rss"), &Verdict::Met);
        assert_eq!(verdict(&targets, "at-scale"), &Verdict::Met);
    }
}
