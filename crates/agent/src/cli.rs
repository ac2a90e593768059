//! The command line: `k8sm-agent run` on real nodes, `k8sm-agent simulate` for KWOK nodes.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use k8sm_api::keys::KAMIKAZE_TOKEN_AUDIENCE;

use crate::gate::{DEFAULT_CONTROLLER_USER, Expected};
use crate::obeyed::ObeyedTokens;
use crate::simulate::state::Comeback;
use crate::validate;

/// The node side of k8sm: publishes the executor ID on the Node and obeys kamikaze.
#[derive(Debug, Parser)]
#[command(
    name = "k8sm-agent",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("K8SM_COMMIT"), ")")
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Log lines as text, or as one JSON object per line (for log collectors), as the controller's
    /// `--log-format`. Either goes to stderr.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "K8SM_LOG_FORMAT",
        default_value_t = LogFormat::Text
    )]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run on a real node: publish this executor's ID and, on kamikaze, run a command that restarts
    /// the executor, then exit.
    Run(RunArgs),
    /// Play the executors of KWOK nodes: publish their IDs and "restart" them with a new ID on
    /// kamikaze.
    Simulate(SimulateArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Name of this node's Node object (in a DaemonSet: from the downward API, `spec.nodeName`).
    #[arg(long, env = "NODE_NAME", value_parser = validate::node_name)]
    pub node: String,

    /// ID of the executor running on this node now (`kubectl k8sm executor-id` computes it). Or
    /// `--kubelet`.
    #[arg(
        long = "executor-id",
        value_parser = validate::executor_id,
        required_unless_present = "kubelet",
        conflicts_with = "kubelet"
    )]
    pub given_executor_id: Option<String>,

    /// Compute the executor ID from the kubelet that runs on this node: its binary and
    /// `--version`, its flags (but those naming the node itself), its `--config` file and its
    /// static pods, read through `/proc` (give the agent the host's PID namespace). `kubectl
    /// k8sm executor-id --kubelet-binary …` gives the same ID from the same files.
    #[arg(long)]
    pub kubelet: bool,

    /// With `--kubelet`: the kubelet's PID, instead of the process named `kubelet`.
    #[arg(long, requires = "kubelet")]
    pub kubelet_pid: Option<u32>,

    /// With `--kubelet`: where the process information is mounted.
    #[arg(long, requires = "kubelet", default_value = "/proc")]
    pub proc: PathBuf,

    /// The executor ID this agent publishes: the given one, or the running kubelet's (filled in at
    /// start).
    #[arg(skip)]
    pub executor_id: String,

    /// Shell command (`sh -c`) that restarts the executor in its new version, e.g. `systemctl
    /// restart k8sm-executor`.
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub on_kamikaze: String,

    /// Kubeconfig file; without it: `KUBECONFIG`, `~/.kube/config`, or the in-cluster service
    /// account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Longest the kamikaze command may run: then it is killed (with everything it started) and
    /// the agent exits 1.
    #[arg(long, default_value = "5m")]
    pub on_kamikaze_timeout: humantime::Duration,

    /// Also accept the `Http` kamikaze on this address: `POST /kamikaze` or `POST
    /// /kamikaze/{nodeName}`, and serve `GET /healthz`. Only the controller's token, bound to
    /// this node, on a node k8sm drained, is obeyed.
    #[arg(long)]
    pub http_addr: Option<SocketAddr>,

    #[command(flatten)]
    pub kamikaze_auth: KamikazeAuthArgs,
}

/// Who may send the `Http` kamikaze: the token each request must carry, verified with a
/// TokenReview.
#[derive(Debug, Clone, Args)]
pub struct KamikazeAuthArgs {
    /// Audience the `Http` kamikaze's token must be issued for (the controller's
    /// `--kamikaze-audience`).
    #[arg(long, default_value = KAMIKAZE_TOKEN_AUDIENCE)]
    pub kamikaze_audience: String,

    /// User the `Http` kamikaze's token must authenticate as: the controller's ServiceAccount.
    #[arg(long, value_name = "USER", default_value = DEFAULT_CONTROLLER_USER)]
    pub kamikaze_from: String,

    /// File that remembers the hashes of the tokens obeyed, until they expire, so that the agent
    /// started after a kamikaze refuses them too (each token is obeyed once). Without it they
    /// are remembered in memory only.
    #[arg(long, value_name = "PATH")]
    pub obeyed_tokens_file: Option<PathBuf>,

    /// Serve the `Http` kamikaze over HTTPS with this certificate chain (PEM; a mounted Secret's
    /// `tls.crt`), so that the controller can verify the agent and the token crosses the
    /// network encrypted. With `--tls-key-file`.
    #[arg(long, value_name = "PATH", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// The private key of `--tls-cert-file` (PEM; `tls.key`).
    #[arg(long, value_name = "PATH", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
}

impl KamikazeAuthArgs {
    /// The tokens obeyed so far: those of the file, if one is given.
    pub fn obeyed_tokens(&self) -> Result<std::sync::Arc<ObeyedTokens>, crate::Error> {
        let obeyed = match &self.obeyed_tokens_file {
            Some(path) => ObeyedTokens::in_file(path.clone()).map_err(|source| {
                crate::Error::ObeyedTokens {
                    path: path.clone(),
                    source,
                }
            })?,
            None => ObeyedTokens::in_memory(),
        };
        Ok(std::sync::Arc::new(obeyed))
    }

    /// The HTTPS configuration, if a certificate and key are given.
    pub fn tls(&self) -> Result<Option<std::sync::Arc<rustls::ServerConfig>>, crate::Error> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => crate::tls::server_config(cert, key)
                .map(Some)
                .map_err(crate::Error::Tls),
            _ => Ok(None),
        }
    }

    pub fn expected(&self) -> Expected {
        Expected {
            audience: self.kamikaze_audience.clone(),
            controller: self.kamikaze_from.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Kubeconfig file; without it: `KUBECONFIG`, `~/.kube/config`, or the in-cluster service
    /// account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// ID that executors report after a restart.
    #[arg(long, value_parser = validate::executor_id)]
    pub new_executor_id: String,

    /// How long a restart takes, from kamikaze to the new ID (or to the deleted node's return).
    #[arg(long, default_value = "2s")]
    pub restart_delay: humantime::Duration,

    /// Label selector of the nodes to play (e.g. `type=kwok`); default: all nodes.
    #[arg(long, short = 'l')]
    pub selector: Option<String>,

    /// ID that selected nodes without one report, as executors publish their ID when they start.
    #[arg(long, value_parser = validate::executor_id)]
    pub initial_executor_id: Option<String>,

    /// Accept the `Http` kamikaze on this address: `POST /kamikaze/{nodeName}` (policy urlTemplate
    /// `http://ADDR/kamikaze/{nodeName}`), and serve `GET /healthz`. As on a real node, only the controller's token,
    /// bound to the node, on a node k8sm drained, is obeyed.
    #[arg(long)]
    pub http_addr: Option<SocketAddr>,

    #[command(flatten)]
    pub kamikaze_auth: KamikazeAuthArgs,

    /// Fault injection: the executor of this node never comes back after a kamikaze (it hangs), so
    /// the controller reports the restart overdue. Repeat for several nodes.
    #[arg(long = "never-restart", value_name = "NODE", value_parser = validate::node_name)]
    pub never_restart: Vec<String>,

    /// Fault injection: on kamikaze, this node's executor restarts (after the delay) reporting ID
    /// instead of the new ID: `old` for the ID it reports now (its new package was missing),
    /// or any other ID. With DeleteNode, the re-created node reports it. Repeat for several
    /// nodes.
    #[arg(long = "come-back-as", value_name = "NODE=ID", value_parser = come_back_as)]
    pub come_back_as: Vec<(String, Comeback)>,
}

/// `--come-back-as NODE=ID`.
fn come_back_as(value: &str) -> Result<(String, Comeback), String> {
    const EXPECTED: &str = "expected NODE=ID, with ID `old` for the node's current ID";
    let (node, id) = value.split_once('=').ok_or(EXPECTED)?;
    let node = validate::node_name(node).map_err(|error| format!("{EXPECTED}: NODE {error}"))?;
    let comeback = match id {
        "old" => Comeback::OldId,
        id => Comeback::Id(
            validate::executor_id(id).map_err(|error| format!("{EXPECTED}: ID {error}"))?,
        ),
    };
    Ok((node, comeback))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn simulate_defaults_to_a_two_second_restart_on_all_nodes() {
        let cli =
            Cli::try_parse_from(["k8sm-agent", "simulate", "--new-executor-id", "new"]).unwrap();
        let Command::Simulate(args) = cli.command else {
            panic!("not simulate");
        };
        assert_eq!(*args.restart_delay, std::time::Duration::from_secs(2));
        assert_eq!(args.selector, None);
        assert_eq!(args.initial_executor_id, None);
        assert_eq!(args.http_addr, None);
        assert!(args.never_restart.is_empty());
        assert!(args.come_back_as.is_empty());
    }

    #[test]
    fn simulate_takes_every_option() {
        let cli = Cli::try_parse_from([
            "k8sm-agent",
            "simulate",
            "--kubeconfig=/k",
            "--new-executor-id=new",
            "--restart-delay=500ms",
            "--selector=type=kwok",
            "--initial-executor-id=old",
            "--http-addr=127.0.0.1:8080",
            "--never-restart=node-0001",
            "--never-restart=node-0002",
            "--come-back-as=node-0003=old",
            "--come-back-as",
            "node-0004=sha256:third",
        ])
        .unwrap();
        let Command::Simulate(args) = cli.command else {
            panic!("not simulate");
        };
        assert_eq!(args.never_restart, ["node-0001", "node-0002"]);
        assert_eq!(
            args.come_back_as,
            [
                ("node-0003".to_owned(), Comeback::OldId),
                ("node-0004".to_owned(), Comeback::Id("sha256:third".into())),
            ]
        );
        assert_eq!(*args.restart_delay, std::time::Duration::from_millis(500));
        assert_eq!(args.selector.as_deref(), Some("type=kwok"));
        assert_eq!(args.initial_executor_id.as_deref(), Some("old"));
        assert_eq!(args.http_addr, Some("127.0.0.1:8080".parse().unwrap()));
    }

    #[test]
    fn come_back_as_names_a_node_and_an_id() {
        for bad in [
            "node-0001",
            "node-0001=",
            "=old",
            "Node=old",
            "node-0001=a b",
        ] {
            let error = come_back_as(bad).expect_err(bad);
            assert!(error.starts_with("expected NODE=ID"), "{bad}: {error}");
        }
        assert_eq!(
            come_back_as("n=older"),
            Ok(("n".into(), Comeback::Id("older".into()))),
            "only the exact literal `old` means the current ID"
        );
    }

    #[test]
    fn run_requires_its_node_id_and_command() {
        let cli = Cli::try_parse_from([
            "k8sm-agent",
            "run",
            "--node=node-0000",
            "--executor-id=old",
            "--on-kamikaze=systemctl restart k8sm-executor",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run");
        };
        assert_eq!(args.node, "node-0000");
        assert_eq!(args.on_kamikaze, "systemctl restart k8sm-executor");
        assert_eq!(
            *args.on_kamikaze_timeout,
            std::time::Duration::from_secs(300)
        );
        assert_eq!(
            args.kamikaze_auth.expected(),
            Expected {
                audience: "k8s.mesosphere.io/kamikaze".into(),
                controller: "system:serviceaccount:k8sm-system:k8sm-controller".into(),
            },
            "the controller of deploy/rbac.yaml, for the audience the controller asks for by default"
        );
        assert!(
            Cli::try_parse_from([
                "k8sm-agent",
                "run",
                "--node=n",
                "--executor-id=a b",
                "--on-kamikaze=x"
            ])
            .is_err()
        );
        assert!(
            Cli::try_parse_from([
                "k8sm-agent",
                "run",
                "--node=n",
                "--executor-id=a",
                "--on-kamikaze="
            ])
            .is_err()
        );
    }
}
