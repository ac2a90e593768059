//! Quantities → [`Resources`]: a node's allocatable, and a pod's requests as kube-scheduler sums
//! them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_quantity::ParsedQuantity;

use k8sm_planner::Resources;

/// A resource list (`requests`, `allocatable`, `overhead`), keyed by resource name.
pub type ResourceList = BTreeMap<String, Quantity>;

/// One container's part in its pod's requests.
pub struct ContainerRequests<'a> {
    /// `resources.requests`.
    pub requests: Option<&'a ResourceList>,
    /// An init container with `restartPolicy: Always` (a sidecar): it runs beside the containers.
    pub sidecar: bool,
}

/// A node's `status.allocatable`: CPU, memory and pods.
pub fn allocatable(list: &ResourceList) -> Resources {
    Resources {
        pods: amount(list, "pods", 1.0),
        ..cpu_and_memory(list)
    }
}

/// What kube-scheduler reserves for a pod: the containers' requests and its sidecars', or, if
/// larger, those of the init container that needs most (with the sidecars started before it); plus
/// the pod's overhead. Pod-level requests (`spec.resources`) take the place of the containers'
/// where set.
pub fn pod_requests<'a>(
    containers: impl IntoIterator<Item = Option<&'a ResourceList>>,
    init_containers: impl IntoIterator<Item = ContainerRequests<'a>>,
    pod_level: Option<&ResourceList>,
    overhead: Option<&ResourceList>,
) -> Resources {
    let mut running = Resources::default();
    for requests in containers.into_iter().flatten() {
        running += cpu_and_memory(requests);
    }
    let (mut sidecars, mut init_peak) = (Resources::default(), Resources::default());
    for init in init_containers {
        let own = init.requests.map(cpu_and_memory).unwrap_or_default();
        let while_it_runs = if init.sidecar {
            running += own;
            sidecars += own;
            sidecars
        } else {
            own + sidecars
        };
        init_peak = larger(init_peak, while_it_runs);
    }
    let mut total = larger(running, init_peak);
    if let Some(pod_level) = pod_level {
        if pod_level.contains_key("cpu") {
            total.cpu_millis = amount(pod_level, "cpu", 1000.0);
        }
        if pod_level.contains_key("memory") {
            total.memory_bytes = amount(pod_level, "memory", 1.0);
        }
    }
    total + overhead.map(cpu_and_memory).unwrap_or_default()
}

fn container_requests(container: &Container) -> Option<&ResourceList> {
    container.resources.as_ref()?.requests.as_ref()
}

/// [`pod_requests`] of a whole [`Pod`].
pub fn requests_of(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    pod_requests(
        spec.containers.iter().map(container_requests),
        spec.init_containers
            .iter()
            .flatten()
            .map(|c| ContainerRequests {
                requests: container_requests(c),
                sidecar: c.restart_policy.as_deref() == Some("Always"),
            }),
        spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
        spec.overhead.as_ref(),
    )
}

fn cpu_and_memory(list: &ResourceList) -> Resources {
    Resources {
        cpu_millis: amount(list, "cpu", 1000.0),
        memory_bytes: amount(list, "memory", 1.0),
        pods: 0,
    }
}

/// `list[name]` in units of `1 / per_unit` (millicores: 1000), rounded up as the apiserver's
/// `MilliValue` does; 0 when absent. The apiserver accepts only well-formed quantities, so one that
/// does not parse counts as absent.
fn amount(list: &ResourceList, name: &str, per_unit: f64) -> u64 {
    let Some(quantity) = list.get(name) else {
        return 0;
    };
    let parsed: Result<ParsedQuantity, _> = quantity.clone().try_into();
    let value = parsed.ok().and_then(|q| q.to_bytes_f64()).unwrap_or(0.0) * per_unit;
    // A hair below a whole unit is the float's error, not a fraction of a unit: 0.1 CPU is 100m,
    // not 101m.
    let rounded = value.round();
    let whole = if (value - rounded).abs() < 1e-6 {
        rounded
    } else {
        value.ceil()
    };
    if whole.is_finite() && whole > 0.0 {
        whole as u64
    } else {
        0
    }
}

fn larger(a: Resources, b: Resources) -> Resources {
    Resources {
        cpu_millis: a.cpu_millis.max(b.cpu_millis),
        memory_bytes: a.memory_bytes.max(b.memory_bytes),
        pods: a.pods.max(b.pods),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    fn res(cpu_millis: u64, memory_mib: u64) -> Resources {
        Resources {
            cpu_millis,
            memory_bytes: memory_mib << 20,
            pods: 0,
        }
    }

    #[test]
    fn quantities_in_every_notation() {
        let node = list(&[
            ("cpu", "3500m"),
            ("memory", "2Gi"),
            ("pods", "110"),
            ("ephemeral-storage", "10G"),
        ]);
        assert_eq!(
            allocatable(&node),
            Resources {
                cpu_millis: 3500,
                memory_bytes: 2 << 30,
                pods: 110
            }
        );
        let cases = [
            ("0.1", 100),
            ("1", 1000),
            ("1.5", 1500),
            ("250m", 250),
            ("1e3m", 1000),
            ("100u", 1),
        ];
        for (cpu, millis) in cases {
            assert_eq!(
                cpu_and_memory(&list(&[("cpu", cpu)])).cpu_millis,
                millis,
                "{cpu}"
            );
        }
        assert_eq!(
            cpu_and_memory(&list(&[("memory", "128974848")])).memory_bytes,
            128_974_848
        );
        assert_eq!(
            cpu_and_memory(&list(&[("memory", "129M")])).memory_bytes,
            129_000_000
        );
        assert_eq!(
            cpu_and_memory(&list(&[("memory", "not a quantity")])),
            Resources::default()
        );
    }

    #[test]
    fn containers_add_up_and_init_containers_peak() {
        let app = list(&[("cpu", "500m"), ("memory", "256Mi")]);
        let other = list(&[("cpu", "250m")]);
        let big_init = list(&[("cpu", "2"), ("memory", "64Mi")]);
        let none: [ContainerRequests; 0] = [];
        assert_eq!(
            pod_requests([Some(&app), Some(&other), None], none, None, None),
            res(750, 256)
        );
        // An init container runs alone: the larger of it and the containers, per resource.
        let init = [ContainerRequests {
            requests: Some(&big_init),
            sidecar: false,
        }];
        assert_eq!(pod_requests([Some(&app)], init, None, None), res(2000, 256));
    }

    #[test]
    fn sidecars_run_beside_everything_started_after_them() {
        let app = list(&[("cpu", "500m"), ("memory", "100Mi")]);
        let sidecar = list(&[("cpu", "100m"), ("memory", "50Mi")]);
        let late_init = list(&[("cpu", "1"), ("memory", "10Mi")]);
        let init = [
            ContainerRequests {
                requests: Some(&sidecar),
                sidecar: true,
            },
            ContainerRequests {
                requests: Some(&late_init),
                sidecar: false,
            },
        ];
        // Running: app + sidecar = 600m, 150Mi. The init container after the sidecar: 1000m + 100m,
        // 10Mi + 50Mi.
        assert_eq!(pod_requests([Some(&app)], init, None, None), res(1100, 150));
    }

    #[test]
    fn pod_level_requests_replace_the_containers_and_overhead_adds() {
        let app = list(&[("cpu", "500m"), ("memory", "100Mi")]);
        let pod_level = list(&[("cpu", "2")]);
        let overhead = list(&[("cpu", "50m"), ("memory", "20Mi")]);
        let none: [ContainerRequests; 0] = [];
        assert_eq!(
            pod_requests([Some(&app)], none, Some(&pod_level), Some(&overhead)),
            res(2050, 120)
        );
    }

    #[test]
    fn a_whole_pod() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "200m", "memory": "1Gi"}}},
                {"name": "b"}
            ],
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}
            ]
        }
    }))
    .unwrap();
        assert_eq!(requests_of(&pod), res(300, 1024));
        assert_eq!(requests_of(&Pod::default()), Resources::default());
    }
}
