//! Completion of `kubectl k8sm <TAB>`. kubectl (1.26 and later) runs `kubectl_complete-k8sm`
//! from `PATH` with the words after `kubectl k8sm` and the word under the cursor (maybe empty),
//! and reads Cobra's answer: one candidate a line (`value<TAB>help`), then `:DIRECTIVE`. The shim
//! shipped beside the plugin runs `kubectl-k8sm __complete WORDS…`; the answer comes from clap's
//! completion engine over the plugin's own command line, plus node, policy and namespace names read
//! from the cluster (with the words' `--kubeconfig`, `--context`… as the command would).

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::{Arg, ArgMatches, Command, CommandFactory, FromArgMatches};
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Api;
use kube::api::ListParams;

use k8sm_api::ExecutorUpgradePolicy;

use crate::cli::{Cli, ConnectArgs};
use crate::connect::{ConnectOptions, Connection};

/// The plugin's argument that makes it answer a completion request, as Cobra's programs do.
pub const COMPLETE: &str = "__complete";
/// The executable kubectl runs for completion: the shim, or a link to the plugin itself.
pub const COMPLETION_EXECUTABLE: &str = "kubectl_complete-k8sm";
/// Cobra's ShellCompDirectiveNoFileComp: candidates are all there is (paths come as candidates).
const NO_FILE_COMPLETION: u8 = 4;
/// Cobra's ShellCompDirectiveNoSpace: `-o jsonpath=` goes on with the template.
const NO_SPACE: u8 = 2;
/// A <TAB> must not hang on an unreachable cluster: names come within this, or not at all.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the cluster is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    Nodes,
    Policies,
    Namespaces,
}

/// The names of one kind, from the cluster (or a test).
pub type Lookup = Arc<dyn Fn(Names) -> Vec<String> + Send + Sync>;

/// The words to complete when this run is a completion request (`argv[0]` is the completion
/// executable, or `argv[1]` is `__complete`), else `None`.
pub fn is_completion(args: &[OsString]) -> Option<Vec<OsString>> {
    let program = args.first().map(Path::new).and_then(Path::file_name);
    if program == Some(OsStr::new(COMPLETION_EXECUTABLE)) {
        return Some(args[1..].to_vec());
    }
    (args.get(1).map(OsString::as_os_str) == Some(OsStr::new(COMPLETE))).then(|| args[2..].to_vec())
}

/// Cobra's answer for `words` (the last one is completed), with names from the cluster.
pub fn complete(words: Vec<OsString>) -> String {
    let options = ConnectOptions {
        request_timeout: Some(CLUSTER_TIMEOUT),
        ..ConnectOptions::from(&connect_args(&words))
    };
    complete_with(words, Arc::new(move |names| from_cluster(&options, names)))
}

/// The kubeconfig flags among the words, read as the command would read them; none on a mistake.
fn connect_args(words: &[OsString]) -> ConnectArgs {
    let matches: Option<ArgMatches> = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(std::iter::once(OsString::from("kubectl-k8sm")).chain(words.to_vec()))
        .ok();
    matches
        .and_then(|m| ConnectArgs::from_arg_matches(&m).ok())
        .unwrap_or_default()
}

/// Cobra's answer for `words`, with names from `lookup`.
pub fn complete_with(mut words: Vec<OsString>, lookup: Lookup) -> String {
    if words.is_empty() {
        words.push(OsString::new());
    }
    let mut command = with_names(Cli::command(), &lookup);
    let args: Vec<OsString> = std::iter::once(OsString::from("kubectl-k8sm"))
        .chain(words)
        .collect();
    let index = args.len() - 1;
    let here = std::env::current_dir().ok();
    let candidates = clap_complete::engine::complete(&mut command, args, index, here.as_deref())
        .unwrap_or_default();
    let mut out = String::new();
    for candidate in candidates.iter().filter(|c| !c.is_hide_set()) {
        out.push_str(&candidate.get_value().to_string_lossy());
        if let Some(help) = candidate.get_help() {
            let help = help.to_string();
            let first = help.lines().next().unwrap_or_default();
            if !first.is_empty() {
                out.push('\t');
                out.push_str(first);
            }
        }
        out.push('\n');
    }
    let open_ended = candidates
        .iter()
        .any(|c| c.get_value().to_string_lossy().ends_with('='));
    let directive = NO_FILE_COMPLETION | if open_ended { NO_SPACE } else { 0 };
    out.push_str(&format!(":{directive}\n"));
    out
}

/// `command` and its subcommands, their `NODE`, `--policy`, `-n` and `-o` values completed.
fn with_names(command: Command, lookup: &Lookup) -> Command {
    let lookup_args = lookup.clone();
    command
        .mut_args(move |arg| with_candidates(arg, &lookup_args))
        .mut_subcommands(|sub| with_names(sub, lookup))
}

fn with_candidates(arg: Arg, lookup: &Lookup) -> Arg {
    let names = |kind: Names| {
        let lookup = lookup.clone();
        ArgValueCandidates::new(move || {
            lookup(kind)
                .into_iter()
                .map(CompletionCandidate::new)
                .collect::<Vec<_>>()
        })
    };
    match arg.get_id().as_str() {
        "node" => arg.add(names(Names::Nodes)),
        "policy" => arg.add(names(Names::Policies)),
        "namespace" => arg.add(names(Names::Namespaces)),
        // The formats kubectl users type; jsonpath= and custom-columns= go on with their text.
        "output" if arg.get_possible_values().is_empty() => {
            arg.add(ArgValueCandidates::new(|| {
                [
                    "table",
                    "wide",
                    "json",
                    "yaml",
                    "name",
                    "jsonpath=",
                    "custom-columns=",
                ]
                .into_iter()
                .map(CompletionCandidate::new)
                .collect::<Vec<_>>()
            }))
        }
        _ => arg,
    }
}

/// The names of `kind` in the cluster; none when it cannot be reached in time.
fn from_cluster(options: &ConnectOptions, kind: Names) -> Vec<String> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    let names = runtime.block_on(async {
        let connection = Connection::open(options).await.ok()?;
        let client = connection.client.clone();
        match kind {
            Names::Nodes => names_of(Api::<Node>::all(client)).await,
            Names::Policies => names_of(Api::<ExecutorUpgradePolicy>::all(client)).await,
            Names::Namespaces => names_of(Api::<Namespace>::all(client)).await,
        }
    });
    names.unwrap_or_default()
}

/// The names of every object `api` lists, read from their metadata only.
async fn names_of<K>(api: Api<K>) -> Option<Vec<String>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list_metadata(&ListParams::default()).await.ok()?;
    Some(
        list.items
            .into_iter()
            .filter_map(|item| item.metadata.name)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(words: &[&str]) -> Vec<String> {
        let lookup: Lookup = Arc::new(|names| match names {
            Names::Nodes => vec!["node-0000".into(), "node-0001".into(), "gpu-1".into()],
            Names::Policies => vec!["fleet".into(), "gpu-pool".into()],
            Names::Namespaces => vec!["shop".into()],
        });
        let text = complete_with(words.iter().map(OsString::from).collect(), lookup);
        let directive = if text.contains("=\n") { ":6" } else { ":4" };
        assert!(text.ends_with(&format!("\n{directive}\n")), "{text}");
        text.lines()
            .filter(|l| !l.starts_with(':'))
            .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn completes_commands_and_flags() {
        let top = answer(&[""]);
        for command in ["upgrade", "blocked", "plan", "force", "pause", "resume"] {
            assert!(top.contains(&command.to_owned()), "{command} in {top:?}");
        }
        assert_eq!(answer(&["upgrade", "st"]), ["start", "status"]);
        assert!(answer(&["blocked", "--no-h"]).contains(&"--no-headers".to_owned()));
        assert!(answer(&["upgrade", "status", "--ex"]).contains(&"--exit-code".to_owned()));
    }

    #[test]
    fn completes_names_from_the_cluster() {
        assert_eq!(answer(&["force", "node-"]), ["node-0000", "node-0001"]);
        assert_eq!(answer(&["pause", "--policy", ""]), ["fleet", "gpu-pool"]);
        assert_eq!(answer(&["plan", "--policy=g"]), ["--policy=gpu-pool"]);
        assert_eq!(answer(&["blocked", "-n", "s"]), ["shop"]);
        assert_eq!(answer(&["blocked", "-o", "j"]), ["json", "jsonpath="]);
    }

    #[test]
    fn a_completion_request_is_recognised_by_name_or_argument() {
        let args = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            is_completion(&args(&[
                "/home/me/.krew/bin/kubectl_complete-k8sm",
                "force",
                ""
            ])),
            Some(args(&["force", ""]))
        );
        assert_eq!(
            is_completion(&args(&["kubectl-k8sm", "__complete", "plan"])),
            Some(args(&["plan"]))
        );
        assert_eq!(is_completion(&args(&["kubectl-k8sm", "plan"])), None);
    }

    #[test]
    fn the_kubeconfig_flags_of_the_words_are_used() {
        let connect = connect_args(&[
            "--context".into(),
            "prod".into(),
            "force".into(),
            "no".into(),
        ]);
        assert_eq!(connect.context.as_deref(), Some("prod"));
    }
}
