//! The policy's pause annotation: how an operator pauses and resumes by hand without writing a
//! spec that Helm or a GitOps tool owns (docs/design.md §5.1).

use serde::{Deserialize, Serialize};

use crate::keys::PAUSE_ANNOTATION;

/// What the [`PAUSE_ANNOTATION`] on a policy asks for. It can only add a pause: a policy is
/// paused when `spec.paused` is true or the annotation pauses it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PauseAnnotation {
    /// No annotation.
    #[default]
    Absent,
    /// `"true"`: paused by hand.
    Paused,
    /// `"false"`: written out, the same as no annotation.
    NotPaused,
    /// Any other value, kept as written (escaped and bounded). It pauses: an operator who wrote
    /// something there meant to stop the upgrade more likely than not.
    Malformed(String),
}

impl PauseAnnotation {
    /// Reads the annotation's value, if any.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            None => Self::Absent,
            Some("true") => Self::Paused,
            Some("false") => Self::NotPaused,
            Some(other) => Self::Malformed(crate::text::bounded(other, 64).into_owned()),
        }
    }

    /// The pause annotation of an object's annotations.
    pub fn of(annotations: &std::collections::BTreeMap<String, String>) -> Self {
        Self::parse(annotations.get(PAUSE_ANNOTATION).map(String::as_str))
    }

    pub fn pauses(&self) -> bool {
        matches!(self, Self::Paused | Self::Malformed(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_true_and_false_are_read_and_anything_else_pauses() {
        assert_eq!(PauseAnnotation::parse(None), PauseAnnotation::Absent);
        assert!(PauseAnnotation::parse(Some("true")).pauses());
        assert!(!PauseAnnotation::parse(Some("false")).pauses());
        assert!(!PauseAnnotation::parse(None).pauses());
        for odd in ["True", "yes", "1", "", " true"] {
            let read = PauseAnnotation::parse(Some(odd));
            assert!(matches!(read, PauseAnnotation::Malformed(_)), "{odd:?}");
            assert!(read.pauses(), "{odd:?} pauses");
        }
        let long = PauseAnnotation::parse(Some(&"x".repeat(500)));
        assert!(matches!(long, PauseAnnotation::Malformed(v) if v.len() <= 64));
    }
}
