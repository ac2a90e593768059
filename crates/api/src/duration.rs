//! `DurationString`: a duration written the way operators write them in YAML (`"90s"`, `"10m"`,
//! `"1h30m"`).
//!
//! The apiserver checks the text against [`DURATION_PATTERN`]; Rust checks the same grammar and
//! then parses the value with `humantime`, so every string the apiserver accepts parses here (a
//! property test holds the two together).

use std::{borrow::Cow, fmt, str::FromStr, time::Duration};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The grammar of a duration string, as an RE2 pattern for the CRD schema: one or more
/// `<digits><unit>` parts, unit `ms`, `s`, `m` or `h`. A subset of both Go's `time.ParseDuration`
/// and `humantime`, so the two never disagree.
pub const DURATION_PATTERN: &str = "^([0-9]{1,9}(ms|s|m|h))+$";

/// Longest accepted duration string. Bounded so that the apiserver can estimate the cost of CEL
/// rules.
pub const DURATION_MAX_LENGTH: usize = 32;

/// The longest duration accepted, as written in the schema's rule: longer ones (up to 9 digits per
/// part, 3 billion hours) overflowed the arithmetic on times.
pub const DURATION_MAX: &str = "8760h";

/// The same, in seconds (365 days).
const DURATION_MAX_SECONDS: u64 = 8760 * 3600;

/// The schema's rule for [`DURATION_MAX`]. A string off the grammar passes it: the pattern reports
/// that alone. Go's `time.ParseDuration`, which CEL's `duration()` uses, fails past about 2.5
/// million hours: the second term turns away the parts too large for the maximum anyway (5-digit
/// hours, 7-digit minutes, 9-digit seconds) before `duration()` reads them, so the operator reads
/// the message, not a parse error. What is left sums to at most about 10^18 ns, within Go's range.
pub const DURATION_MAX_RULE: &str = "!self.matches('^([0-9]{1,9}(ms|s|m|h))+$') \
     || (!self.matches('[0-9]{5,}h|[0-9]{7,}m([0-9]|$)|[0-9]{9,}s') && duration(self) <= duration('8760h'))";

/// A duration string such as `"90s"`, `"10m"` or `"1h30m"`, kept as written (so it round-trips
/// unchanged) together with its parsed value.
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

    /// The grammar and its value, however long.
    fn parse_unbounded(text: &str) -> Result<Self, InvalidDuration> {
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

    /// Whether `text` is of the schema's grammar ([`DURATION_PATTERN`], [`DURATION_MAX_LENGTH`]),
    /// whatever its length of time.
    pub fn is_grammatical(text: &str) -> bool {
        check_grammar(text).is_ok()
    }

    /// Parses a literal known to be valid, such as a default. Panics otherwise, so use it only on
    /// literals that a test parses.
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
        let parsed = Self::parse_unbounded(text)?;
        if parsed.duration > Duration::from_secs(DURATION_MAX_SECONDS) {
            return Err(InvalidDuration {
                input: text.to_owned(),
                reason: format!(
                    "it is longer than {DURATION_MAX} (365 days), the longest accepted"
                ),
            });
        }
        Ok(parsed)
    }
}

impl fmt::Display for DurationString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

// Equality is on the text: "60s" and "1m" are different specs even though they mean the same time,
// and a spec that an operator rewrites should count as changed.
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
        // A policy stored before the schema had its maximum is read at the maximum, not refused:
        // refusing it would stop the whole watch of policies.
        let mut parsed = Self::parse_unbounded(&text).map_err(serde::de::Error::custom)?;
        parsed.duration = parsed
            .duration
            .min(Duration::from_secs(DURATION_MAX_SECONDS));
        Ok(parsed)
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
            "x-kubernetes-validations": [{
                "rule": DURATION_MAX_RULE,
                "message": format!("must be at most {DURATION_MAX} (365 days)"),
            }],
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
            ("8760h", 8760 * 3600),
            ("525600m", 8760 * 3600),
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
            "8761h",
            "999999999h999999999h999999999h",
            "525601m",
            "8760h1ms",
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
    fn the_maximum_s_rule_leaves_the_grammar_to_the_pattern() {
        assert!(DURATION_MAX_RULE.starts_with(&format!("!self.matches('{DURATION_PATTERN}')")));
        assert!(DURATION_MAX_RULE.ends_with(&format!("<= duration('{DURATION_MAX}'))")));
    }

    #[test]
    fn serde_round_trip_keeps_the_text() {
        let d: DurationString = serde_json::from_str("\"1h30m\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"1h30m\"");
        let err = serde_json::from_str::<DurationString>("\"soon\"").unwrap_err();
        assert!(err.to_string().contains("soon"), "{err}");
        assert!(serde_json::from_str::<DurationString>("600").is_err());
    }

    /// Stored before the schema's maximum: read at the maximum, the text kept, where parsing it
    /// refuses it.
    #[test]
    fn a_stored_duration_past_the_maximum_reads_as_the_maximum() {
        let text = "\"999999999h999999999h999999999h\"";
        let d: DurationString = serde_json::from_str(text).unwrap();
        assert_eq!(d.as_duration(), Duration::from_secs(DURATION_MAX_SECONDS));
        assert_eq!(serde_json::to_string(&d).unwrap(), text);
        assert!(
            "999999999h999999999h999999999h"
                .parse::<DurationString>()
                .is_err()
        );
    }

    #[test]
    fn equality_is_textual() {
        let a: DurationString = "60s".parse().unwrap();
        let b: DurationString = "1m".parse().unwrap();
        assert_eq!(a.as_duration(), b.as_duration());
        assert_ne!(a, b);
    }

    proptest! {
        /// Every string of the schema's grammar parses, to the sum of its parts, up to the maximum;
        /// past it, none
        /// does. Parts up to 9 digits each, as the grammar allows.
        #[test]
        fn every_string_the_apiserver_accepts_parses(
            parts in prop::collection::vec(
                (0u64..1_000_000_000, prop::sample::select(vec!["ms", "s", "m", "h"])).prop_flat_map(|(n, u)| {
                    // Mostly near the maximum's scale of each unit, sometimes any 9-digit number.
                    let scale = match u { "ms" => 1_000_000_000, "s" => 40_000_000, "m" => 600_000, _ => 10_000 };
                    prop_oneof![Just(n % scale), Just(n)].prop_map(move |n| (n, u))
                }),
                1..4,
            )
        ) {
            let text: String = parts.iter().map(|(n, u)| format!("{n}{u}")).collect();
            let expected: Duration = parts.iter().map(|&(n, u)| match u {
                "ms" => Duration::from_millis(n),
                "s" => Duration::from_secs(n),
                "m" => Duration::from_secs(n * 60),
                _ => Duration::from_secs(n * 3600),
            }).sum();
            prop_assume!(text.len() <= DURATION_MAX_LENGTH);
            let parsed = text.parse::<DurationString>();
            if expected <= Duration::from_secs(DURATION_MAX_SECONDS) {
                let d = parsed.map_err(|e| TestCaseError::fail(format!("{e}")))?;
                prop_assert_eq!(d.as_duration(), expected);
            } else {
                let e = parsed.expect_err("past the maximum");
                prop_assert!(e.reason.contains("longer than 8760h"), "{}", e);
            }
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
