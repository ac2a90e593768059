//! Command lines of the cluster's components: what each one needs to run on loopback beside other
//! clusters.

use std::path::Path;

use crate::pki::Pki;

/// Ports and files a cluster's components share.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    pub dir: &'a Path,
    pub pki: &'a Pki,
    pub kubeconfig: &'a Path,
    pub etcd_client_port: u16,
    pub etcd_peer_port: u16,
    pub apiserver_port: u16,
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

pub fn etcd(l: &Layout<'_>) -> Vec<String> {
    let client = format!("http://127.0.0.1:{}", l.etcd_client_port);
    let peer = format!("http://127.0.0.1:{}", l.etcd_peer_port);
    vec![
        "--name=default".into(),
        format!("--data-dir={}", path(&l.dir.join("etcd-data"))),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=default={peer}"),
        // A test cluster's data is thrown away: fsync only costs time.
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
        "--quota-backend-bytes=4294967296".into(),
    ]
}

pub fn kube_apiserver(l: &Layout<'_>) -> Vec<String> {
    vec![
        format!("--etcd-servers=http://127.0.0.1:{}", l.etcd_client_port),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", l.apiserver_port),
        format!("--tls-cert-file={}", path(&l.pki.serving_cert)),
        format!("--tls-private-key-file={}", path(&l.pki.serving_key)),
        format!("--client-ca-file={}", path(&l.pki.ca_cert)),
        format!("--cert-dir={}", path(&l.dir.join("apiserver-certs"))),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        "--authorization-mode=RBAC".into(),
        format!(
            "--service-account-issuer=https://127.0.0.1:{}/",
            l.apiserver_port
        ),
        format!(
            "--service-account-key-file={}",
            path(&l.pki.service_account_public_key)
        ),
        format!(
            "--service-account-signing-key-file={}",
            path(&l.pki.service_account_key)
        ),
        // Benchmarks drive thousands of pods through one apiserver on two cores.
        "--max-requests-inflight=1000".into(),
        "--max-mutating-requests-inflight=500".into(),
        "--profiling=false".into(),
        "--v=1".into(),
    ]
}

pub fn kube_controller_manager(l: &Layout<'_>, port: u16) -> Vec<String> {
    let kubeconfig = path(l.kubeconfig);
    vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!(
            "--cert-dir={}",
            path(&l.dir.join("controller-manager-certs"))
        ),
        "--leader-elect=false".into(),
        format!(
            "--service-account-private-key-file={}",
            path(&l.pki.service_account_key)
        ),
        format!("--root-ca-file={}", path(&l.pki.ca_cert)),
        "--use-service-account-credentials=false".into(),
        "--kube-api-qps=200".into(),
        "--kube-api-burst=400".into(),
        "--concurrent-deployment-syncs=10".into(),
        "--concurrent-replicaset-syncs=10".into(),
        "--concurrent-statefulset-syncs=10".into(),
        "--concurrent-gc-syncs=40".into(),
        "--profiling=false".into(),
        "--v=1".into(),
    ]
}

pub fn kube_scheduler(l: &Layout<'_>, port: u16) -> Vec<String> {
    let kubeconfig = path(l.kubeconfig);
    vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", path(&l.dir.join("scheduler-certs"))),
        "--leader-elect=false".into(),
        "--kube-api-qps=200".into(),
        "--kube-api-burst=400".into(),
        "--profiling=false".into(),
        "--v=1".into(),
    ]
}

pub fn kwok(l: &Layout<'_>, stage_config: &Path, port: u16) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", path(l.kubeconfig)),
        format!("--config={}", path(stage_config)),
        "--manage-all-nodes=false".into(),
        format!(
            "--manage-nodes-with-annotation-selector={}=fake",
            crate::kwok::KWOK_NODE_ANNOTATION
        ),
        "--cidr=10.128.0.1/12".into(),
        "--node-ip=10.127.0.1".into(),
        "--node-lease-duration-seconds=40".into(),
        format!("--server-address=127.0.0.1:{port}"),
    ]
}
