//! Counting apiserver requests by verb, two ways: the apiserver's own `apiserver_request_total` (every client of the
//! cluster together: it has no client label), and the controller's requests as its kube client traces them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

/// Requests by verb, named as `apiserver_request_total` names them (`LIST`, `WATCH`, `GET`, `POST`, `PATCH`, `PUT`,
/// `DELETE`, …).
pub type ByVerb = BTreeMap<String, f64>;

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

/// Server-side time of Eviction API calls: (sum of seconds, count) of `apiserver_request_duration_seconds` for the
/// `pods/eviction` subresource.
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

/// The sum of every sample of metric `name` (any labels) in a Prometheus or OpenMetrics text exposition.
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

/// `after − before`, verb by verb (counters only grow; a restarted apiserver would show as a negative delta).
pub fn delta(before: &ByVerb, after: &ByVerb) -> ByVerb {
    after
        .iter()
        .map(|(verb, n)| (verb.clone(), n - before.get(verb).copied().unwrap_or(0.0)))
        .filter(|(_, n)| *n != 0.0)
        .collect()
}

/// The apiserver's verb for an HTTP request, as `apiserver_request_total` labels it.
pub fn verb_of(method: &str, url: &str) -> &'static str {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    // Path after the API prefix: /api/v1/… or /apis/<group>/<version>/…
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let start = segments.iter().position(|s| *s == "api" || *s == "apis");
    let rest: &[&str] = match start {
        Some(i) if segments[i] == "api" => segments.get(i + 2..).unwrap_or_default(),
        Some(i) => segments.get(i + 3..).unwrap_or_default(),
        None => &[],
    };
    // Namespaced resources: namespaces/<ns>/<resource>/…; `namespaces/<ns>` alone is a Namespace.
    let rest = if rest.len() >= 3 && rest[0] == "namespaces" {
        &rest[2..]
    } else {
        rest
    };
    let collection = rest.len() <= 1;
    match method {
        "GET" if watch => "WATCH",
        "GET" if collection => "LIST",
        "GET" => "GET",
        // `apiserver_request_total` names creates and updates by their HTTP methods.
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" if collection => "DELETECOLLECTION",
        "DELETE" => "DELETE",
        _ => "OTHER",
    }
}

/// Counts the requests in a controller log written with `kube_client::client::builder=debug` (one `requesting`
/// event per request, inside a span `HTTP{http.method=… http.url=…}`), between `from` and `to`.
pub fn controller_requests_by_verb(log: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> ByVerb {
    let mut by_verb = ByVerb::new();
    for line in log.lines() {
        let line = strip_ansi(line);
        if !line.trim_end().ends_with("requesting") {
            continue;
        }
        let Some(time) = line
            .split_whitespace()
            .next()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        else {
            continue;
        };
        let time = time.with_timezone(&Utc);
        if time < from || time > to {
            continue;
        }
        let field = |name: &str| {
            let start = line.find(&format!("{name}="))? + name.len() + 1;
            let end = line[start..]
                .find([' ', '}'])
                .map_or(line.len(), |e| start + e);
            Some(line[start..end].to_owned())
        };
        if let (Some(method), Some(url)) = (field("http.method"), field("http.url")) {
            *by_verb
                .entry(verb_of(&method, &url).to_owned())
                .or_default() += 1.0;
        }
    }
    by_verb
}

/// Seconds each eviction call of the controller took (request sent → response body done), from the same traces.
pub fn controller_eviction_seconds(log: &str) -> Vec<f64> {
    let mut started = std::collections::HashMap::new();
    let mut seconds = Vec::new();
    for line in log.lines() {
        let line = strip_ansi(line);
        if !line.contains("/eviction") {
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(Ok(time)) = words.next().map(DateTime::parse_from_rfc3339) else {
            continue;
        };
        let Some(url) = line
            .split("http.url=")
            .nth(1)
            .and_then(|rest| rest.split([' ', '}']).next())
        else {
            continue;
        };
        let line = line.trim_end();
        if line.ends_with("requesting") {
            started.insert(url.to_owned(), time);
        } else if line.ends_with("stream closed")
            && let Some(start) = started.remove(url)
        {
            seconds.push((time - start).as_seconds_f64());
        }
    }
    seconds
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
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
    fn verbs_follow_the_apiserver() {
        let base = "https://127.0.0.1:6443";
        let cases = [
            ("GET", "/api/v1/pods?&watch=true&resourceVersion=5", "WATCH"),
            ("GET", "/api/v1/nodes?fieldSelector=x", "LIST"),
            ("GET", "/api/v1/namespaces/shop/pods", "LIST"),
            ("GET", "/api/v1/namespaces/shop/pods/web-1", "GET"),
            ("GET", "/api/v1/namespaces/shop", "GET"),
            (
                "POST",
                "/api/v1/namespaces/shop/pods/web-1/eviction",
                "POST",
            ),
            ("PATCH", "/api/v1/nodes/node-0001", "PATCH"),
            (
                "PATCH",
                "/apis/k8s.mesosphere.io/v1alpha1/executorupgradepolicies/fleet/status",
                "PATCH",
            ),
            (
                "PUT",
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/k8sm",
                "PUT",
            ),
            ("GET", "/apis/apps/v1/replicasets?limit=500", "LIST"),
            ("DELETE", "/api/v1/namespaces/shop/pods/debug-0", "DELETE"),
            ("DELETE", "/api/v1/namespaces/shop/pods", "DELETECOLLECTION"),
        ];
        for (method, path, verb) in cases {
            assert_eq!(
                verb_of(method, &format!("{base}{path}")),
                verb,
                "{method} {path}"
            );
            assert_eq!(
                verb_of(method, path),
                verb,
                "{method} {path} without a host"
            );
        }
    }

    #[test]
    fn controller_requests_are_read_from_its_client_traces() {
        let log = "\
2026-01-01T00:00:01.000000Z DEBUG HTTP{http.method=GET http.url=https://127.0.0.1:1/api/v1/nodes?&limit=500 otel.name=\"list\" otel.kind=\"client\"}: kube_client::client::builder: requesting
2026-01-01T00:00:02.000000Z DEBUG HTTP{http.method=GET http.url=https://127.0.0.1:1/api/v1/nodes?&watch=true otel.name=\"watch\" otel.kind=\"client\"}: kube_client::client::builder: requesting
2026-01-01T00:00:02.500000Z DEBUG HTTP{http.method=GET http.url=https://127.0.0.1:1/api/v1/nodes?&watch=true otel.name=\"watch\" otel.kind=\"client\"}: kube_client::client::builder: stream closed
\u{1b}[2m2026-01-01T00:00:03.000000Z\u{1b}[0m \u{1b}[34mDEBUG\u{1b}[0m \u{1b}[1mHTTP\u{1b}[0m{http.method=POST http.url=https://127.0.0.1:1/api/v1/namespaces/a/pods/p/eviction otel.name=\"create_subresource\"}: kube_client::client::builder: requesting
2026-01-01T00:00:09.000000Z DEBUG HTTP{http.method=PATCH http.url=https://127.0.0.1:1/api/v1/nodes/n otel.name=\"patch\"}: kube_client::client::builder: requesting
2026-01-01T00:00:04.000000Z  INFO k8sm_controller: planned
";
        let at = |s: u32| {
            DateTime::parse_from_rfc3339(&format!("2026-01-01T00:00:0{s}Z"))
                .unwrap()
                .with_timezone(&Utc)
        };
        let by_verb = controller_requests_by_verb(log, at(2), at(8));
        assert_eq!(
            by_verb,
            ByVerb::from([("POST".into(), 1.0), ("WATCH".into(), 1.0)])
        );
        assert_eq!(controller_requests_by_verb(log, at(0), at(9)).len(), 4);
    }

    #[test]
    fn eviction_calls_are_timed_from_request_to_end_of_response() {
        let log = "\
2026-01-01T00:00:01.000000Z DEBUG HTTP{http.method=POST http.url=https://h/api/v1/namespaces/a/pods/p/eviction? otel.name=\"evict\"}: kube_client::client::builder: requesting
2026-01-01T00:00:01.010000Z DEBUG HTTP{http.method=POST http.url=https://h/api/v1/namespaces/a/events? otel.name=\"create\"}: kube_client::client::builder: requesting
2026-01-01T00:00:01.090000Z DEBUG HTTP{http.method=POST http.url=https://h/api/v1/namespaces/a/pods/p/eviction? otel.name=\"evict\" http.status_code=201}: kube_client::client::builder: stream closed
2026-01-01T00:00:02.000000Z DEBUG HTTP{http.method=POST http.url=https://h/api/v1/namespaces/a/pods/q/eviction? otel.name=\"evict\"}: kube_client::client::builder: requesting
";
        let seconds = controller_eviction_seconds(log);
        assert_eq!(seconds.len(), 1, "the unanswered call is left out");
        assert!((seconds[0] - 0.09).abs() < 1e-9);
    }
}
