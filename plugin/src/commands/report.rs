//! `upgrade report`: finds the run's record among the report ConfigMaps (in whatever namespace the
//! controller runs), and renders it.

use chrono::Utc;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Client};

use k8sm_api::report::{REPORT_DATA_KEY, REPORT_POLICY_LABEL, UpgradeReport};

use crate::cli::{ReportArgs, ReportFormat};
use crate::error::Error;
use crate::fetch;
use crate::output::{NODES, Terminal, print, render as print_as};
use crate::screens::report::{Style, render};

pub async fn run(client: &Client, args: &ReportArgs, terminal: Terminal) -> Result<(), Error> {
    let api: Api<ConfigMap> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().labels(REPORT_POLICY_LABEL))
        .await
        .map_err(|e| Error::kube("listing the upgrade reports (ConfigMaps)", e))?;
    let reports: Vec<UpgradeReport> = list
        .items
        .iter()
        .filter_map(|cm| cm.binary_data.as_ref()?.get(REPORT_DATA_KEY))
        .filter_map(|bytes| UpgradeReport::decode(&bytes.0).ok())
        .collect();
    let mut policies: Vec<String> = reports.iter().map(|r| r.policy.clone()).collect();
    policies.sort();
    policies.dedup();
    let none = || Error::NoReport {
        policy: args.policy.clone(),
        to: args.to.clone(),
    };
    if policies.is_empty() {
        return Err(none());
    }
    let policy = fetch::choose(&policies, args.policy.as_deref()).map_err(|e| match e {
        Error::PolicyNotFound { .. } => none(),
        other => other,
    })?;
    let report = reports
        .into_iter()
        .filter(|r| r.policy == policy)
        .filter(|r| {
            args.to
                .as_deref()
                .is_none_or(|to| r.target_executor_id == to)
        })
        .max_by_key(|r| r.started)
        .ok_or_else(none)?;
    let text = match &args.output {
        ReportFormat::Markdown => render(&report, Utc::now(), Style::Markdown),
        ReportFormat::Other(format) => print_as(&report, format, args.no_headers, NODES, |_| {
            render(&report, Utc::now(), Style::Terminal(terminal.palette))
        })?,
    };
    print(&text)
}
