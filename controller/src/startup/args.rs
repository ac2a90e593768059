//! Command-line flags of `k8sm-controller`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::act::kamikaze_token::ServiceAccountRef;

/// SLA-safe rolling upgrades of node executors: marks, drains and restarts nodes as
/// ExecutorUpgradePolicies say.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "k8sm-controller",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("K8SM_COMMIT"), ")")
)]
pub struct Args {
    /// Kubeconfig file; without it the in-cluster configuration (or $KUBECONFIG) is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Elect a leader on a Lease so that only one of several replicas acts.
    #[arg(long)]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    pub leader_elect_namespace: String,

    /// Namespace of the upgrade reports (one ConfigMap per run). Default: the controller's own,
    /// that of its Lease.
    #[arg(long)]
    pub report_namespace: Option<String>,

    /// Name of the leader-election Lease.
    #[arg(long, default_value = "k8sm-controller")]
    pub leader_elect_lease: String,

    /// How long a leader's claim lasts without renewal: another replica takes over once the Lease
    /// has stood unchanged this long (by its own clock). A replica that stops releases the
    /// Lease, and a standby takes over at once.
    #[arg(long, default_value = "15s", value_parser = humantime_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long after the start of its last successful renewal the leader stops acting when it
    /// cannot renew; shorter than the lease duration (default: two thirds of it).
    #[arg(long, value_parser = humantime_duration)]
    pub leader_elect_renew_deadline: Option<Duration>,

    /// This replica's identity in the Lease and in Events (default: the pod name or hostname, plus
    /// the pid).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// Address of the /metrics, /healthz and /readyz endpoints.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,

    /// While a watch (of nodes, pods, policies, pod controllers or budgets) has been failing for
    /// longer than this, its cache may be stale: take no action (no eviction, deletion or node
    /// change) and report the policies Degraded, until it recovers.
    #[arg(long, default_value = "30s", value_parser = humantime_duration)]
    pub max_watch_staleness: Duration,

    /// Re-plan at least this often even when nothing changes (a safety net; changes trigger a plan
    /// at once).
    #[arg(long, default_value = "30s", value_parser = humantime_duration)]
    pub resync: Duration,

    /// Largest share of the time the loop spends planning and acting: after a pass that took d,
    /// the next starts no sooner than d × (1 − share) / share later, and takes in every change
    /// meanwhile (1: plan again at once). Every pod event wakes the loop; at a thousand nodes
    /// a pass takes over 100 ms, and passes back to back would spend a whole core.
    #[arg(long, default_value = "0.5", value_parser = crate::reconcile::busy_share::parse_share)]
    pub max_busy_share: f64,

    /// Pace admission by room: past a floor of nodes in progress, admit a node only while the
    /// nodes that stay can take its pods, so that replacements land once: fewer disruptions, a
    /// longer upgrade (docs/decisions/0002-land-once.md has the figures).
    #[arg(long)]
    pub pace_by_room: bool,

    /// ServiceAccount (NAMESPACE/NAME) whose token the Http kamikaze carries: requested with the
    /// TokenRequest API for --kamikaze-audience, bound to the Node told, and verified by its
    /// agent. Default in a cluster: k8sm-controller in the controller's own namespace.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub kamikaze_service_account: Option<ServiceAccountRef>,

    /// Audience of the Http kamikaze's token; the agents verify it (`k8sm-agent
    /// --kamikaze-audience`).
    #[arg(long, default_value = k8sm_api::keys::KAMIKAZE_TOKEN_AUDIENCE)]
    pub kamikaze_audience: String,

    /// PEM file of the CA certificates that sign the agents' serving certificates (`k8sm-agent
    /// --tls-cert-file`): the Http kamikaze trusts only these, not the system's roots. Read
    /// again when it changes. Default: the system's roots.
    #[arg(long, value_name = "PATH")]
    pub kamikaze_ca_file: Option<std::path::PathBuf>,

    /// Log lines as text, or as one JSON object per line (for log collectors). Either goes to
    /// stderr, with colour codes only when stderr is a terminal.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

fn humantime_duration(s: &str) -> Result<Duration, String> {
    s.parse::<k8sm_api::DurationString>()
        .map(|d| d.as_duration())
        .map_err(|e| e.to_string())
}
