//! `cargo xtask cluster up|down|status` and `cargo xtask kubectl`: a long-lived local cluster for
//! humans.
//!
//! `up` starts a detached `cluster serve` process (this same binary) that owns the cluster and
//! stops it on SIGTERM; its pid and kubeconfig live in `.k8sm/cluster/`, so `down`, `status` and
//! `kubectl` find it from any shell.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use k8sm_testcluster::{Binaries, ClusterOptions, TestCluster};

use crate::workspace;

#[derive(clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Start the local cluster in the background; the last line printed is `export KUBECONFIG=…`.
    Up(UpArgs),
    /// Stop the local cluster and every process it started.
    Down,
    /// Say whether the local cluster runs, where, and how many nodes are Ready.
    Status,
    /// Run the cluster in the foreground until SIGTERM (what `up` starts in the background).
    #[command(hide = true)]
    Serve(UpArgs),
}

#[derive(clap::Args, Clone)]
pub struct UpArgs {
    /// Number of simulated (KWOK) nodes.
    #[arg(long, default_value_t = 5)]
    pub nodes: usize,
    /// Time from scheduling to Ready for every pod, e.g. `2s`.
    #[arg(long, default_value = "0s", value_parser = humantime_duration)]
    pub pod_ready_delay: Duration,
}

fn humantime_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    match args.command {
        ClusterCommand::Up(up_args) => {
            let kubeconfig = up(&up_args)?;
            println!("export KUBECONFIG={}", kubeconfig.display());
            Ok(())
        }
        ClusterCommand::Down => down(),
        ClusterCommand::Status => status(),
        ClusterCommand::Serve(up_args) => serve(up_args),
    }
}

/// Files of the running cluster's state.
struct State {
    dir: PathBuf,
}

impl State {
    fn new() -> Self {
        Self {
            dir: workspace::cluster_dir(),
        }
    }
    fn pid_file(&self) -> PathBuf {
        self.dir.join("serve.pid")
    }
    fn ready_file(&self) -> PathBuf {
        self.dir.join("ready")
    }
    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
    fn log(&self) -> PathBuf {
        self.dir.join("serve.log")
    }
    /// The pid of the serving process, if it is alive.
    fn running_pid(&self) -> Option<Pid> {
        let pid: i32 = std::fs::read_to_string(self.pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let pid = Pid::from_raw(pid);
        kill(pid, None).is_ok().then_some(pid)
    }
}

/// Starts the cluster (or finds it running) and returns its kubeconfig path.
pub fn up(args: &UpArgs) -> anyhow::Result<PathBuf> {
    let state = State::new();
    if state.running_pid().is_some() && state.ready_file().exists() {
        eprintln!("the local cluster is already running (`cargo xtask cluster down` stops it)");
        return Ok(state.kubeconfig());
    }
    // Build in the foreground so that a first, slow build shows its progress here.
    let binaries = Binaries::ensure().context("building the cluster binaries")?;
    eprintln!(
        "starting a local Kubernetes {} with {} KWOK nodes …",
        binaries.kubernetes_version, args.nodes
    );
    let _ = std::fs::remove_dir_all(&state.dir);
    std::fs::create_dir_all(&state.dir)
        .with_context(|| format!("creating {}", state.dir.display()))?;
    let log = File::create(state.log()).context("creating the serve log")?;
    let started = Instant::now();
    let mut child = Command::new(std::env::current_exe().context("locating xtask")?)
        .args(["cluster", "serve", "--nodes", &args.nodes.to_string()])
        .arg(format!(
            "--pod-ready-delay={}ms",
            args.pod_ready_delay.as_millis()
        ))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: a Ctrl-C in this shell later must not take the cluster down.
        .process_group(0)
        .spawn()
        .context("starting the cluster process")?;
    std::fs::write(state.pid_file(), child.id().to_string())?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while !state.ready_file().exists() {
        if let Some(status) = child.try_wait()? {
            bail!(
                "the cluster did not start ({status}); {} says:\n{}",
                state.log().display(),
                std::fs::read_to_string(state.log()).unwrap_or_default()
            );
        }
        if Instant::now() > deadline {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            bail!(
                "the cluster did not become ready in 10 minutes; see {}",
                state.log().display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "local cluster ready in {:.1}s: {} nodes; `cargo xtask kubectl get nodes`, `cargo xtask cluster down`",
        started.elapsed().as_secs_f64(),
        args.nodes
    );
    Ok(state.kubeconfig())
}

fn serve(args: UpArgs) -> anyhow::Result<()> {
    let state = State::new();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let options = ClusterOptions {
            nodes: args.nodes,
            pod_ready_delay: args.pod_ready_delay,
            dir: Some(state.dir.clone()),
            ..ClusterOptions::default()
        };
        let cluster = TestCluster::start(options).await?;
        std::fs::write(state.ready_file(), cluster.server())?;
        eprintln!(
            "serving {} from {}",
            cluster.server(),
            cluster.dir().display()
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        eprintln!("stopping");
        let _ = std::fs::remove_file(state.ready_file());
        drop(cluster);
        anyhow::Ok(())
    })
}

/// Remembers a process started for the running cluster (the demo's controller and agent) so `down`
/// stops it too.
pub fn record_background_pid(name: &str, pid: u32) -> anyhow::Result<()> {
    let path = State::new().dir.join(format!("{name}.bg-pid"));
    std::fs::write(&path, pid.to_string()).with_context(|| format!("writing {}", path.display()))
}

/// Stops the processes recorded by [`record_background_pid`].
fn stop_background(state: &State) {
    let Ok(entries) = std::fs::read_dir(&state.dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "bg-pid") {
            continue;
        }
        let Some(pid) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        else {
            continue;
        };
        // Only signal the process we started: its pid may have been reused since (comm is cut to 15
        // bytes).
        let name = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let ours = !comm.is_empty() && name.starts_with(comm.trim());
        let pid = Pid::from_raw(pid);
        if ours && kill(pid, Signal::SIGTERM).is_ok() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while kill(pid, None).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = kill(pid, Signal::SIGKILL);
        }
        let _ = std::fs::remove_file(path);
    }
}

fn down() -> anyhow::Result<()> {
    let state = State::new();
    stop_background(&state);
    let Some(pid) = state.running_pid() else {
        eprintln!("the local cluster is not running");
        let _ = std::fs::remove_dir_all(&state.dir);
        return Ok(());
    };
    kill(pid, Signal::SIGTERM).context("signalling the cluster process")?;
    // The cluster process stops its components (each gets a grace period) before exiting.
    let deadline = Instant::now() + Duration::from_secs(60);
    while kill(pid, None).is_ok() {
        if Instant::now() > deadline {
            // Its components die with it (parent-death signal).
            let _ = kill(pid, Signal::SIGKILL);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::remove_dir_all(&state.dir)
        .with_context(|| format!("removing {}", state.dir.display()))?;
    eprintln!("the local cluster is stopped and its files removed");
    Ok(())
}

fn status() -> anyhow::Result<()> {
    let state = State::new();
    let Some(pid) = state.running_pid() else {
        println!("not running (start it with `cargo xtask cluster up`)");
        return Ok(());
    };
    if !state.ready_file().exists() {
        println!("starting (pid {pid}); log: {}", state.log().display());
        return Ok(());
    }
    let server = std::fs::read_to_string(state.ready_file())?;
    let runtime = tokio::runtime::Runtime::new()?;
    let (version, ready, total) = runtime.block_on(async {
        let client = client(&state.kubeconfig()).await?;
        let version = client.apiserver_version().await?.git_version;
        let nodes = Api::<Node>::all(client)
            .list(&ListParams::default())
            .await?;
        let ready = nodes.items.iter().filter(|n| node_ready(n)).count();
        anyhow::Ok((version, ready, nodes.items.len()))
    })?;
    println!("running (pid {pid})");
    println!("server:     {server}");
    println!("version:    {version}");
    println!("nodes:      {ready}/{total} Ready");
    println!("kubeconfig: {}", state.kubeconfig().display());
    Ok(())
}

pub fn kubectl(args: &[String]) -> anyhow::Result<()> {
    let state = State::new();
    if state.running_pid().is_none() {
        bail!("the local cluster is not running: start it with `cargo xtask cluster up`");
    }
    let binaries = Binaries::ensure()?;
    let status = Command::new(&binaries.kubectl)
        .env("KUBECONFIG", state.kubeconfig())
        .args(args)
        .status()
        .context("running kubectl")?;
    std::process::exit(status.code().unwrap_or(1));
}

pub async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    Ok(kube::Client::try_from(config)?)
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
