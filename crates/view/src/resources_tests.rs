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
    // Running: app + sidecar = 600m, 150Mi. The init container after the sidecar: 1000m + 100m, 10Mi + 50Mi.
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
