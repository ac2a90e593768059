//! The model against the cluster, owner by owner (`k8sm-bench --model --compare-with
//! <report>.json`): for the same fleet, each owner's evictions and its own makespan (seconds from
//! the upgrade's start until it last had all its replicas Ready again) in the model, against k8sm's
//! runs of a report. The error is the model's figure less the median of the runs', over that
//! median.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::ModelRun;
use crate::results::{Summary, Tool};
use crate::spread::Spread;
use crate::workload::Workload;

/// One owner's figures in the model and over the cluster's runs.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerComparison {
    pub name: String,
    pub replicas: u32,
    pub model_evictions: f64,
    pub cluster_evictions: Vec<f64>,
    pub model_restored: Option<f64>,
    pub cluster_restored: Vec<f64>,
}

impl OwnerComparison {
    /// (model − median of the runs) / median of the runs, for the makespan; `None` where either
    /// side lacks it.
    pub fn makespan_error(&self) -> Option<f64> {
        relative_error(self.model_restored?, median(&self.cluster_restored)?)
    }

    pub fn evictions_error(&self) -> Option<f64> {
        relative_error(self.model_evictions, median(&self.cluster_evictions)?)
    }
}

/// The comparison of `run` (the model's upgrade of `fleet`) with k8sm's runs in `summary`, which
/// must be of the same fleet: the same owners with the same replicas.
pub fn compare(
    fleet: &Workload,
    run: &ModelRun,
    summary: &Summary,
) -> anyhow::Result<Vec<OwnerComparison>> {
    let runs = summary.runs_of(Tool::K8sm);
    anyhow::ensure!(!runs.is_empty(), "the report has no run of k8sm");
    let mut by_owner: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for cluster_run in &runs {
        for owner in &cluster_run.owners {
            let entry = by_owner.entry(owner.name.as_str()).or_default();
            entry.0.push(f64::from(owner.disruptions));
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
            model_evictions: run
                .evictions_by_owner
                .get(&owner.name)
                .copied()
                .unwrap_or(0) as f64,
            cluster_evictions: evictions,
            model_restored: run.owner_restored.get(&owner.name).copied(),
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

/// A Markdown table of the comparison, and the median absolute errors.
pub fn render(
    compared: &[OwnerComparison],
    model_makespan: Option<f64>,
    cluster: &[f64],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| owner | replicas | evictions: model | cluster (median [min–max]) | error | makespan: model | cluster \
         (median [min–max]) | error |"
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
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} |",
            c.name,
            c.replicas,
            c.model_evictions,
            spread(&c.cluster_evictions, ""),
            percent(c.evictions_error()),
            c.model_restored
                .map_or("–".to_owned(), |s| format!("{s:.1} s")),
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
        model_makespan.map_or("–".to_owned(), |s| format!("{s:.1} s")),
        spread(cluster, " s"),
        percent(
            model_makespan
                .zip(median(cluster))
                .and_then(|(m, c)| relative_error(m, c))
        ),
    );
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

    fn owner(model: (f64, Option<f64>), cluster: (&[f64], &[f64])) -> OwnerComparison {
        OwnerComparison {
            name: "web".into(),
            replicas: 10,
            model_evictions: model.0,
            cluster_evictions: cluster.0.to_vec(),
            model_restored: model.1,
            cluster_restored: cluster.1.to_vec(),
        }
    }

    #[test]
    fn errors_are_against_the_median_of_the_runs() {
        let c = owner(
            (12.0, Some(110.0)),
            (&[10.0, 10.0, 14.0], &[90.0, 100.0, 130.0]),
        );
        assert!((c.evictions_error().unwrap() - 0.2).abs() < 1e-9);
        assert!((c.makespan_error().unwrap() - 0.1).abs() < 1e-9);
        // An owner the model never disrupted has no makespan to compare.
        assert_eq!(owner((0.0, None), (&[0.0], &[])).makespan_error(), None);
    }

    #[test]
    fn the_table_gives_the_median_absolute_error_over_owners() {
        let compared = [
            owner((10.0, Some(110.0)), (&[10.0], &[100.0])),
            owner((10.0, Some(80.0)), (&[10.0], &[100.0])),
            owner((10.0, Some(103.0)), (&[10.0], &[100.0])),
        ];
        let text = render(&compared, Some(200.0), &[190.0, 210.0]);
        // |+10 %|, |−20 %|, |+3 %|: median 10 %.
        assert!(
            text.contains("makespan 10.0 % (3 owners; median signed error +3 %)"),
            "{text}"
        );
        assert!(
            text.contains("model 200.0 s, cluster 200.0 s [190.0–210.0 s] (+0 %)"),
            "{text}"
        );
    }
}
