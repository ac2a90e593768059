//! The time annotations of a node, parsed.

use chrono::{DateTime, Utc};

/// A time annotation as read from a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// Absent.
    Absent,
    /// Present and RFC 3339.
    At(DateTime<Utc>),
    /// Present but unreadable.
    Malformed,
}

impl Stamp {
    pub(crate) fn parse(raw: Option<&str>) -> Self {
        match raw {
            None => Self::Absent,
            Some(text) => DateTime::parse_from_rfc3339(text.trim())
                .map(|t| Self::At(t.with_timezone(&Utc)))
                .unwrap_or(Self::Malformed),
        }
    }

    pub(crate) fn time(self) -> Option<DateTime<Utc>> {
        match self {
            Self::At(t) => Some(t),
            _ => None,
        }
    }

    pub(crate) fn is_present(self) -> bool {
        self != Self::Absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps() {
        assert_eq!(Stamp::parse(None), Stamp::Absent);
        let t = Stamp::parse(Some("2026-01-02T03:04:05Z")).time().unwrap();
        assert_eq!(t.to_rfc3339(), "2026-01-02T03:04:05+00:00");
        // Offsets are normalised to UTC.
        assert_eq!(
            Stamp::parse(Some("2026-01-02T04:04:05+01:00")).time(),
            Some(t)
        );
        for bad in [
            "",
            "yesterday",
            "2026-01-02",
            "1767323045",
            "2026-13-02T03:04:05Z",
        ] {
            assert_eq!(Stamp::parse(Some(bad)), Stamp::Malformed, "{bad}");
        }
    }
}
