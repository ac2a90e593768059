//! Writing results: human text as rendered, or the view model as JSON or YAML for scripts. A closed
//! pipe (`| head`) ends the output quietly instead of panicking.

use std::io::{ErrorKind, IsTerminal, Write};

use serde::Serialize;

use crate::cli::Output;
use crate::error::Error;
use crate::render::Palette;

/// What the plugin knows about where it runs.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    pub palette: Palette,
    pub stdout_is_terminal: bool,
    pub stdin_is_terminal: bool,
}

impl Terminal {
    pub fn detect() -> Self {
        let stdout_is_terminal = std::io::stdout().is_terminal();
        Self {
            palette: Palette::detect(
                stdout_is_terminal,
                std::env::var("NO_COLOR").ok().as_deref(),
                std::env::var("TERM").ok().as_deref(),
            ),
            stdout_is_terminal,
            stdin_is_terminal: std::io::stdin().is_terminal(),
        }
    }
}

/// Writes `text` to standard output.
pub fn print(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        result => Ok(result?),
    }
}

/// The view model as JSON or YAML; `None` for the human formats.
pub fn encode<T: Serialize>(value: &T, format: Output) -> Result<Option<String>, Error> {
    match format {
        Output::Table | Output::Wide => Ok(None),
        Output::Json => serde_json::to_string_pretty(value)
            .map(|mut s| {
                s.push('\n');
                Some(s)
            })
            .map_err(|e| Error::Encode(e.to_string())),
        Output::Yaml => serde_yaml::to_string(value)
            .map(Some)
            .map_err(|e| Error::Encode(e.to_string())),
    }
}

/// Renders `value` in `format`: `human(wide)` for tables.
pub fn render<T: Serialize>(
    value: &T,
    format: Output,
    human: impl FnOnce(bool) -> String,
) -> Result<String, Error> {
    Ok(match encode(value, format)? {
        Some(data) => data,
        None => human(format == Output::Wide),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        pods_left: u32,
    }

    #[test]
    fn formats() {
        let sample = Sample { pods_left: 3 };
        let human = |wide: bool| if wide { "wide\n" } else { "table\n" }.to_owned();
        assert_eq!(render(&sample, Output::Table, human).unwrap(), "table\n");
        assert_eq!(render(&sample, Output::Wide, human).unwrap(), "wide\n");
        assert_eq!(
            render(&sample, Output::Json, human).unwrap(),
            "{\n  \"podsLeft\": 3\n}\n"
        );
        assert_eq!(
            render(&sample, Output::Yaml, human).unwrap(),
            "podsLeft: 3\n"
        );
    }
}
