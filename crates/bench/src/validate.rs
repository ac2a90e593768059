//! The model against the cluster, owner by owner (`k8sm-bench --model --compare-with
//! <report>.json`): for the same fleet, each owner's evictions and its own makespan (seconds from
//! the upgrade's start until it last had all its replicas Ready again) in the model's runs (one per
//! tie-break seed), against k8sm's runs of a report. The error is the median of the model's runs
//! less the median of the cluster's, over the latter.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::ModelRun;
use crate::results::{Summary, Tool};
use crate::spread::Spread;
use crate::stats::percentile;
use crate::workload::Workload;

/// One owner's figures in the model and over the cluster's runs.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerComparison {
    pub name: String,
    pub replicas: u32,
    pub model_evictions: Vec<f64>,
    pub cluster_evictions: Vec<f64>,
    pub model_restored: Vec<f64>,
    pub cluster_restored: Vec<f64>,
}

impl OwnerComparison {
    /// (median of the model's runs − median of the cluster's) / the latter, for the makespan;
    /// `None` where either side lacks it.
    pub fn makespan_error(&self) -> Option<f64> {
        relative_error(
            median(&self.model_restored)?,
            median(&self.cluster_restored)?,
        )
    }

    pub fn evictions_error(&self) -> Option<f64> {
        relative_error(
            median(&self.model_evictions)?,
            median(&self.cluster_evictions)?,
        )
    }
}

/// The comparison of `model` (the model's upgrades of `fleet`) with k8sm's runs in `summary`, which
/// must be of the same fleet: the same owners with the same replicas.
pub fn compare(
    fleet: &Workload,
    model: &[ModelRun],
    summary: &Summary,
) -> anyhow::Result<Vec<OwnerComparison>> {
    let runs = summary.runs_of(Tool::K8sm);
    anyhow::ensure!(!runs.is_empty(), "the report has no run of k8sm");
    let mut by_owner: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for cluster_run in &runs {
        for owner in &cluster_run.owners {
            let entry = by_owner.entry(owner.name.as_str()).or_default();
            // The tool's evictions: a rollout's own replacements are not the model's to make.
            entry.0.push(f64::from(
                owner.disruptions.saturating_sub(owner.outside_disruptions),
            ));
            entry.1.extend(owner.restored_s);
        }
    }
    let mut compared = Vec::new();
    for owner in &fleet.owners {
        let Some((evictions, restored)) = by_owner.remove(owner.name.as_str()) else {
            anyhow::bail!(
                "owner {} of the model's fleet is not in the report: not the same fleet (seed, sizes, shape)",
                owner.name
            );
        };
        compared.push(OwnerComparison {
            name: owner.name.clone(),
            replicas: owner.replicas,
            model_evictions: model
                .iter()
                .map(|run| {
                    run.evictions_by_owner
                        .get(&owner.name)
                        .copied()
                        .unwrap_or(0) as f64
                })
                .collect(),
            cluster_evictions: evictions,
            model_restored: model
                .iter()
                .filter_map(|run| run.owner_restored.get(&owner.name).copied())
                .collect(),
            cluster_restored: restored,
        });
    }
    if let Some(extra) = by_owner.keys().next() {
        anyhow::bail!(
            "owner {extra} of the report is not in the model's fleet: not the same fleet"
        );
    }
    Ok(compared)
}

/// The makespans of the model's runs that finished.
pub fn makespans(model: &[ModelRun]) -> Vec<f64> {
    model.iter().filter_map(|run| run.makespan).collect()
}

/// A Markdown table of the comparison, and the median absolute errors; `model` and `cluster` the
/// whole upgrade's makespans.
pub fn render(compared: &[OwnerComparison], model: &[f64], cluster: &[f64]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| owner | replicas | evictions: model (median [min–max]) | cluster | error | makespan: model | cluster \
         | error |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    let spread = |values: &[f64], unit: &str| {
        Spread::of(values.iter().copied()).map_or("–".to_owned(), |s| {
            format!("{:.1}{unit} [{:.1}–{:.1}{unit}]", s.median, s.min, s.max)
        })
    };
    let percent = |e: Option<f64>| e.map_or("–".to_owned(), |e| format!("{:+.0} %", e * 100.0));
    for c in compared {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.name,
            c.replicas,
            spread(&c.model_evictions, ""),
            spread(&c.cluster_evictions, ""),
            percent(c.evictions_error()),
            spread(&c.model_restored, " s"),
            spread(&c.cluster_restored, " s"),
            percent(c.makespan_error()),
        );
    }
    let abs = |errors: Vec<f64>| median(&errors.iter().map(|e| e.abs()).collect::<Vec<_>>());
    let makespans: Vec<f64> = compared
        .iter()
        .filter_map(OwnerComparison::makespan_error)
        .collect();
    let evictions: Vec<f64> = compared
        .iter()
        .filter_map(OwnerComparison::evictions_error)
        .collect();
    let signed = median(&makespans);
    let _ = writeln!(
        out,
        "\nMedian absolute error over owners: makespan {} ({} owners; median signed error {}), evictions {} ({} \
         owners). Whole upgrade: model {}, cluster {} ({}).",
        abs(makespans.clone()).map_or("–".to_owned(), |e| format!("{:.1} %", e * 100.0)),
        makespans.len(),
        percent(signed),
        abs(evictions.clone()).map_or("–".to_owned(), |e| format!("{:.1} %", e * 100.0)),
        evictions.len(),
        spread(model, " s"),
        spread(cluster, " s"),
        percent(
            median(model)
                .zip(median(cluster))
                .and_then(|(m, c)| relative_error(m, c))
        ),
    );
    out
}

/// The nodes' phases in the model against the cluster's runs (`NodePhases`, their medians over the
/// runs): drain (admitted to emptied, which the model's kamikaze follows at once) and whole
/// (admitted to back on the new executor), median and p90 over the nodes of every model run.
pub fn render_node_phases(model: &[ModelRun], summary: &Summary) -> String {
    let mut out = String::new();
    let runs = summary.runs_of(Tool::K8sm);
    let phases: Vec<_> = runs.iter().filter_map(|r| r.node_phases.as_ref()).collect();
    let quantiles = |phase: fn(&crate::model::NodeTimeline) -> Option<f64>| {
        let samples: Vec<f64> = model
            .iter()
            .flat_map(|run| &run.nodes)
            .filter_map(phase)
            .collect();
        (percentile(&samples, 50.0), percentile(&samples, 90.0))
    };
    let drain = quantiles(|n| Some(n.kamikaze? - n.admitted?));
    let whole = quantiles(|n| Some(n.back? - n.admitted?));
    let cluster = |f: fn(&crate::timeline::NodePhases) -> f64| {
        median(&phases.iter().map(|p| f(p)).collect::<Vec<_>>())
    };
    let rows = [
        (
            "drain",
            drain,
            cluster(|p| p.drain.p50_s),
            cluster(|p| p.drain.p90_s),
        ),
        (
            "whole",
            whole,
            cluster(|p| p.whole.p50_s),
            cluster(|p| p.whole.p90_s),
        ),
    ];
    let s = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1} s"));
    let _ = writeln!(
        out,
        "| node phase | model p50 | cluster p50 | error | model p90 | cluster p90 | error |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    let percent = |m: Option<f64>, c: Option<f64>| {
        m.zip(c)
            .and_then(|(m, c)| relative_error(m, c))
            .map_or("–".to_owned(), |e| format!("{:+.0} %", e * 100.0))
    };
    for (name, (m50, m90), c50, c90) in rows {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            s(m50),
            s(c50),
            percent(m50, c50),
            s(m90),
            s(c90),
            percent(m90, c90)
        );
    }
    let Some(first) = model.first() else {
        return out;
    };
    let mut nodes: Vec<_> = first
        .nodes
        .iter()
        .filter(|n| n.admitted.is_some())
        .collect();
    nodes.sort_by(|a, b| {
        a.admitted
            .unwrap_or(0.0)
            .total_cmp(&b.admitted.unwrap_or(0.0))
    });
    let _ = write!(
        out,
        "\nThe first run's nodes, by admission (admitted → emptied → back, pods moved):"
    );
    for n in nodes {
        let t = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}"));
        let _ = write!(
            out,
            "\n- {}: {} → {} → {} s, {} pods",
            n.name,
            t(n.admitted),
            t(n.kamikaze),
            t(n.back),
            n.evicted
        );
    }
    out
}

fn relative_error(model: f64, cluster: f64) -> Option<f64> {
    (cluster > 0.0).then(|| (model - cluster) / cluster)
}

/// The median (the mean of the two middle values of an even count).
fn median(values: &[f64]) -> Option<f64> {
    Spread::of(values.iter().copied()).map(|s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owner's evictions and makespans, in the model's runs and the cluster's.
    fn owner(model: (&[f64], &[f64]), cluster: (&[f64], &[f64])) -> OwnerComparison {
        OwnerComparison {
            name: "web".into(),
            replicas: 10,
            model_evictions: model.0.to_vec(),
            cluster_evictions: cluster.0.to_vec(),
            model_restored: model.1.to_vec(),
            cluster_restored: cluster.1.to_vec(),
        }
    }

    #[test]
    fn errors_are_between_the_medians_of_the_runs() {
        let c = owner(
            (&[11.0, 12.0, 16.0], &[110.0, 105.0, 150.0]),
            (&[10.0, 10.0, 14.0], &[90.0, 100.0, 130.0]),
        );
        assert!((c.evictions_error().unwrap() - 0.2).abs() < 1e-9);
        assert!((c.makespan_error().unwrap() - 0.1).abs() < 1e-9);
        // An owner the model never disrupted has no makespan to compare.
        assert_eq!(owner((&[0.0], &[]), (&[0.0], &[])).makespan_error(), None);
    }

    /// A rollout's own deletions are disruptions on the cluster, not evictions of the tool's: the
    /// model's evictions are compared with the tool's alone.
    #[test]
    fn a_rollout_s_own_deletions_are_not_the_tool_s_evictions() {
        let mut summary = crate::fixtures::summary();
        for run in &mut summary.runs {
            run.owners[0].disruptions = 14;
            run.owners[0].outside_disruptions = 4;
        }
        let mut fleet = Workload::plan(10, 41);
        fleet.owners.truncate(3);
        for (owner, name) in fleet.owners.iter_mut().zip(["a", "b", "c"]) {
            owner.name = name.into();
        }
        let run = ModelRun {
            evictions_by_owner: BTreeMap::from([("a".to_owned(), 10)]),
            ..ModelRun::default()
        };
        let compared = compare(&fleet, &[run], &summary).unwrap();
        assert_eq!(compared[0].cluster_evictions, [10.0; 3]);
        assert_eq!(compared[0].evictions_error(), Some(0.0));
    }

    /// The model's nodes, median and p90 by nearest rank, against the median over the runs of each
    /// run's figure.
    #[test]
    fn node_phases_are_the_model_s_quantiles_against_the_runs_median() {
        use crate::timeline::{NodePhases, PhaseQuantiles};
        let mut summary = crate::fixtures::summary();
        let k8sm = summary.runs.iter_mut().filter(|r| r.tool == Tool::K8sm);
        for (run, drain) in k8sm.zip([40.0, 50.0, 60.0]) {
            let q = |p50_s: f64| PhaseQuantiles {
                p50_s,
                p90_s: 2.0 * p50_s,
            };
            run.node_phases = Some(NodePhases {
                nodes: 3,
                drain: q(drain),
                to_kamikaze: q(0.0),
                restart: q(2.0),
                to_done: q(0.0),
                whole: q(drain + 2.0),
                slots: 1,
                idle_slot_s: 0.0,
            });
        }
        let node = |name: &str, kamikaze: f64| crate::model::NodeTimeline {
            name: name.into(),
            admitted: Some(10.0),
            kamikaze: Some(10.0 + kamikaze),
            back: Some(12.0 + kamikaze),
            ..Default::default()
        };
        let run = ModelRun {
            nodes: vec![node("n1", 30.0), node("n2", 45.0), node("n3", 60.0)],
            ..ModelRun::default()
        };
        let text = render_node_phases(&[run], &summary);
        // Drain: 45 s against the median 50 s; p90 60 s against 100 s.
        assert!(
            text.contains("| drain | 45.0 s | 50.0 s | -10 % | 60.0 s | 100.0 s | -40 % |"),
            "{text}"
        );
        assert!(
            text.contains("- n1: 10.0 → 40.0 → 42.0 s, 0 pods"),
            "{text}"
        );
    }

    #[test]
    fn the_table_gives_the_median_absolute_error_over_owners() {
        let compared = [
            owner((&[10.0], &[110.0]), (&[10.0], &[100.0])),
            owner((&[10.0], &[80.0]), (&[10.0], &[100.0])),
            owner((&[10.0], &[103.0]), (&[10.0], &[100.0])),
        ];
        let text = render(&compared, &[195.0, 200.0, 230.0], &[190.0, 210.0]);
        // |+10 %|, |−20 %|, |+3 %|: median 10 %.
        assert!(
            text.contains("makespan 10.0 % (3 owners; median signed error +3 %)"),
            "{text}"
        );
        assert!(
            text.contains("model 200.0 s [195.0–230.0 s], cluster 200.0 s [190.0–210.0 s] (+0 %)"),
            "{text}"
        );
    }
}
