//! Named scenarios (`--scenario NAME`): argument sets that fill the defaults of the invocation,
//! placed before the user's own arguments so that any argument given explicitly wins (the command
//! lets a later occurrence override an earlier one).

/// The bench's scenarios (bench/results/README.md), by name, with the arguments they stand for.
pub const PRESETS: &[(&str, &str, &[&str])] = &[
    (
        "owners-pace",
        "20 nodes of 30 pods, 4 at a time, pods Ready 2–20 s after scheduling: owners' budgets set the pace",
        &[
            "--name=owners-pace",
            "--nodes=20",
            "--max-concurrent-nodes=20%",
            "--shape=realistic",
            "--pod-ready-delay=2s",
            "--ready-delay-max=20s",
        ],
    ),
    (
        "restarts-pace",
        "30 light nodes of 3 pods, 2 at a time, pods Ready 1–3 s after scheduling: node restarts set the pace",
        &[
            "--name=restarts-pace",
            "--nodes=30",
            "--pods=90",
            "--max-concurrent-nodes=2",
            "--shape=realistic",
            "--pod-ready-delay=1s",
            "--ready-delay-max=3s",
        ],
    ),
    (
        "messy-fleet",
        "200 nodes of 30 pods, 20 at a time, with what real clusters have: crash-looping owners, dead nodes, a stuck \
         rollout, pods stuck terminating, bare and pinned pods; k8sm against parallel drain, both with budgets",
        &[
            "--name=messy-fleet",
            "--nodes=200",
            "--max-concurrent-nodes=10%",
            "--shape=realistic",
            "--pod-ready-delay=2s",
            "--ready-delay-max=20s",
            "--messy",
            "--tools=k8sm,drain-pdb-parallel",
            "--runs=1",
            "--upgrade-timeout=40m",
            "--drain-timeout=5m",
        ],
    ),
];

/// `args` (the program name first) with the arguments of the `--scenario NAME` (or
/// `--scenario=NAME`) it names inserted right after the program name. An unknown name is left for
/// the parser, which reports it.
pub fn expand(args: Vec<String>) -> Vec<String> {
    let name = args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--scenario=")
            .map(str::to_owned)
            .or_else(|| {
                (a == "--scenario")
                    .then(|| args.get(i + 1).cloned())
                    .flatten()
            })
    });
    let Some((_, _, preset)) = name.and_then(|n| PRESETS.iter().find(|p| p.0 == n)) else {
        return args;
    };
    let mut out = Vec::with_capacity(args.len() + preset.len());
    let mut rest = args.into_iter();
    out.extend(rest.next());
    out.extend(preset.iter().map(|a| (*a).to_owned()));
    out.extend(rest);
    out
}

/// `--scenario` must name a preset.
pub fn parse_name(name: &str) -> Result<String, String> {
    PRESETS
        .iter()
        .find(|p| p.0 == name)
        .map(|p| p.0.to_owned())
        .ok_or_else(|| {
            let names: Vec<String> = PRESETS
                .iter()
                .map(|p| format!("{} ({})", p.0, p.1))
                .collect();
            format!("unknown scenario {name:?}; known: {}", names.join("; "))
        })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Args;
    use crate::workload::{Realism, Workload};

    fn args(line: &[&str]) -> Args {
        let argv = std::iter::once("k8sm-bench")
            .chain(line.iter().copied())
            .map(str::to_owned)
            .collect();
        Args::try_parse_from(expand(argv)).unwrap()
    }

    #[test]
    fn a_scenario_fills_defaults_and_explicit_arguments_win() {
        let owners = args(&["--scenario", "owners-pace"]);
        assert_eq!(owners.nodes, 20);
        assert_eq!(owners.name.as_deref(), Some("owners-pace"));
        assert_eq!(owners.max_concurrent_nodes.resolve(20), 4);
        let smaller = args(&["--scenario=owners-pace", "--nodes", "10", "--tools", "k8sm"]);
        assert_eq!(smaller.nodes, 10);
        assert_eq!(smaller.tools, ["k8sm"]);
        let plain = args(&["--nodes", "7"]);
        assert_eq!((plain.nodes, plain.name), (7, None));
        assert!(Args::try_parse_from(["k8sm-bench", "--scenario", "nope"]).is_err());
    }

    /// The presets are the two kinds of scenario: where the bound's largest term is the owners'
    /// waves, and where it is the nodes' restarts (whatever the seed draws: the draws stay
    /// within the presets' ranges).
    #[test]
    fn each_preset_is_limited_by_what_its_name_says() {
        for (name, limit) in [
            ("owners-pace", "owner waves"),
            ("restarts-pace", "node waves"),
        ] {
            let a = args(&["--scenario", name]);
            for seed in 1..20 {
                let realism = Realism {
                    seed,
                    ..a.realism()
                };
                let pods = a.pods.unwrap_or(a.nodes * 30);
                let workload = Workload::generate(a.nodes, pods, a.shape, &realism);
                let input = workload.bound_input(
                    a.nodes,
                    a.max_concurrent_nodes.resolve(a.nodes),
                    a.threshold,
                    a.pod_ready_delay.into(),
                    a.restart_delay.into(),
                    None,
                );
                let bound = crate::stats::concurrency_bound(&input);
                assert_eq!(bound.terms.unwrap().limit, limit, "{name}, seed {seed}");
            }
        }
    }
}
