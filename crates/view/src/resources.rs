//! Quantities → [`Resources`]: a node's allocatable, and a pod's requests as kube-scheduler sums them.

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

/// What kube-scheduler reserves for a pod: the containers' requests and its sidecars', or, if larger, those of the
/// init container that needs most (with the sidecars started before it); plus the pod's overhead. Pod-level
/// requests (`spec.resources`) take the place of the containers' where set.
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

/// `list[name]` in units of `1 / per_unit` (millicores: 1000), rounded up as the apiserver's `MilliValue` does; 0
/// when absent. The apiserver accepts only well-formed quantities, so one that does not parse counts as absent.
fn amount(list: &ResourceList, name: &str, per_unit: f64) -> u64 {
    let Some(quantity) = list.get(name) else {
        return 0;
    };
    let parsed: Result<ParsedQuantity, _> = quantity.clone().try_into();
    let value = parsed.ok().and_then(|q| q.to_bytes_f64()).unwrap_or(0.0) * per_unit;
    // A hair below a whole unit is the float's error, not a fraction of a unit: 0.1 CPU is 100m, not 101m.
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
#[path = "resources_tests.rs"]
mod tests;
