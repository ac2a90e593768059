//! The process: clients, the start-up permission check, the HTTP endpoints, the caches, leadership,
//! then the loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use tokio::sync::watch;

use crate::Args;
use crate::act::call_limit::CallLimit;
use crate::act::kamikaze_token::ServiceAccountRef;
use crate::leadership::fence::FenceLayer;
use crate::leadership::leader::{self, Leadership, LeaseConfig};
use crate::memory::reaction::Reaction;
use crate::observe::deliveries::Deliveries;
use crate::observe::stores::Stores;
use crate::report::metrics::Metrics;
use crate::startup::server::{self, Health};

use crate::reconcile::{Controller, Started};

/// How long connecting to the apiserver may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call's request may wait on the connection (a read or a write) before it fails.
const CALL_IO_TIMEOUT: Duration = Duration::from_secs(15);

pub async fn run(args: Args) -> anyhow::Result<()> {
    // kube and the kamikaze HTTP client share rustls; pick its crypto provider once for the
    // process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let lease = args
        .leader_elect
        .then(|| {
            LeaseConfig::new(
                args.leader_elect_namespace.clone(),
                args.leader_elect_lease.clone(),
                identity.clone(),
                args.leader_elect_lease_duration,
                args.leader_elect_renew_deadline,
            )
        })
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mut config = config(&args).await?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    // The watches' client keeps kube's read timeout (295 s), sets each watch's server-side timeout,
    // and records what each watch delivers (`stores::WATCH_SILENCE`); every other call goes
    // through `calls`, bounded much tighter.
    let deliveries = Deliveries::default();
    let client = kube::client::ClientBuilder::try_from(config.clone())?
        .with_layer(&tower::util::MapRequestLayer::new(
            crate::observe::stores::with_watch_timeout,
        ))
        .with_layer(&deliveries.layer())
        .build();
    let calls = calls_client(config.clone(), None)?;
    let lease_name = args.leader_elect.then_some((
        args.leader_elect_namespace.as_str(),
        args.leader_elect_lease.as_str(),
    ));
    let kamikaze_account =
        ServiceAccountRef::or_in_cluster_default(args.kamikaze_service_account.clone());
    let report_namespace = args
        .report_namespace
        .clone()
        .unwrap_or_else(|| args.leader_elect_namespace.clone());
    crate::startup::permissions::check(
        &calls,
        lease_name,
        &report_namespace,
        kamikaze_account.as_ref(),
    )
    .await?;
    let metrics = Arc::new(Metrics::new());
    // Reported from the start, not from the first answer: a scrape before any call reads the limit
    // in force.
    metrics.set_call_limit(CallLimit::default().current());
    let ready = Arc::new(AtomicBool::new(false));
    let addr = server::serve(
        args.metrics_addr,
        Health {
            metrics: metrics.clone(),
            ready: ready.clone(),
        },
    )
    .await?;
    tracing::info!(%addr, %identity, "serving /metrics, /healthz and /readyz");

    let reaction = Reaction::default();
    let (stores, mut changes) = Stores::start(&client, deliveries, reaction.clone());
    {
        let synced = stores.wait_until_ready();
        tokio::pin!(synced);
        loop {
            tokio::select! {
                _ = &mut synced => break,
                next = changes.next() => if next.is_none() { anyhow::bail!("the watches ended before syncing") },
            }
        }
    }
    ready.store(true, Ordering::Relaxed);
    tracing::info!("caches synced");

    let leadership = match lease {
        Some(lease) => leader::start(calls.clone(), lease),
        None => Leadership::always(),
    };
    // Every write but the Lease's own goes through the fence.
    let writes = calls_client(config, Some(FenceLayer::new(leadership.clone())))?;
    let mut controller = Controller::new(
        &args,
        Started {
            writes,
            calls,
            identity,
            kamikaze_account,
            report_namespace,
            reaction,
            metrics,
            stores,
            leadership,
            stopping: on_stop_signal()?,
        },
    );
    controller.run(&mut changes, args.resync).await
}

/// Becomes true on SIGTERM or Ctrl-C: the loop then stops acting (a pass stops before its next
/// batch of actions), and the Lease is released.
fn on_stop_signal() -> anyhow::Result<watch::Receiver<bool>> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (sender, receiver) = watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: stopping"),
        }
        sender.send_replace(true);
        // Keep the sender (and so the stop) until the process exits.
        std::future::pending::<()>().await;
    });
    Ok(receiver)
}

async fn config(args: &Args) -> anyhow::Result<kube::Config> {
    let config = match &args.kubeconfig {
        Some(path) => {
            kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(path)?,
                &kube::config::KubeConfigOptions::default(),
            )
            .await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(config)
}

/// The client of every call but the watches: the planner's actions, status and Event writes, the
/// start-up checks. Each request is bounded (reads and writes of the connection; the actions have
/// their own overall timeout too), so a hung apiserver or proxy shows as a failed call instead of a
/// pass that never ends.
///
/// It has none of kube's hidden retries. By default kube retries 429 and 503 answers itself,
/// honouring Retry-After; an eviction that a PodDisruptionBudget refuses answers 429 with
/// Retry-After 10 s, so the pass would sit in that retry until the action's timeout (15 s), holding
/// up every other node, and the refusal would never be reported as BlockedByPDB. The loop retries a
/// failed or refused action itself, with a per-object backoff ([`crate::memory::backoff`]), on
/// fresh data.
///
/// `fence`: the writes' client, whose writes are fenced by leadership
/// ([`crate::leadership::fence`]).
fn calls_client(mut config: kube::Config, fence: Option<FenceLayer>) -> anyhow::Result<Client> {
    config.default_retry = false;
    config.read_timeout = Some(CALL_IO_TIMEOUT);
    config.write_timeout = Some(CALL_IO_TIMEOUT);
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match fence {
        Some(fence) => builder.with_layer(&fence).build(),
        None => builder.build(),
    })
}

fn default_identity() -> String {
    let host =
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "k8sm".into());
    format!("{}-{}", host.trim(), std::process::id())
}
