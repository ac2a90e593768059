//! Comments wrap at the code's width: a comment line wider than [`WIDTH`] columns is reported,
//! unless it cannot be broken (one long word, such as a URL).

use std::path::Path;

/// cargo fmt's `max_width`, which the code is formatted at.
pub const WIDTH: usize = 100;

/// The comment lines of `text` wider than [`WIDTH`] that could be broken, as `path:line`.
pub fn too_wide(path: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let trimmed = line.trim_start();
            trimmed.starts_with("//") && line.chars().count() > WIDTH && breakable(line)
        })
        .map(|(i, line)| format!("{path}:{}: {} columns", i + 1, line.chars().count()))
        .collect()
}

/// Whether some space within the first [`WIDTH`] columns, after the comment's marker and its first
/// word, could take a line break.
fn breakable(line: &str) -> bool {
    let indent = line.len() - line.trim_start().len();
    let body = line[indent..].trim_start_matches(['/', '!']).trim_start();
    let start = line.len() - body.len();
    let first_word = body.find(' ').map_or(body.len(), |i| i);
    let head: String = line.chars().take(WIDTH).collect();
    head.char_indices()
        .any(|(i, c)| c == ' ' && i > start + first_word)
        && !line.contains("://")
}

/// The Rust sources under `root` that git tracks.
pub fn sources(root: &Path) -> anyhow::Result<Vec<String>> {
    let output = std::process::Command::new("git")
        .args(["ls-files", "*.rs"])
        .current_dir(root)
        .output()?;
    anyhow::ensure!(output.status.success(), "git ls-files failed");
    Ok(String::from_utf8(output.stdout)?
        .lines()
        .map(str::to_owned)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_comment_is_reported_and_code_and_unbreakable_lines_are_not() {
        let wide = format!("    /// {}", "word ".repeat(20));
        let code = format!("    let x = \"{}\";", "a".repeat(120));
        let url = format!("    // See https://example.com/{}", "a".repeat(100));
        let one_word = format!("    // {}", "a".repeat(120));
        let text = [wide.as_str(), &code, &url, &one_word, "// short"].join("\n");
        assert_eq!(too_wide("f.rs", &text), ["f.rs:1: 108 columns"]);
    }
}
