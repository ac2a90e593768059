//! `DurationString`: a duration written the way operators write them in YAML (`"90s"`, `"10m"`, `"1h30m"`).
//!
//! The apiserver checks the text against [`DURATION_PATTERN`]; Rust checks the same grammar and then parses the value
//! with `humantime`, so every string the apiserver accepts parses here (a property test holds the two together).

use std::{borrow::Cow, fmt, str::FromStr, time::Duration};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The grammar of a duration string, as an RE2 pattern for the CRD schema: one or more `<digits><unit>` parts, unit
/// `ms`, `s`, `m` or `h`. A subset of both Go's `time.ParseDuration` and `humantime`, so the two never disagree.
pub const DURATION_PATTERN: &str = "^([0-9]{1,9}(ms|s|m|h))+$";

/// Longest accepted duration string. Bounded so that the apiserver can estimate the cost of CEL rules.
pub const DURATION_MAX_LENGTH: usize = 32;

/// A duration string such as `"90s"`, `"10m"` or `"1h30m"`, kept as written (so it round-trips unchanged) together
/// with its parsed value.
#[derive(Clone, Debug)]
pub struct DurationString {
    text: String,
    duration: Duration,
}

/// Why a string is not a [`DurationString`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: {reason}; write a duration such as \"90s\", \"10m\" or \"1h30m\""
)]
pub struct InvalidDuration {
    /// The rejected text.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl DurationString {
    /// The parsed duration.
    pub fn as_duration(&self) -> Duration {
        self.duration
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Parses a literal known to be valid, such as a default. Panics otherwise, so use it only on literals that a
    /// test parses.
    pub(crate) fn from_literal(text: &'static str) -> Self {
        text.parse()
            .unwrap_or_else(|e| panic!("duration literal {text:?} must be valid: {e}"))
    }
}

/// Checks `text` against [`DURATION_PATTERN`] without a regex engine.
fn check_grammar(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("it is empty".into());
    }
    if text.len() > DURATION_MAX_LENGTH {
        return Err(format!(
            "it is longer than {DURATION_MAX_LENGTH} characters"
        ));
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!("expected a number at position {i}"));
        }
        if digits > 9 {
            return Err(format!("the number at position {i} has more than 9 digits"));
        }
        i += digits;
        let unit = bytes[i..]
            .iter()
            .take_while(|b| b.is_ascii_alphabetic())
            .count();
        match &text[i..i + unit] {
            "ms" | "s" | "m" | "h" => i += unit,
            "" => {
                return Err(format!(
                    "the number ending at position {i} has no unit (ms, s, m or h)"
                ));
            }
            other => return Err(format!("unknown unit {other:?} (use ms, s, m or h)")),
        }
    }
    Ok(())
}

impl FromStr for DurationString {
    type Err = InvalidDuration;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: String| InvalidDuration {
            input: text.to_owned(),
            reason,
        };
        check_grammar(text).map_err(invalid)?;
        let duration = humantime::parse_duration(text).map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            text: text.to_owned(),
            duration,
        })
    }
}

impl fmt::Display for DurationString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

// Equality is on the text: "60s" and "1m" are different specs even though they mean the same time, and a spec that
// an operator rewrites should count as changed.
impl PartialEq for DurationString {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for DurationString {}

impl Serialize for DurationString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for DurationString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for DurationString {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "DurationString".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
            "maxLength": DURATION_MAX_LENGTH,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_table() {
        let ok = [
            ("90s", 90),
            ("10m", 600),
            ("1h30m", 5400),
            ("1h", 3600),
            ("0s", 0),
            ("2h0m5s", 7205),
            ("100m", 6000),
        ];
        for (text, secs) in ok {
            let d: DurationString = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(d.as_duration(), Duration::from_secs(secs), "{text}");
            assert_eq!(d.to_string(), text);
        }
        let d: DurationString = "1500ms".parse().unwrap();
        assert_eq!(d.as_duration(), Duration::from_millis(1500));

        for bad in [
            "",
            "soon",
            "ten minutes",
            "10",
            "m",
            "-5m",
            "1.5h",
            "1h 30m",
            " 10m",
            "10m ",
            "10min",
            "1d",
            "10M",
            "1234567890s",
        ] {
            let err = bad.parse::<DurationString>().expect_err(bad);
            assert_eq!(err.input, bad);
            assert!(
                err.to_string().contains("\"1h30m\""),
                "message tells how to fix it: {err}"
            );
        }
    }

    #[test]
    fn serde_round_trip_keeps_the_text() {
        let d: DurationString = serde_json::from_str("\"1h30m\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"1h30m\"");
        let err = serde_json::from_str::<DurationString>("\"soon\"").unwrap_err();
        assert!(err.to_string().contains("soon"), "{err}");
        assert!(serde_json::from_str::<DurationString>("600").is_err());
    }

    #[test]
    fn equality_is_textual() {
        let a: DurationString = "60s".parse().unwrap();
        let b: DurationString = "1m".parse().unwrap();
        assert_eq!(a.as_duration(), b.as_duration());
        assert_ne!(a, b);
    }

    proptest! {
        /// Every string of the schema's grammar parses, to the sum of its parts.
        #[test]
        fn every_string_the_apiserver_accepts_parses(
            parts in prop::collection::vec((0u64..1_000_000_000, prop::sample::select(vec!["ms", "s", "m", "h"])), 1..4)
        ) {
            let text: String = parts.iter().map(|(n, u)| format!("{n}{u}")).collect();
            let expected: Duration = parts.iter().map(|&(n, u)| match u {
                "ms" => Duration::from_millis(n),
                "s" => Duration::from_secs(n),
                "m" => Duration::from_secs(n * 60),
                _ => Duration::from_secs(n * 3600),
            }).sum();
            prop_assume!(text.len() <= DURATION_MAX_LENGTH);
            let d: DurationString = text.parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(d.as_duration(), expected);
        }

        /// Arbitrary text never panics, and whatever the grammar rejects, `FromStr` rejects.
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,40}") {
            let parsed = text.parse::<DurationString>();
            if check_grammar(&text).is_err() {
                prop_assert!(parsed.is_err());
            }
        }
    }
}
