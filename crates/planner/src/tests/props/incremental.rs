//! A [`Planner`] that keeps what it derived from each pod across passes plans exactly what a fresh
//! [`plan`] plans, whatever it planned before: over a sequence of views that change the way a
//! controller's stores change them (pods replaced by new versions, removed, added, moved around in
//! the vector, nodes added, removed, marked and unmarked, evictions in flight coming and going,
//! owners changed in their status, spec or identity, removed and added, budgets' statuses, the
//! controller's calls, policies edited, the clock going on), every pass is compared with a fresh
//! plan of the same view at the same time.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use proptest::prelude::*;

use super::generate::arb_world;
use crate::{
    ClusterView, InFlightEviction, NodeView, OwnerView, Planner, PodPhase, PodView, plan,
    tests::{now, support::Rng},
};

/// One random change of the kind a watch brings between two passes, or the clock going on.
fn change(view: &mut ClusterView, clock: &mut DateTime<Utc>, rng: &mut Rng) -> &'static str {
    let pods = view.pods.len();
    match rng.below(21) {
        // A new version of a pod: a new view, with one of its fields changed (as a watch event
        // replaces it).
        0..=2 if pods > 0 => {
            let i = rng.below(pods);
            let mut pod = PodView::clone(&view.pods[i]);
            match rng.below(7) {
                0 => pod.ready = !pod.ready,
                1 => pod.terminating = !pod.terminating,
                2 => {
                    pod.phase = match pod.phase {
                        PodPhase::Running => PodPhase::Succeeded,
                        _ => PodPhase::Running,
                    }
                }
                3 => {
                    pod.node_name = view
                        .nodes
                        .get(rng.below(view.nodes.len()))
                        .map(|n| n.name.as_str().into())
                }
                4 => pod.node_name = None,
                // Relabelled like another pod (the budgets covering it may change).
                5 => pod.labels = Arc::clone(&view.pods[rng.below(pods)].labels),
                // The same labels in a new copy: a label set the budgets' answers have not met, and
                // one that may be held no more (the answers kept are then cleaned up).
                6 => pod.labels = Arc::new(BTreeMap::clone(&pod.labels)),
                _ => {}
            }
            view.pods[i] = Arc::new(pod);
            "replaced"
        }
        3 if pods > 0 => {
            view.pods.remove(rng.below(pods));
            "removed"
        }
        // A pod added anywhere: a copy under a new name and UID, as a controller's replacement.
        4 if pods > 0 => {
            let mut pod = PodView::clone(&view.pods[rng.below(pods)]);
            let n = rng.below(1_000_000);
            pod.name = format!("{}-r{n}", pod.name).into();
            pod.uid = format!("{}-r{n}", pod.uid).into();
            view.pods.insert(rng.below(pods + 1), Arc::new(pod));
            "added"
        }
        // The store's order changed (a map grown and rehashed), in part or in whole.
        5 => {
            let from = rng.below(pods);
            let to = (from + 1 + rng.below(40)).min(pods);
            rng.shuffle(&mut view.pods[from..to]);
            "reordered"
        }
        // A node gone (its pods stay bound to its name) or a new one.
        6 if !view.nodes.is_empty() && rng.chance(50) => {
            view.nodes.remove(rng.below(view.nodes.len()));
            "node removed"
        }
        6 => {
            let mut node = view.nodes.first().cloned().unwrap_or_default();
            node.name = format!("node-new-{}", rng.below(1_000));
            node.uid = format!("uid-{}", node.name);
            view.nodes.push(NodeView { ..node });
            "node added"
        }
        // Evictions in flight: one launched on a pod of the view, or one answered and gone.
        7 if pods > 0 => {
            let pod = &view.pods[rng.below(pods)];
            view.in_flight.push(InFlightEviction {
                pod_uid: pod.uid.to_string(),
                owner_uid: pod.controller.as_ref().map(|c| c.uid.clone()),
                at: now(),
                unanswered: rng.chance(50),
            });
            "in flight"
        }
        // A budget added (a copy under a new name: its pods now have two), removed, or its selector
        // changed.
        8..=10 if !view.pdbs.is_empty() => {
            let i = rng.below(view.pdbs.len());
            match rng.below(3) {
                0 => {
                    let mut pdb = view.pdbs[i].clone();
                    pdb.name = format!("{}-copy-{}", pdb.name, rng.below(1_000));
                    view.pdbs.push(pdb);
                    "budget added"
                }
                1 => {
                    view.pdbs.remove(i);
                    "budget removed"
                }
                _ => {
                    let other = view.pdbs[rng.below(view.pdbs.len())].selector.clone();
                    view.pdbs[i].selector = other;
                    "budget selector changed"
                }
            }
        }
        // A pod Ready since a moment ago: warming up where its workload sets minReadySeconds.
        12 if pods > 0 => {
            let i = rng.below(pods);
            let mut pod = PodView::clone(&view.pods[i]);
            pod.ready = true;
            pod.ready_changed = Some(*clock - seconds(rng.below(90)));
            view.pods[i] = Arc::new(pod);
            "ready a moment ago"
        }
        // A new version of an owner: its status or spec (which its pods' class does not read), or
        // what names it and its pods' class reads; or an owner gone, or a copy added.
        11 if !view.owners.is_empty() => {
            let i = rng.below(view.owners.len());
            let mut owner = OwnerView::clone(&view.owners[i]);
            match rng.below(7) {
                0 => owner.desired = owner.desired.map(|n| n + 1).or(Some(2)),
                1 => owner.replacing = !owner.replacing,
                2 => owner.exists = !owner.exists,
                // Orphaned, or adopted by another owner's controller.
                3 => {
                    owner.controller = match owner.controller {
                        Some(_) => None,
                        None => view.owners[rng.below(view.owners.len())].controller.clone(),
                    }
                }
                // Deleted and made again under the same name.
                4 => owner.uid = format!("{}-again", owner.uid),
                5 => {
                    view.owners.remove(i);
                    return "owner removed";
                }
                _ => {
                    owner.name = format!("{}-copy-{}", owner.name, rng.below(1_000));
                    owner.uid = format!("{}-copy", owner.uid);
                    view.owners
                        .insert(rng.below(view.owners.len() + 1), Arc::new(owner));
                    return "owner added";
                }
            }
            view.owners[i] = Arc::new(owner);
            "owner changed"
        }
        13 if !view.owners.is_empty() => {
            let i = rng.below(view.owners.len());
            let mut owner = OwnerView::clone(&view.owners[i]);
            owner.min_ready_seconds = [0, 30, 60][rng.below(3)];
            view.owners[i] = Arc::new(owner);
            "minReadySeconds changed"
        }
        // A node marked or unmarked: its pods must move, or no longer.
        14 if !view.nodes.is_empty() => {
            let i = rng.below(view.nodes.len());
            let node = &mut view.nodes[i];
            node.incompatible_since = match node.incompatible_since {
                Some(_) => None,
                None => Some(clock.to_rfc3339()),
            };
            "node marked or unmarked"
        }
        15 => {
            *clock += seconds(rng.below(90));
            "time passed"
        }
        // The controller's calls: one answered, one launched, or the limit moved.
        16 if view.calls.is_some() => {
            let calls = view.calls.as_mut().expect("checked");
            match rng.below(3) {
                0 => calls.running = calls.running.saturating_sub(1),
                1 => calls.running += 1,
                _ => calls.limit = rng.below(6),
            }
            "calls changed"
        }
        // A policy's spec edited: what its decisions read of it.
        17 if !view.policies.is_empty() => {
            let i = rng.below(view.policies.len());
            let spec = &mut view.policies[i].spec;
            match rng.below(3) {
                0 => spec.owner_health_threshold = [50, 75, 90, 100][rng.below(4)],
                1 => spec.respect_pod_disruption_budgets = !spec.respect_pod_disruption_budgets,
                _ => spec.cordon = !spec.cordon,
            }
            "policy changed"
        }
        // A budget's status: a disruption allowed more or less, its healthy pods.
        18 if !view.pdbs.is_empty() => {
            let i = rng.below(view.pdbs.len());
            let pdb = &mut view.pdbs[i];
            match rng.below(2) {
                0 => pdb.disruptions_allowed = (pdb.disruptions_allowed + 1) % 3,
                _ => pdb.current_healthy = pdb.current_healthy.saturating_add(1) % 4,
            }
            "budget status changed"
        }
        // A node cordoned or uncordoned by someone.
        19 if !view.nodes.is_empty() => {
            let i = rng.below(view.nodes.len());
            view.nodes[i].unschedulable = !view.nodes[i].unschedulable;
            "node cordoned or uncordoned"
        }
        // A pod deleted a while ago, still terminating: stuck once the clock goes on.
        20 if pods > 0 => {
            let i = rng.below(pods);
            let mut pod = PodView::clone(&view.pods[i]);
            pod.terminating = true;
            pod.deletion = Some(*clock - seconds(rng.below(90)));
            view.pods[i] = Arc::new(pod);
            "terminating since a while ago"
        }
        _ if !view.in_flight.is_empty() => {
            view.in_flight.remove(rng.below(view.in_flight.len()));
            "answered"
        }
        _ => "none",
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_planner_that_planned_other_views_plans_what_a_fresh_one_does(
        world in arb_world(),
        seed in 1u64..,
        passes in 1usize..12,
    ) {
        let mut view = world.view;
        let mut rng = Rng(seed);
        // Half the owners set minReadySeconds: their pods Ready a moment ago warm up as the clock
        // goes on.
        for owner in &mut view.owners {
            if rng.chance(50) {
                Arc::make_mut(owner).min_ready_seconds = 60;
            }
        }
        let mut planner = Planner::default();
        let mut clock = now();
        for pass in 0..passes {
            let kept = planner.plan(&view, clock);
            prop_assert_eq!(&kept, &plan(&view, clock), "pass {}", pass);
            for _ in 0..=rng.below(4) {
                change(&mut view, &mut clock, &mut rng);
            }
        }
    }
}

fn seconds(n: usize) -> Duration {
    Duration::seconds(i64::try_from(n).unwrap_or(0))
}
