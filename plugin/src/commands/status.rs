//! `upgrade status`: the chosen policy's status, once or (`--watch`) on every change.

use chrono::Utc;
use kube::{Client, ResourceExt};

use crate::cli::StatusArgs;
use crate::error::Error;
use crate::fetch;
use crate::output::{Terminal, print, render};
use crate::views::status::StatusView;

pub async fn run(client: &Client, args: &StatusArgs, terminal: Terminal) -> Result<(), Error> {
    let policy = fetch::policy(client, args.policy.policy.as_deref()).await?;
    if args.watch {
        return super::watch::run(client, &policy.name_any(), args.output, terminal).await;
    }
    let view = StatusView::from_policy(&policy);
    print(&render(&view, args.output, |wide| {
        view.render(wide, Utc::now(), terminal.palette)
    })?)
}
