//! Reading Prometheus text expositions: the apiserver's request counters (every client of the
//! cluster together: they have no client label; the tools' own requests come from the audit log,
//! see [`crate::audit`]) and the controller's metrics and histograms.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Requests by verb, named as `apiserver_request_total` names them (`LIST`, `WATCH`, `GET`, `POST`,
/// `PATCH`, `PUT`, `DELETE`, …).
pub type ByVerb = BTreeMap<String, f64>;

/// p50 and p99 of a Prometheus histogram, as far as its buckets tell: each is the upper bound of
/// the bucket the quantile falls in ("≤ bound"), or above the last finite bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistogramQuantiles {
    pub count: u64,
    pub p50: BucketBound,
    pub p99: BucketBound,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum BucketBound {
    /// At most this many seconds.
    AtMost(f64),
    /// More than the last finite bucket's bound.
    Above(f64),
}

impl BucketBound {
    /// The bound in seconds; `Above` counts as just over it.
    pub fn seconds(self) -> f64 {
        match self {
            Self::AtMost(s) | Self::Above(s) => s,
        }
    }
}

/// Sums `apiserver_request_total` of a Prometheus text exposition by its `verb` label.
pub fn apiserver_requests_by_verb(exposition: &str) -> ByVerb {
    let mut by_verb = ByVerb::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Some(verb) = label(labels, "verb") else {
            continue;
        };
        // A sample may carry a timestamp after the value.
        let Some(Ok(value)) = value.split_whitespace().next().map(str::parse::<f64>) else {
            continue;
        };
        *by_verb.entry(verb.to_owned()).or_default() += value;
    }
    by_verb
}

fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let len = labels[start..].find('"')?;
    Some(&labels[start..start + len])
}

/// Server-side time of Eviction API calls: (sum of seconds, count) of
/// `apiserver_request_duration_seconds` for the `pods/eviction` subresource.
pub fn apiserver_eviction_seconds(exposition: &str) -> (f64, f64) {
    let mut total = (0.0, 0.0);
    for line in exposition.lines() {
        let (is_sum, rest) = if let Some(rest) =
            line.strip_prefix("apiserver_request_duration_seconds_sum{")
        {
            (true, rest)
        } else if let Some(rest) = line.strip_prefix("apiserver_request_duration_seconds_count{") {
            (false, rest)
        } else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        if label(labels, "subresource") != Some("eviction") {
            continue;
        }
        if let Some(Ok(v)) = value.split_whitespace().next().map(str::parse::<f64>) {
            if is_sum {
                total.0 += v;
            } else {
                total.1 += v;
            }
        }
    }
    total
}

/// The sum of every sample of metric `name` (any labels) in a Prometheus or OpenMetrics text
/// exposition.
pub fn metric_sum(exposition: &str, name: &str) -> Option<f64> {
    let mut sum = None;
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let value = if rest.starts_with('{') {
            rest.rsplit_once("} ").map(|(_, v)| v)
        } else {
            rest.strip_prefix(' ')
        };
        if let Some(Ok(v)) = value
            .and_then(|v| v.split_whitespace().next())
            .map(str::parse::<f64>)
        {
            *sum.get_or_insert(0.0) += v;
        }
    }
    sum
}

/// `after − before`, verb by verb (counters only grow; a restarted apiserver would show as a
/// negative delta).
pub fn delta(before: &ByVerb, after: &ByVerb) -> ByVerb {
    after
        .iter()
        .map(|(verb, n)| (verb.clone(), n - before.get(verb).copied().unwrap_or(0.0)))
        .filter(|(_, n)| *n != 0.0)
        .collect()
}

/// p50 and p99 of histogram `name` from its cumulative `_bucket{le="…"}` samples (summed over other
/// labels); `None` without the metric or without observations.
pub fn histogram_quantiles(exposition: &str, name: &str) -> Option<HistogramQuantiles> {
    let prefix = format!("{name}_bucket{{");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Some(le) = label(labels, "le").and_then(|le| match le {
            "+Inf" | "Inf" => Some(f64::INFINITY),
            le => le.parse::<f64>().ok(),
        }) else {
            continue;
        };
        let Some(Ok(count)) = value.split_whitespace().next().map(str::parse::<f64>) else {
            continue;
        };
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += count,
            None => buckets.push((le, count)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last().map(|b| b.1)?;
    if total < 1.0 {
        return None;
    }
    let last_finite = buckets
        .iter()
        .rev()
        .find(|b| b.0.is_finite())
        .map_or(0.0, |b| b.0);
    let quantile = |q: f64| {
        // Nearest rank, as `stats::percentile`: the smallest bucket holding at least ceil(q·n)
        // observations. (Less a hair, so that 0.99 · 100 is rank 99 despite binary
        // rounding.)
        let rank = (q * total - 1e-9).ceil().max(1.0);
        let (le, _) = buckets.iter().find(|(_, c)| *c >= rank)?;
        Some(if le.is_finite() {
            BucketBound::AtMost(*le)
        } else {
            BucketBound::Above(last_finite)
        })
    };
    Some(HistogramQuantiles {
        count: total as u64,
        p50: quantile(0.5)?,
        p99: quantile(0.99)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiserver_requests_are_summed_by_verb() {
        let text = "\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 12
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"nodes\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 3
apiserver_request_total{code=\"201\",component=\"apiserver\",group=\"\",resource=\"pods\",subresource=\"eviction\",verb=\"POST\",version=\"v1\"} 5 1700000000000
apiserver_request_total_other{verb=\"GET\"} 9
apiserver_request_duration_seconds_bucket{verb=\"GET\",le=\"0.1\"} 4
";
        let by_verb = apiserver_requests_by_verb(text);
        assert_eq!(by_verb.get("LIST"), Some(&15.0));
        assert_eq!(by_verb.get("POST"), Some(&5.0));
        assert_eq!(by_verb.len(), 2);
        let later = ByVerb::from([("LIST".into(), 20.0), ("WATCH".into(), 2.0)]);
        assert_eq!(
            delta(&by_verb, &later),
            ByVerb::from([("LIST".into(), 5.0), ("WATCH".into(), 2.0)])
        );
    }

    #[test]
    fn server_side_eviction_time_is_read_from_the_request_durations() {
        let text = "\
apiserver_request_duration_seconds_sum{component=\"apiserver\",resource=\"pods\",subresource=\"eviction\",verb=\"POST\"} 9.5
apiserver_request_duration_seconds_count{component=\"apiserver\",resource=\"pods\",subresource=\"eviction\",verb=\"POST\"} 100
apiserver_request_duration_seconds_sum{component=\"apiserver\",resource=\"pods\",subresource=\"\",verb=\"GET\"} 3
apiserver_request_duration_seconds_bucket{resource=\"pods\",subresource=\"eviction\",le=\"0.1\"} 90
";
        assert_eq!(apiserver_eviction_seconds(text), (9.5, 100.0));
    }

    #[test]
    fn metrics_are_summed_over_their_labels() {
        let text = "\
# TYPE k8sm_evictions counter
k8sm_evictions_total{reason=\"Evicted\"} 40
k8sm_evictions_total{reason=\"Other\"} 2
k8sm_planner_duration_seconds_sum 0.5
k8sm_planner_duration_seconds_count 100
k8sm_planner_duration_seconds_bucket{le=\"0.001\"} 90
";
        assert_eq!(metric_sum(text, "k8sm_evictions_total"), Some(42.0));
        assert_eq!(
            metric_sum(text, "k8sm_planner_duration_seconds_sum"),
            Some(0.5)
        );
        assert_eq!(
            metric_sum(text, "k8sm_planner_duration_seconds_count"),
            Some(100.0)
        );
        assert_eq!(metric_sum(text, "k8sm_deletions_total"), None);
    }

    #[test]
    fn histogram_quantiles_are_bucket_bounds() {
        // 100 observations: 40 ≤ 5 ms, 50 more ≤ 50 ms, 8 more ≤ 0.5 s, 2 above 120 s.
        let text = "\
# TYPE k8sm_eviction_reaction_seconds histogram
k8sm_eviction_reaction_seconds_bucket{le=\"0.005\"} 40
k8sm_eviction_reaction_seconds_bucket{le=\"0.05\"} 90
k8sm_eviction_reaction_seconds_bucket{le=\"0.5\"} 98
k8sm_eviction_reaction_seconds_bucket{le=\"120\"} 98
k8sm_eviction_reaction_seconds_bucket{le=\"+Inf\"} 100
k8sm_eviction_reaction_seconds_sum 300.5
k8sm_eviction_reaction_seconds_count 100
";
        let q = histogram_quantiles(text, "k8sm_eviction_reaction_seconds").unwrap();
        // p50: rank 50, first reached at 0.05. p99: rank 99, only in +Inf: above the last bound.
        assert_eq!(q.count, 100);
        assert_eq!(q.p50, BucketBound::AtMost(0.05));
        assert_eq!(q.p99, BucketBound::Above(120.0));
        // Exactly 98 of 100 at or under 0.5 s: p98 would be 0.5 s; 99 of 100 needs the next bucket.
        let text = text.replace(
            "98\nk8sm_eviction_reaction_seconds_bucket{le=\"120\"} 98",
            "99\nk8sm_eviction_reaction_seconds_bucket{le=\"120\"} 99",
        );
        let q = histogram_quantiles(&text, "k8sm_eviction_reaction_seconds").unwrap();
        assert_eq!(q.p99, BucketBound::AtMost(0.5));
    }

    #[test]
    fn no_histogram_without_the_metric_or_observations() {
        assert_eq!(
            histogram_quantiles("x_bucket{le=\"1\"} 3\n", "k8sm_y"),
            None
        );
        let empty = "k8sm_y_bucket{le=\"1\"} 0\nk8sm_y_bucket{le=\"+Inf\"} 0\n";
        assert_eq!(histogram_quantiles(empty, "k8sm_y"), None);
        // Label sets are summed bucket by bucket.
        let two = "k8sm_y_bucket{a=\"1\",le=\"1\"} 1\nk8sm_y_bucket{a=\"1\",le=\"+Inf\"} 1\nk8sm_y_bucket{a=\"2\",le=\"1\"} 0\nk8sm_y_bucket{a=\"2\",le=\"+Inf\"} 3\n";
        let q = histogram_quantiles(two, "k8sm_y").unwrap();
        assert_eq!(
            (q.count, q.p50, q.p99),
            (4, BucketBound::Above(1.0), BucketBound::Above(1.0))
        );
    }
}
