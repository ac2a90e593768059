//! `k8sm-agent simulate`: plays the executors of KWOK nodes. It publishes their IDs, obeys kamikaze
//! by annotation and HTTP with a "restart" that reports the new ID, and brings back nodes that the
//! `DeleteNode` kamikaze deleted.

mod simulator;
pub(crate) mod state;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::cli::SimulateArgs;
use crate::gate::TokenGate;
use crate::shutdown::Shutdown;
use crate::{Error, client, http};
use simulator::Simulator;
pub use state::Comeback;
use state::Simulation;

/// Runs until `shutdown`.
pub async fn run(args: SimulateArgs, mut shutdown: Shutdown) -> Result<(), Error> {
    let client = client::client(args.kubeconfig.as_deref()).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    // An empty selector selects every node.
    let selector = args.selector.clone().unwrap_or_default();
    // Fail fast on a bad selector or missing permission instead of a watch that retries forever.
    nodes
        .list_metadata(&ListParams::default().labels(&selector).limit(1))
        .await
        .map_err(|source| Error::ListNodes {
            selector: selector.clone(),
            source,
        })?;

    let simulation = Simulation::new(
        args.new_executor_id.clone(),
        args.initial_executor_id.clone(),
    )
    .never_restarting(args.never_restart.iter().cloned())
    .coming_back_as(args.come_back_as.iter().cloned());
    let simulator = Simulator::new(
        nodes.clone(),
        simulation,
        &args.new_executor_id,
        args.restart_delay.into(),
    );
    let server = match args.http_addr {
        Some(addr) => {
            let gate = TokenGate::new(client, args.kamikaze_auth.expected());
            let obeyed = args.kamikaze_auth.obeyed_tokens()?;
            let router = http::router(simulator.clone(), gate, obeyed);
            let tls = args.kamikaze_auth.tls()?;
            Some(http::serve(addr, router, shutdown.clone(), tls).await?)
        }
        None => None,
    };
    tracing::info!(
        selector = if selector.is_empty() { "<all nodes>" } else { &selector },
        new_executor_id = %args.new_executor_id,
        initial_executor_id = args.initial_executor_id.as_deref().unwrap_or("<none>"),
        restart_delay = %args.restart_delay,
        never_restart = ?args.never_restart,
        come_back_as = ?args.come_back_as,
        "simulating the executors of the selected nodes"
    );

    // Server-side filtered: only the selected nodes ever reach this process.
    let events = watcher(nodes, watcher::Config::default().labels(&selector)).default_backoff();
    let mut events = std::pin::pin!(events);
    loop {
        let event = tokio::select! {
            () = shutdown.wait() => break,
            event = events.next() => event,
        };
        match event {
            Some(Ok(event)) => {
                let commands = simulator.state().on_event(&event);
                simulator.spawn(commands);
            }
            // The watcher re-lists and re-watches by itself, with backoff.
            Some(Err(error)) => tracing::warn!(%error, "watching nodes"),
            None => break,
        }
    }

    let pending = simulator.state().pending();
    if pending > 0 {
        tracing::info!(
            pending,
            "stopping with restarts still pending; the controller will report them overdue"
        );
    }
    if let Some(server) = server {
        let _ = server.await;
    }
    Ok(())
}
