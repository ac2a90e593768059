//! The command line, with kubectl's conventions: `--kubeconfig`, `--context`, `-n`/`-A`, `-o`,
//! `-h`, and usage printed as `kubectl k8sm …`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::connect::ConnectOptions;
pub use crate::format::Output;

/// Steer SLA-safe rolling upgrades of node executors: see how far an upgrade got, what blocks it,
/// what happens next, and unblock, pause or resume it.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl-k8sm",
    bin_name = "kubectl k8sm",
    version,
    propagate_version = true,
    after_help = examples::TOP
)]
pub struct Cli {
    #[command(flatten)]
    pub connect: ConnectArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ConnectArgs {
    /// Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config).
    // Listed after each command's own flags.
    #[arg(long, global = true, value_name = "PATH", display_order = 100)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME", display_order = 101)]
    pub context: Option<String>,

    /// The kubeconfig cluster to use (instead of the context's).
    #[arg(long, global = true, value_name = "NAME", display_order = 102)]
    pub cluster: Option<String>,

    /// The kubeconfig user to use (instead of the context's).
    #[arg(long, global = true, value_name = "NAME", display_order = 103)]
    pub user: Option<String>,

    /// Act as this user (impersonation, as kubectl's --as): the apiserver checks the request with
    /// that user's rights, and `force` records that user.
    #[arg(long = "as", global = true, value_name = "USER", display_order = 104)]
    pub as_user: Option<String>,

    /// Act with this group too (with --as; repeat for more), as kubectl's --as-group.
    #[arg(
        long = "as-group",
        global = true,
        value_name = "GROUP",
        requires = "as_user",
        display_order = 105
    )]
    pub as_groups: Vec<String>,

    /// How long to wait for a single server request before giving up (e.g. 10s, 1m; 0: no limit).
    /// `upgrade status --watch` keeps its watches open longer than this.
    #[arg(long, global = true, value_name = "DURATION", default_value = "30s", value_parser = request_timeout,
          display_order = 106)]
    pub request_timeout: RequestTimeout,
}

/// `--request-timeout`: kubectl's grammar, where 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTimeout(pub Option<Duration>);

impl Default for RequestTimeout {
    fn default() -> Self {
        Self(Some(DEFAULT_REQUEST_TIMEOUT))
    }
}

/// Every call the plugin makes is bounded by default: a hung apiserver or proxy must not hang the
/// operator's shell.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

fn request_timeout(text: &str) -> Result<RequestTimeout, String> {
    if text.trim() == "0" {
        return Ok(RequestTimeout(None));
    }
    text.parse::<k8sm_api::DurationString>()
        .map(|d| RequestTimeout(Some(d.as_duration()).filter(|d| !d.is_zero())))
        .map_err(|e| e.to_string())
}

impl From<&ConnectArgs> for ConnectOptions {
    fn from(args: &ConnectArgs) -> Self {
        Self {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
            cluster: args.cluster.clone(),
            user: args.user.clone(),
            as_user: args.as_user.clone(),
            as_groups: args.as_groups.clone(),
            request_timeout: args.request_timeout.0,
            long_lived: false,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start an upgrade, or follow one.
    #[command(subcommand, after_help = examples::UPGRADE)]
    Upgrade(Upgrade),
    /// List every pod that keeps a draining node from finishing, and why.
    #[command(after_help = examples::BLOCKED)]
    Blocked(BlockedArgs),
    /// Dry run: what the controller does next, node by node and pod by pod, and why.
    #[command(after_help = examples::PLAN)]
    Plan(PlanArgs),
    /// Delete a node's pods that only an operator can move (unmanaged pods under policy Never;
    /// opted-out pods only with --include-opted-out), recording a Forced event on each; or,
    /// with --retry-kamikaze, tell a node that came back from kamikaze with the wrong executor
    /// to terminate once more.
    #[command(after_help = examples::FORCE)]
    Force(ForceArgs),
    /// Stop all evictions, deletions and kamikaze of a policy (nodes are still marked, status still
    /// updated), with the k8s.mesosphere.io/paused annotation, which Helm and GitOps tools leave
    /// alone.
    #[command(after_help = examples::PAUSE)]
    Pause(PolicyArg),
    /// Resume a paused policy where it stopped: remove the pause annotation and, if the spec pauses
    /// it too, set spec.paused to false (only where kubectl wrote it, unless --override-spec).
    #[command(after_help = examples::RESUME)]
    Resume(ResumeArgs),
    /// Print the executor ID of an executor build and configuration.
    #[command(disable_version_flag = true, after_help = examples::EXECUTOR_ID)]
    ExecutorId(ExecutorIdArgs),
    /// Print a shell completion script for kubectl-k8sm, e.g. `source <(kubectl k8sm completion
    /// bash)`.
    #[command(after_help = examples::COMPLETION)]
    Completion(CompletionArgs),
}

/// The "Examples:" section of every command's help, as kubectl's: commands to copy, the common case
/// first.
mod examples {
    pub const TOP: &str = concat!(
        "Examples:
  kubectl k8sm upgrade start --to sha256:…
  kubectl k8sm upgrade status --watch
  kubectl k8sm blocked -A
  kubectl k8sm plan
  kubectl k8sm force node-17

",
        crate::exit::help!()
    );
    pub const UPGRADE: &str = "Examples:
  # Upgrade every node of the only policy to a new executor, then follow it
  kubectl k8sm upgrade start --to sha256:<64 hex digits>
  kubectl k8sm upgrade status --watch

  # What the last run did, for a change ticket
  kubectl k8sm upgrade report -o markdown";
    pub const START: &str = "Examples:
  # The ID of the executor the control plane now launches, then the upgrade to it
  kubectl k8sm executor-id --version v1.36.3 --binary ./kubelet --static-pods ./manifests
  kubectl k8sm upgrade start --to sha256:<64 hex digits>

  # With several policies, name one
  kubectl k8sm upgrade start --to sha256:<64 hex digits> --policy gpu-pool";
    pub const STATUS: &str = "Examples:
  # Progress, ETA and the nodes in flight or blocked; the queue and the upgraded in a line each
  kubectl k8sm upgrade status

  # Every node, one per row
  kubectl k8sm upgrade status --all

  # Only the nodes of one zone, re-rendered on every change until done
  kubectl k8sm upgrade status -l topology.kubernetes.io/zone=eu-west-1a --watch

  # For scripts
  kubectl k8sm upgrade status -o json

  # Node names only, or fail a CI step while a node is Blocked
  kubectl k8sm upgrade status --all -o name
  kubectl k8sm upgrade status --exit-code -o jsonpath='{.percent}'

Exit status: 3 with --exit-code when a node is Blocked, 0 otherwise, 1 on an error.";
    pub const REPORT: &str = "Examples:
  # The policy's last run
  kubectl k8sm upgrade report

  # The run to one target, as Markdown
  kubectl k8sm upgrade report --policy fleet --to sha256:<64 hex digits> -o markdown";
    pub const BLOCKED: &str = "Examples:
  # Every pod that holds a draining node, whatever its namespace
  kubectl k8sm blocked

  # Only one namespace's pods, or only one app's
  kubectl k8sm blocked -n shop
  kubectl k8sm blocked -l app=kafka -o wide

  # For scripts: the pods' names, or their nodes and reasons
  kubectl k8sm blocked -o name
  kubectl k8sm blocked -o custom-columns=NODE:.node,POD:.name,REASON:.reason --no-headers

Exit status: 3 when it lists a pod (a node is held), 0 when none, 1 on an error.";
    pub const PLAN: &str = "Examples:
  # What the controller does next, and why
  kubectl k8sm plan

  # What an upgrade to a new target would do first (the policy is not changed)
  kubectl k8sm plan --to sha256:<64 hex digits>

  # Only the nodes of one pool, with the pods that restart with them
  kubectl k8sm plan -l pool=gpu -o wide

  # The queue's order, one node a line; only the pods of one namespace
  kubectl k8sm plan -o jsonpath='{range .nodes[*]}{.order}{\"\\t\"}{.name}{\"\\n\"}{end}'
  kubectl k8sm plan -n shop -o wide";
    pub const FORCE: &str = "Examples:
  # Delete the pods that only an operator can move off node-17, after confirmation
  kubectl k8sm force node-17

  # Opted-out pods too, without asking
  kubectl k8sm force node-17 --include-opted-out --yes

  # A node that came back from kamikaze with the wrong executor: what would change, then do it
  kubectl k8sm force node-17 --retry-kamikaze --dry-run
  kubectl k8sm force node-17 --retry-kamikaze";
    pub const PAUSE: &str = "Examples:
  # Stop every eviction, deletion and kamikaze now
  kubectl k8sm pause
  kubectl k8sm pause --policy gpu-pool";
    pub const RESUME: &str = "Examples:
  # Go on where the upgrade stopped
  kubectl k8sm resume
  kubectl k8sm resume --policy gpu-pool";
    pub const EXECUTOR_ID: &str = "Examples:
  # The ID of a kubelet as the agent computes it on a node
  kubectl k8sm executor-id --kubelet-binary ./kubelet --kubelet-cmdline ./cmdline --kubelet-config ./config.yaml \\
    --static-pods ./manifests

  # Any executor: its version, binary (or its hash), flags and static pods
  kubectl k8sm executor-id --version v1.36.3 --binary ./kubelet --flag --max-pods=110 --static-pods ./manifests";
    pub const COMPLETION: &str = "Examples:
  # Complete kubectl k8sm in this bash session, or in every new one
  source <(kubectl k8sm completion bash)
  kubectl k8sm completion bash > ~/.local/share/bash-completion/completions/kubectl-k8sm

  # zsh and fish
  kubectl k8sm completion zsh > \"${fpath[1]}/_kubectl-k8sm\"
  kubectl k8sm completion fish > ~/.config/fish/completions/kubectl-k8sm.fish";
}

#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

#[derive(Subcommand, Debug)]
pub enum Upgrade {
    /// Set the target executor ID: every selected node running another executor is upgraded to it.
    #[command(after_help = examples::START)]
    Start(StartArgs),
    /// Progress, ETA, counts by phase, and where the nodes in flight or blocked stand (--all: every
    /// node).
    #[command(after_help = examples::STATUS)]
    Status(StatusArgs),
    /// The durable record of an upgrade run (the last one, or that of `--to`): per node its drain
    /// and restart, per workload the fewest Ready pods observed against its bound, and the
    /// actions taken; it outlives the Events.
    #[command(after_help = examples::REPORT)]
    Report(ReportArgs),
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The policy whose run to show; may be left out when only one has reports (its policy may be
    /// gone).
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,

    /// The run that upgraded to this executor ID (default: the policy's last run).
    #[arg(long, value_name = "ID")]
    pub to: Option<String>,

    /// Output format: table, markdown, json, yaml, name (node/NAME of each node of the run),
    /// jsonpath=TEMPLATE (over the -o json document) or custom-columns=SPEC (one row per node,
    /// its name in .name), as kubectl's.
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "table",
          value_parser = report_format)]
    pub output: ReportFormat,

    /// Leave out the header line of custom-columns.
    #[arg(long)]
    pub no_headers: bool,
}

/// `upgrade report -o`: Markdown as well, for a change ticket or a post-mortem.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportFormat {
    Markdown,
    Other(Output),
}

fn report_format(text: &str) -> Result<ReportFormat, String> {
    match text {
        "markdown" => Ok(ReportFormat::Markdown),
        text => Output::parse(text).map(ReportFormat::Other),
    }
}

/// `-o` and `--no-headers` of the commands that list.
#[derive(Args, Debug, Clone, Default)]
pub struct Printing {
    /// Output format: table, wide, json, yaml, name (kind/NAME of each listed object: node/NAME,
    /// or pod/NAME for blocked), jsonpath=TEMPLATE (kubectl's, over the -o json document, e.g.
    /// '{range .nodes[*]}{.name}{"\n"}{end}') or custom-columns=HEADER:EXPR,… (one row per
    /// listed object, e.g. NODE:.name,PHASE:.phase).
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "table",
          value_parser = Output::parse)]
    pub output: Output,

    /// Leave out the header line of custom-columns and of blocked's table.
    #[arg(long)]
    pub no_headers: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub struct PolicyArg {
    /// The ExecutorUpgradePolicy to use; may be left out when only one exists.
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,
}

#[derive(Args, Debug)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub policy: PolicyArg,

    /// Set spec.paused to false even where Helm or a GitOps tool wrote it (which sets it back on
    /// its next sync).
    #[arg(long)]
    pub override_spec: bool,
}

#[derive(Args, Debug)]
pub struct StartArgs {
    /// The executor ID the control plane now launches, such as sha256:<64 hex digits> (see
    /// `kubectl k8sm executor-id`).
    #[arg(long, value_name = "ID")]
    pub to: String,

    #[command(flatten)]
    pub policy: PolicyArg,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub policy: PolicyArg,

    #[command(flatten)]
    pub printing: Printing,

    /// Re-render on every change, until every node is upgraded or Ctrl-C.
    #[arg(short = 'w', long)]
    pub watch: bool,

    /// Exit with status 3 when a node is Blocked (for scripts and CI; the output is unchanged).
    #[arg(long, conflicts_with = "watch")]
    pub exit_code: bool,

    /// List every node of the policy, one per row (default: only nodes in flight or blocked; the
    /// queued and the upgraded are summed up in a line each).
    #[arg(long)]
    pub all: bool,

    /// Only nodes with these labels (a label query, as kubectl's: key=value, key!=value, key in
    /// (a,b), key, !key; comma-separated, all must match): the node rows and the summary lines
    /// count only the policy's nodes that match.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
}

#[derive(Args, Debug)]
pub struct BlockedArgs {
    #[command(flatten)]
    pub namespaces: Namespaces,

    /// Only pods with these labels (a label query, as kubectl's: key=value, key!=value, key in
    /// (a,b), key, !key; comma-separated, all must match). The plan still weighs every pod: a
    /// pod waits on its workload's other pods.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,

    #[command(flatten)]
    pub printing: Printing,
}

/// kubectl's `-n`/`-A` for the commands that list pods. Every namespace is the default: a pod
/// holds its node whatever its namespace, and the plan still weighs every pod.
#[derive(Args, Debug)]
pub struct Namespaces {
    /// Only pods of this namespace in the lists of pods (default: every namespace).
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,

    /// Pods of every namespace (the default).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub policy: PolicyArg,

    /// Plan as if `upgrade start --to ID` had set this target (the policy is not changed).
    #[arg(long, value_name = "ID")]
    pub to: Option<String>,

    /// Wide output also lists pods that restart with their node.
    #[command(flatten)]
    pub printing: Printing,

    #[command(flatten)]
    pub namespaces: Namespaces,

    /// Only nodes with these labels, and their pods and actions (a label query, as kubectl's:
    /// key=value, key!=value, key in (a,b), key, !key; comma-separated, all must match). The
    /// plan is that of every node: a node's place in the queue is its place among all of them.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
}

#[derive(Args, Debug)]
pub struct ForceArgs {
    /// The node to unblock.
    pub node: String,

    /// Also delete pods that opted out of the upgrade (k8s.mesosphere.io/upgrade-opt-out and the
    /// like).
    #[arg(long)]
    pub include_opted_out: bool,

    /// For a node that came back from kamikaze with the wrong executor (its old one, or neither
    /// its old one nor the target), which k8sm never tells to terminate twice: remove the
    /// record of that kamikaze (the node's kamikaze annotations, or its entry in the policy's
    /// status.deletedNodes with kamikaze DeleteNode), so that k8sm drains the node and tells
    /// it to terminate once more. Fix the node's executor first. Deletes no pod.
    #[arg(long, conflicts_with = "include_opted_out")]
    pub retry_kamikaze: bool,

    /// Also delete pods stuck terminating (past their grace period; reason StuckTerminating) with
    /// a grace period of 0, as `kubectl delete --grace-period=0 --force` would: for a pod
    /// whose kubelet is gone. A finalizer still holds such a pod until what set it removes it.
    #[arg(long, conflicts_with = "retry_kamikaze")]
    pub terminating: bool,

    /// Only print what would be deleted or removed.
    #[arg(long)]
    pub dry_run: bool,

    /// Act without asking for confirmation (required when standard input is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Args, Debug)]
pub struct ExecutorIdArgs {
    /// Version string of the executor, such as v1.36.3 (with --kubelet-binary: default, the first
    /// line of its `--version`).
    #[arg(
        long = "version",
        value_name = "VERSION",
        required_unless_present = "kubelet_binary"
    )]
    pub executor_version: Option<String>,

    /// The executor binary, hashed with SHA-256.
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present_any = ["binary_sha256", "kubelet_binary"],
        conflicts_with = "binary_sha256"
    )]
    pub binary: Option<PathBuf>,

    /// A kubelet build: its ID as `k8sm-agent run --kubelet` computes it on a node that runs it
    /// with the command line of --kubelet-cmdline, the configuration of --kubelet-config and
    /// the static pods of --static-pods (flags that name the node itself, such as
    /// --hostname-override and --node-ip, are left out).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["binary", "binary_sha256", "flags"])]
    pub kubelet_binary: Option<PathBuf>,

    /// With --kubelet-binary: a file holding the kubelet's command line, as `/proc/<pid>/cmdline`
    /// of a node has it (NUL-separated) or as text (separated by whitespace), the program name
    /// first.
    #[arg(long, value_name = "FILE", requires = "kubelet_binary")]
    pub kubelet_cmdline: Option<PathBuf>,

    /// With --kubelet-binary: the kubelet's configuration file (its --config), required when the
    /// command line has one.
    #[arg(long, value_name = "FILE", requires = "kubelet_binary")]
    pub kubelet_config: Option<PathBuf>,

    /// The executor binary's SHA-256 in hex, when the binary itself is not at hand.
    #[arg(long, value_name = "HEX")]
    pub binary_sha256: Option<String>,

    /// A flag or configuration setting of the executor, as NAME=VALUE; repeat for each (order does
    /// not matter).
    #[arg(long = "flag", value_name = "NAME=VALUE", allow_hyphen_values = true)]
    pub flags: Vec<String>,

    /// Directory of the executor's static pod manifests (YAML or JSON; hidden files are skipped).
    #[arg(long, value_name = "DIR")]
    pub static_pods: Option<PathBuf>,

    /// Output format: table and wide print the ID alone.
    #[arg(short = 'o', long, value_enum, default_value_t = IdOutput::Table)]
    pub output: IdOutput,
}

/// `executor-id -o`: the ID alone, or it and its inputs for scripts.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IdOutput {
    #[default]
    Table,
    Wide,
    Json,
    Yaml,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The completion script bash reads: valid bash (checked by bash itself), completing every
    /// subcommand.
    #[test]
    fn the_bash_completion_script_is_bash_and_knows_every_command() {
        let mut script = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "kubectl-k8sm",
            &mut script,
        );
        let text = String::from_utf8(script).unwrap();
        for word in [
            "upgrade",
            "report",
            "blocked",
            "force",
            "--kubelet-binary",
            "--as-group",
        ] {
            assert!(text.contains(word), "{word}");
        }
        let path = std::env::temp_dir().join(format!(
            "kubectl-k8sm-completion-{}.bash",
            std::process::id()
        ));
        std::fs::write(&path, &text).unwrap();
        let checked = std::process::Command::new("bash")
            .arg("-n")
            .arg(&path)
            .output();
        let _ = std::fs::remove_file(&path);
        let checked = checked.expect("bash runs");
        assert!(
            checked.status.success(),
            "{}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }

    /// Every command, as kubectl's, ends its help with examples, and every example is a command
    /// line that parses.
    #[test]
    fn every_command_has_examples_that_parse() {
        fn walk(command: &clap::Command, path: &str, examples: &mut Vec<String>) {
            for sub in command.get_subcommands().filter(|c| c.get_name() != "help") {
                let path = format!("{path} {}", sub.get_name());
                let help = sub
                    .get_after_help()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                assert!(help.starts_with("Examples:\n"), "{path} has no examples");
                // A `\` at the end of a line continues it, as in a shell.
                let joined = help.replace("\\\n", " ");
                let own: Vec<String> = joined
                    .lines()
                    .map(str::trim)
                    .filter(|l| l.starts_with("kubectl k8sm"))
                    .map(str::to_owned)
                    .collect();
                assert!(
                    own.iter()
                        .any(|l| l.starts_with(&format!("kubectl k8sm{path}"))),
                    "{path}: no example runs it:\n{help}"
                );
                examples.extend(own);
                walk(sub, &path, examples);
            }
        }
        let mut examples = Vec::new();
        walk(&Cli::command(), "", &mut examples);
        assert!(examples.len() > 20, "{examples:?}");
        let id = format!("sha256:{}", "ab".repeat(32));
        for example in examples {
            let line = example.replace("sha256:<64 hex digits>", &id);
            // Up to a shell redirection.
            let line = line.split(" > ").next().unwrap_or_default();
            let words = std::iter::once("kubectl-k8sm".to_owned())
                .chain(shell_words(line).into_iter().skip(2))
                .collect::<Vec<_>>();
            if let Err(error) = Cli::try_parse_from(&words) {
                panic!("{example}: {error}");
            }
        }
    }

    /// A shell's words of `line`: split at blanks outside single quotes, the quotes removed.
    fn shell_words(line: &str) -> Vec<String> {
        let mut words = vec![String::new()];
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '\'' => quoted = !quoted,
                c if c.is_whitespace() && !quoted => {
                    if !words.last().is_some_and(String::is_empty) {
                        words.push(String::new());
                    }
                }
                c => words.last_mut().expect("a word").push(c),
            }
        }
        words.retain(|w| !w.is_empty());
        words
    }

    #[test]
    fn status_blocked_and_plan_take_a_label_selector() {
        let cli = Cli::try_parse_from([
            "kubectl-k8sm",
            "upgrade",
            "status",
            "-l",
            "pool in (a,b),!spot",
            "--all",
        ])
        .unwrap();
        let Command::Upgrade(Upgrade::Status(args)) = cli.command else {
            panic!("status")
        };
        assert_eq!(args.selector.as_deref(), Some("pool in (a,b),!spot"));
        assert!(args.all);
        for command in [&["blocked"][..], &["plan"]] {
            let args = std::iter::once("kubectl-k8sm")
                .chain(command.iter().copied())
                .chain(["--selector", "app=web"]);
            assert!(Cli::try_parse_from(args).is_ok(), "{command:?}");
        }
    }

    #[test]
    fn request_timeout_reads_like_kubectls() {
        let parse = |text: &str| request_timeout(text).map(|t| t.0);
        assert_eq!(parse("0"), Ok(None));
        assert_eq!(parse("0s"), Ok(None));
        assert_eq!(parse("45s"), Ok(Some(Duration::from_secs(45))));
        assert_eq!(parse("2m"), Ok(Some(Duration::from_secs(120))));
        assert!(parse("soon").is_err());
        let cli = Cli::try_parse_from(["kubectl-k8sm", "blocked"]).expect("parses");
        assert_eq!(cli.connect.request_timeout.0, Some(DEFAULT_REQUEST_TIMEOUT));
    }

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn usage_reads_kubectl_k8sm() {
        let help = Cli::command().render_usage().to_string();
        assert!(help.contains("kubectl k8sm"), "{help}");
        for args in [&["upgrade", "-h"][..], &["upgrade", "status", "--help"]] {
            let error =
                Cli::try_parse_from(std::iter::once("kubectl-k8sm").chain(args.iter().copied()))
                    .unwrap_err();
            assert_eq!(error.kind(), clap::error::ErrorKind::DisplayHelp);
            let text = error.to_string();
            assert!(text.contains("Usage: kubectl k8sm upgrade"), "{text}");
        }
    }

    #[test]
    fn kubectl_flags_parse_anywhere() {
        let cli = Cli::try_parse_from([
            "kubectl-k8sm",
            "blocked",
            "-n",
            "shop",
            "-o",
            "wide",
            "--context",
            "prod",
            "--kubeconfig",
            "/tmp/kc",
        ])
        .unwrap();
        assert_eq!(cli.connect.context.as_deref(), Some("prod"));
        let Command::Blocked(args) = cli.command else {
            panic!("blocked")
        };
        assert_eq!(args.namespaces.namespace.as_deref(), Some("shop"));
        assert_eq!(args.printing.output, Output::Wide);
        assert!(
            Cli::try_parse_from(["kubectl-k8sm", "blocked", "-n", "a", "-A"]).is_err(),
            "-n and -A exclude each other"
        );
    }

    #[test]
    fn force_retries_a_kamikaze_with_an_example_in_its_help() {
        let cli =
            Cli::try_parse_from(["kubectl-k8sm", "force", "node-17", "--retry-kamikaze"]).unwrap();
        let Command::Force(args) = cli.command else {
            panic!("force")
        };
        assert!(args.retry_kamikaze && !args.include_opted_out && !args.yes);
        assert!(
            Cli::try_parse_from([
                "kubectl-k8sm",
                "force",
                "n",
                "--retry-kamikaze",
                "--include-opted-out"
            ])
            .is_err(),
            "a retry deletes no pod"
        );
        let help = Cli::try_parse_from(["kubectl-k8sm", "force", "--help"])
            .unwrap_err()
            .to_string();
        assert!(
            help.contains("kubectl k8sm force node-17 --retry-kamikaze\n"),
            "{help}"
        );
        assert!(help.contains("--retry-kamikaze"), "{help}");
    }

    #[test]
    fn executor_id_flags_may_start_with_dashes() {
        let cli = Cli::try_parse_from([
            "kubectl-k8sm",
            "executor-id",
            "--version",
            "1.0",
            "--binary-sha256",
            "ab",
            "--flag",
            "--cluster=test",
            "--flag=--v=2",
        ])
        .unwrap();
        let Command::ExecutorId(args) = cli.command else {
            panic!("executor-id")
        };
        assert_eq!(args.flags, ["--cluster=test", "--v=2"]);
        assert!(
            Cli::try_parse_from(["kubectl-k8sm", "executor-id", "--version", "1"]).is_err(),
            "a binary or its hash is required"
        );
    }
}
