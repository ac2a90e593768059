//! `MaxConcurrentNodes`: how many nodes may drain at once, as a count (`3`) or a share of the
//! selected nodes (`"20%"`).
//!
//! On the wire it is a Kubernetes int-or-string, like a Deployment's `maxUnavailable`. The
//! apiserver enforces the same grammar as [`MaxConcurrentNodes::from_str`] through
//! [`MAX_CONCURRENT_NODES_RULE`].

use std::{borrow::Cow, fmt, num::NonZeroU32, str::FromStr};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// CEL rule of the CRD schema: an integer from 1 to 4294967295 (a u32, as the controller reads it),
/// or a string `"1%"`..`"100%"` without leading zeros.
// `string(self) == self` holds only for a string: CEL equality across types is false, not an error.
// It says what `type(self) == string` says, in a form that client-side CEL (kube-cel, used by the
// tests) can evaluate too.
pub const MAX_CONCURRENT_NODES_RULE: &str = "string(self) == self ? string(self).matches('^(100|[1-9][0-9]?)%$') : int(self) >= 1 && int(self) <= 4294967295";

/// Message of [`MAX_CONCURRENT_NODES_RULE`].
pub const MAX_CONCURRENT_NODES_MESSAGE: &str = "spec.maxConcurrentNodes must be an integer from 1 to 4294967295 (such as 3) or a percentage from \"1%\" to \"100%\" (such as \"20%\")";

/// How many selected nodes may drain at the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MaxConcurrentNodes {
    /// At most this many nodes.
    Count(NonZeroU32),
    /// At most this percentage (1..=100) of the selected nodes, rounded up, and at least one node.
    Percent(u8),
}

/// Why a value is not a [`MaxConcurrentNodes`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid maxConcurrentNodes {input}: must be an integer of at least 1 or a percentage from \"1%\" to \"100%\""
)]
pub struct InvalidMaxConcurrentNodes {
    /// The rejected value, as written.
    pub input: String,
}

impl MaxConcurrentNodes {
    /// One node at a time: the default, and the most careful setting.
    pub const ONE: Self = Self::Count(NonZeroU32::MIN);

    /// The number of drain slots for `total_nodes` selected nodes: a count as is, a percentage
    /// rounded up. Always at least 1, so an upgrade can always make progress, even with no or
    /// few nodes selected.
    pub fn resolve(self, total_nodes: usize) -> usize {
        match self {
            Self::Count(n) => usize::try_from(n.get()).unwrap_or(usize::MAX),
            Self::Percent(p) => total_nodes
                .saturating_mul(usize::from(p))
                .div_ceil(100)
                .max(1),
        }
    }

    /// Builds a count; `None` for 0.
    pub fn count(n: u32) -> Option<Self> {
        NonZeroU32::new(n).map(Self::Count)
    }

    /// Builds a percentage; `None` outside 1..=100.
    pub fn percent(p: u8) -> Option<Self> {
        (1..=100).contains(&p).then_some(Self::Percent(p))
    }
}

impl Default for MaxConcurrentNodes {
    fn default() -> Self {
        Self::ONE
    }
}

impl FromStr for MaxConcurrentNodes {
    type Err = InvalidMaxConcurrentNodes;

    /// Parses `"3"` or `"20%"`. On the wire a count is a JSON integer; the string form of a count
    /// is accepted here only for command lines.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidMaxConcurrentNodes {
            input: format!("{s:?}"),
        };
        // Leading zeros, signs and spaces are rejected, as by the CEL rule.
        let digits =
            |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && !t.starts_with('0');
        match s.strip_suffix('%') {
            Some(p) if digits(p) => p.parse().ok().and_then(Self::percent).ok_or_else(invalid),
            Some(_) => Err(invalid()),
            None if digits(s) => s.parse().ok().and_then(Self::count).ok_or_else(invalid),
            None => Err(invalid()),
        }
    }
}

impl fmt::Display for MaxConcurrentNodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Count(n) => write!(f, "{n}"),
            Self::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Serialize for MaxConcurrentNodes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Count(n) => serializer.serialize_u32(n.get()),
            Self::Percent(_) => serializer.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for MaxConcurrentNodes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl de::Visitor<'_> for Visitor {
            type Value = MaxConcurrentNodes;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an integer of at least 1 or a percentage string from \"1%\" to \"100%\"",
                )
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                u32::try_from(v)
                    .ok()
                    .and_then(MaxConcurrentNodes::count)
                    .ok_or_else(|| {
                        E::custom(InvalidMaxConcurrentNodes {
                            input: v.to_string(),
                        })
                    })
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v)
                    .map_err(|_| {
                        E::custom(InvalidMaxConcurrentNodes {
                            input: v.to_string(),
                        })
                    })
                    .and_then(|v| self.visit_u64(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                // A count must be an integer on the wire, as the apiserver's CEL rule demands: "3"
                // is rejected.
                if v.ends_with('%') {
                    v.parse().map_err(E::custom)
                } else {
                    Err(E::custom(InvalidMaxConcurrentNodes {
                        input: format!("{v:?}"),
                    }))
                }
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

impl JsonSchema for MaxConcurrentNodes {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "MaxConcurrentNodes".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "x-kubernetes-int-or-string": true,
            // Explicit, or kube's schema transforms mark an optional int-or-string nullable, and a
            // stored `null`
            // would then neither default nor deserialise. Not nullable, the apiserver drops a
            // `null` and defaults.
            "nullable": false,
            "x-kubernetes-validations": [{
                "rule": MAX_CONCURRENT_NODES_RULE,
                "message": MAX_CONCURRENT_NODES_MESSAGE,
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_and_display_table() {
        let ok = [
            ("1", MaxConcurrentNodes::count(1)),
            ("3", MaxConcurrentNodes::count(3)),
            ("4294967295", MaxConcurrentNodes::count(u32::MAX)),
            ("1%", MaxConcurrentNodes::percent(1)),
            ("20%", MaxConcurrentNodes::percent(20)),
            ("100%", MaxConcurrentNodes::percent(100)),
        ];
        for (text, want) in ok {
            let got: MaxConcurrentNodes = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(Some(got), want, "{text}");
            assert_eq!(got.to_string(), text);
        }
        for bad in [
            "0",
            "0%",
            "101%",
            "150%",
            "abc",
            "",
            "%",
            "-1",
            "+1",
            "05%",
            "01",
            " 5",
            "5 %",
            "1.5",
            "4294967296",
            "20 %",
        ] {
            let err = bad.parse::<MaxConcurrentNodes>().expect_err(bad);
            assert!(err.to_string().contains("\"1%\" to \"100%\""), "{err}");
        }
    }

    #[test]
    fn resolve_table() {
        let c = |n| MaxConcurrentNodes::count(n).unwrap();
        let p = |n| MaxConcurrentNodes::percent(n).unwrap();
        let table = [
            (c(1), 0, 1),
            (c(1), 100, 1),
            (c(5), 3, 5),
            (p(1), 0, 1),
            (p(1), 1, 1),
            (p(1), 150, 2),
            (p(10), 10, 1),
            (p(10), 11, 2),
            (p(20), 20, 4),
            (p(20), 21, 5),
            (p(50), 1, 1),
            (p(50), 3, 2),
            (p(100), 7, 7),
            (p(100), 0, 1),
        ];
        for (m, total, want) in table {
            assert_eq!(m.resolve(total), want, "{m} of {total}");
        }
    }

    #[test]
    fn wire_format_is_int_or_string() {
        let parse = |j: &str| serde_json::from_str::<MaxConcurrentNodes>(j);
        assert_eq!(parse("2").unwrap(), MaxConcurrentNodes::count(2).unwrap());
        assert_eq!(
            parse("\"25%\"").unwrap(),
            MaxConcurrentNodes::percent(25).unwrap()
        );
        for bad in [
            "0", "-1", "\"0%\"", "\"150%\"", "\"abc\"", "\"3\"", "1.5", "true", "null",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            serde_json::to_string(&MaxConcurrentNodes::count(3).unwrap()).unwrap(),
            "3"
        );
        assert_eq!(
            serde_json::to_string(&MaxConcurrentNodes::percent(20).unwrap()).unwrap(),
            "\"20%\""
        );
        // YAML too: operators write both forms unquoted where they can.
        assert_eq!(
            serde_yaml::from_str::<MaxConcurrentNodes>("20%").unwrap(),
            MaxConcurrentNodes::percent(20).unwrap()
        );
        assert_eq!(
            serde_yaml::from_str::<MaxConcurrentNodes>("4").unwrap(),
            MaxConcurrentNodes::count(4).unwrap()
        );
    }

    proptest! {
        #[test]
        fn resolve_is_at_least_one_and_at_most_the_share_rounded_up(p in 1u8..=100, total in 0usize..100_000) {
            let slots = MaxConcurrentNodes::Percent(p).resolve(total);
            prop_assert!(slots >= 1);
            prop_assert!(slots <= total.max(1));
            // Rounded up: one slot fewer would be below the share.
            prop_assert!((slots - 1) * 100 < total * usize::from(p) || slots == 1);
        }

        #[test]
        fn display_parses_back(m in prop_oneof![
            (1u32..).prop_map(|n| MaxConcurrentNodes::count(n).unwrap()),
            (1u8..=100).prop_map(|n| MaxConcurrentNodes::percent(n).unwrap()),
        ]) {
            prop_assert_eq!(m.to_string().parse::<MaxConcurrentNodes>().unwrap(), m);
            let json = serde_json::to_string(&m).unwrap();
            prop_assert_eq!(serde_json::from_str::<MaxConcurrentNodes>(&json).unwrap(), m);
        }
    }
}
