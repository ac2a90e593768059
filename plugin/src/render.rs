//! Text building blocks shared by every view: kubectl-style tables (tabled), ages, short IDs and
//! colour.
//!
//! Everything here is pure: a view model goes in, a `String` comes out, so rendering is tested on
//! the text itself.

use chrono::{DateTime, Utc};
use k8sm_api::NodePhase;
use tabled::builder::Builder;
use tabled::settings::object::{Columns, Segment};
use tabled::settings::{Padding, Style};

/// Columns are separated like kubectl's: three spaces, no borders, headers in capitals.
const COLUMN_GAP: usize = 3;

/// Longest text from the cluster in a cell or line of the normal output, in bytes; `-o wide` shows
/// as much as the controller keeps ([`k8sm_api::MAX_MESSAGE`]).
pub const NARROW_TEXT: usize = 256;

/// Text from the cluster (names, messages, executor IDs: anything a node's or pod's author could
/// have written), ready for a terminal: control characters escaped, so it can neither move the
/// cursor nor recolour the screen, and an absurdly long value cut with a marker.
pub fn clean(text: &str, wide: bool) -> String {
    let max = if wide {
        k8sm_api::MAX_MESSAGE
    } else {
        NARROW_TEXT
    };
    k8sm_api::text::bounded(text, max).into_owned()
}

/// Renders a kubectl-style table: a header row, then one row per record; no trailing whitespace.
pub fn table<S: AsRef<str>>(headers: &[&str], rows: &[Vec<S>]) -> String {
    grid(Some(headers), rows)
}

/// A kubectl-style table whose header row may be left out (`--no-headers`): the columns are then
/// as wide as the rows alone need, as kubectl's.
pub fn grid<S: AsRef<str>>(headers: Option<&[&str]>, rows: &[Vec<S>]) -> String {
    if headers.is_none() && rows.is_empty() {
        return String::new();
    }
    let mut builder = Builder::new();
    if let Some(headers) = headers {
        builder.push_record(headers.iter().copied());
    }
    for row in rows {
        builder.push_record(row.iter().map(AsRef::as_ref));
    }
    let mut table = builder.build();
    table
        .with(Style::empty())
        .modify(Segment::all(), Padding::new(0, COLUMN_GAP, 0, 0))
        .modify(Columns::last(), Padding::new(0, 0, 0, 0));
    let mut out: String = table
        .to_string()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}

/// How long ago `since` was, the way kubectl prints ages: `45s`, `3m12s`, `2h5m`, `3d4h`, `400d`.
pub fn age(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    since.map_or_else(
        || "-".to_owned(),
        |since| duration((now - since).num_seconds()),
    )
}

/// A number of seconds as kubectl's human durations (negative, from clock skew, counts as zero).
pub fn duration(seconds: i64) -> String {
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if d < 8 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

/// An RFC 3339 time to the second, in UTC.
pub fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// "1 pod", "3 pods": a count with its noun.
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// A count with thousands separators, as people read large numbers: `6,900`.
pub fn thousands(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `sha256:` IDs shortened to their first 12 hex digits (like short Git hashes); other IDs as they
/// are.
pub fn short_id(id: &str) -> String {
    match id.strip_prefix(k8sm_api::EXECUTOR_ID_PREFIX) {
        // A char boundary: an ID from a node's annotation may be anything.
        Some(hex) if hex.len() > 12 && hex.is_char_boundary(12) => {
            format!("{}{}", k8sm_api::EXECUTOR_ID_PREFIX, &hex[..12])
        }
        _ => id.to_owned(),
    }
}

/// Colour for a terminal, or none at all: decided once from the environment, then passed to every
/// renderer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Palette {
    enabled: bool,
}

impl Palette {
    /// No colour, as on a pipe.
    #[cfg(test)]
    pub const PLAIN: Self = Self { enabled: false };
    /// ANSI colour, as on a terminal.
    #[cfg(test)]
    pub const COLOR: Self = Self { enabled: true };

    /// Colour only when `stdout` is a terminal and `NO_COLOR` is unset or empty (https://no-color.org).
    pub fn detect(stdout_is_terminal: bool, no_color: Option<&str>, term: Option<&str>) -> Self {
        let enabled =
            stdout_is_terminal && no_color.is_none_or(str::is_empty) && term != Some("dumb");
        Self { enabled }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.enabled && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// A phase name in the colour of its meaning: done green, moving yellow, stuck red.
    pub fn phase(self, phase: NodePhase) -> String {
        let name = phase.as_str();
        match phase {
            NodePhase::Compatible => self.green(name),
            NodePhase::Incompatible => name.to_owned(),
            NodePhase::Draining | NodePhase::Drained => self.yellow(name),
            NodePhase::KamikazeSent => self.paint("36", name),
            NodePhase::Blocked => self.red(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_look_like_kubectl() {
        let text = table(
            &["NODE", "PHASE", "PODS LEFT"],
            &[
                vec!["node-0001", "Draining", "3"],
                vec!["node-10", "Blocked", "12"],
            ],
        );
        assert_eq!(
            text,
            "NODE        PHASE      PODS LEFT\n\
             node-0001   Draining   3\n\
             node-10     Blocked    12\n"
        );
    }

    #[test]
    fn coloured_cells_keep_columns_aligned() {
        let c = Palette::COLOR;
        let text = table(
            &["PHASE", "NODE"],
            &[
                vec![c.phase(NodePhase::Blocked), "a".into()],
                vec![c.phase(NodePhase::KamikazeSent), "b".into()],
            ],
        );
        let plain: Vec<String> = text.lines().map(strip_ansi).collect();
        assert_eq!(plain[1], "Blocked        a");
        assert_eq!(plain[2], "KamikazeSent   b");
        assert!(text.contains("\x1b[31mBlocked\x1b[0m"));
    }

    fn strip_ansi(line: &str) -> String {
        let mut out = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn ages_like_kubectl() {
        let cases = [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (125, "2m5s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600 + 120, "3h2m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (2 * 86_400 + 3 * 3600, "2d3h"),
            (30 * 86_400, "30d"),
            (-5, "0s"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(duration(seconds), expected, "{seconds}s");
        }
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:10:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(age(Some(now - chrono::Duration::seconds(90)), now), "90s");
        assert_eq!(age(None, now), "-");
    }

    #[test]
    fn cluster_text_is_escaped_and_cut() {
        assert_eq!(clean("web-1", false), "web-1");
        assert_eq!(clean("a\x1b[2Jb\n", false), "a\\u{1b}[2Jb\\n");
        let long = "x".repeat(5000);
        assert!(clean(&long, false).len() <= NARROW_TEXT);
        assert!(clean(&long, true).len() <= k8sm_api::MAX_MESSAGE);
        assert!(clean(&long, true).len() > NARROW_TEXT);
    }

    #[test]
    fn thousands_are_separated() {
        for (n, text) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (6900, "6,900"),
            (1_234_567, "1,234,567"),
        ] {
            assert_eq!(thousands(n), text);
        }
    }

    #[test]
    fn short_ids() {
        let id = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(short_id(&id), "sha256:abababababab");
        assert_eq!(short_id("v1.36-custom"), "v1.36-custom");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert_eq!(Palette::detect(true, None, None), Palette::COLOR);
        assert_eq!(Palette::detect(true, Some(""), None), Palette::COLOR);
        assert_eq!(Palette::detect(true, Some("1"), None), Palette::PLAIN);
        assert_eq!(Palette::detect(false, None, None), Palette::PLAIN);
        assert_eq!(Palette::detect(true, None, Some("dumb")), Palette::PLAIN);
        assert_eq!(Palette::PLAIN.red("x"), "x");
        assert_eq!(Palette::COLOR.red("x"), "\x1b[31mx\x1b[0m");
    }
}
