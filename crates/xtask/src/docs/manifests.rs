//! Commands that manifests run: an item of a `command` or `args` list that starts with one of
//! k8sm's programs (the agent's `sh -c` script, in a manifest or in chart values), and the args
//! of a container of k8sm's images that keeps the image's entrypoint. Go templates (the chart's
//! templates/) are not YAML and are not read; the chart's test renders them.

use serde::Deserialize;
use serde_yaml::Value;

use super::snippet::Snippet;

/// k8sm's programs, which are also its images' names and entrypoints.
const PROGRAMS: &[&str] = &["k8sm-agent", "k8sm-controller"];

/// The commands of the YAML documents of `text`, whose first line is `first_line`, as shell
/// blocks.
pub fn snippets(text: &str, first_line: usize) -> Result<Vec<Snippet>, String> {
    let mut scripts = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| format!("not YAML: {e}"))?;
        walk(&value, &mut scripts);
    }
    Ok(scripts
        .into_iter()
        .map(|(script, needle)| Snippet::Block {
            line: first_line + line_of(text, &needle),
            text: script,
            console: false,
        })
        .collect())
}

/// Collects (script, text to find its line by).
fn walk(value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Mapping(map) => {
            out.extend(entrypoint_args(map));
            for key in ["command", "args"] {
                let items = map.get(key).and_then(Value::as_sequence);
                out.extend(items.into_iter().flatten().filter_map(script));
            }
            map.values().for_each(|v| walk(v, out));
        }
        Value::Sequence(items) => items.iter().for_each(|v| walk(v, out)),
        Value::Tagged(tagged) => walk(&tagged.value, out),
        _ => {}
    }
}

/// An item of a `command` or `args` list that runs one of k8sm's programs (a `sh -c` script).
fn script(item: &Value) -> Option<(String, String)> {
    let text = item.as_str()?;
    let command = text.trim_start();
    let command = command.strip_prefix("exec ").unwrap_or(command);
    PROGRAMS
        .contains(&command.split_whitespace().next()?)
        .then(|| (text.to_owned(), text.trim().to_owned()))
}

/// A container of one of k8sm's images with args and no command: the image's program runs them.
fn entrypoint_args(map: &serde_yaml::Mapping) -> Option<(String, String)> {
    let image = map.get("image")?.as_str()?;
    let name = image.rsplit('/').next()?.split([':', '@']).next()?;
    let program = PROGRAMS.iter().find(|p| **p == name)?;
    if map.contains_key("command") {
        return None;
    }
    let args: Vec<&str> = map
        .get("args")?
        .as_sequence()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let first = (*args.first()?).to_owned();
    let quoted: Vec<String> = args.iter().map(|a| quote(a)).collect();
    Some((format!("{program} {}", quoted.join(" ")), first))
}

fn quote(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/@".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The 0-based line of `text` where `needle` starts (a folded scalar's first line is only the
/// start of its value), or 0.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|line| {
            let line = line.trim();
            let line = line.strip_prefix("- ").unwrap_or(line);
            (line.len() >= 8 || line == needle) && needle.starts_with(line)
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_and_entrypoint_args_with_their_lines() {
        let text = "\
kind: DaemonSet
spec:
  containers:
    - image: k8sm/k8sm-agent:0.1.0
      command: [sh, -c]
      args:
        - >-
          exec k8sm-agent run --node \"$NODE_NAME\"
          --kubelet
    - image: registry.example.com/k8sm/k8sm-controller:0.1.0
      args:
        - --leader-elect
        - --log-format=json
    - image: busybox
      args: [--x]
---
agent:
  args: [echo k8sm-agent]
message: k8sm-agent may not change it
";
        assert_eq!(
            snippets(text, 1).unwrap(),
            [
                Snippet::Block {
                    line: 8,
                    text: "exec k8sm-agent run --node \"$NODE_NAME\" --kubelet".into(),
                    console: false
                },
                Snippet::Block {
                    line: 12,
                    text: "k8sm-controller --leader-elect --log-format=json".into(),
                    console: false
                },
            ]
        );
        assert!(snippets("a: [b", 1).is_err());
    }
}
