//! A span's synopsis notation, as the docs use it: `[--flag VALUE]` is optional (checked as
//! given), `a|b|c` stands for each alternative, and a word `…` or `...` leaves the rest out (what
//! comes before it is checked as a reference).

/// The commands a span's words stand for.
pub fn expand(words: &[String]) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    for word in words {
        if word == "…" || word == "..." {
            break;
        }
        let word = word.trim_start_matches('[').trim_end_matches(']');
        if word.is_empty() {
            continue;
        }
        let alternatives: Vec<&str> = word.split('|').filter(|a| !a.is_empty()).collect();
        commands = commands
            .into_iter()
            .flat_map(|command| {
                alternatives.iter().map(move |alternative| {
                    let mut command = command.clone();
                    command.push((*alternative).to_owned());
                    command
                })
            })
            .collect();
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(text: &str) -> Vec<String> {
        let words: Vec<String> = text.split(' ').map(str::to_owned).collect();
        expand(&words).iter().map(|c| c.join(" ")).collect()
    }

    #[test]
    fn alternatives_options_and_ellipses() {
        assert_eq!(
            expanded("kubectl k8sm pause|resume --policy NAME"),
            [
                "kubectl k8sm pause --policy NAME",
                "kubectl k8sm resume --policy NAME"
            ]
        );
        assert_eq!(
            expanded("cargo xtask fuzz --seconds 60 [--target NAME]"),
            ["cargo xtask fuzz --seconds 60 --target NAME"]
        );
        assert_eq!(
            expanded("kubectl k8sm executor-id --kubelet-binary …"),
            ["kubectl k8sm executor-id --kubelet-binary"]
        );
        assert_eq!(expanded("a b|c d|e").len(), 4);
    }
}
