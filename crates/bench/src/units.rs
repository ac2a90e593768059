//! How the report, the targets and the index write a figure with its unit: seconds, milliseconds,
//! ratios, plain figures to two decimals, megabytes and a histogram quantile's bucket bound.

use crate::requests::BucketBound;

pub fn secs(s: f64) -> String {
    if s.abs() >= 100.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

pub fn millis(s: f64) -> String {
    format!("{:.0} ms", s * 1000.0)
}

pub fn ratio(r: f64) -> String {
    format!("{r:.2}×")
}

pub fn two_decimals(v: f64) -> String {
    format!("{v:.2}")
}

/// Decimal megabytes, as the RSS target is stated.
pub fn megabytes(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

/// A histogram quantile as far as its buckets tell.
pub fn bucket(b: BucketBound) -> String {
    match b {
        BucketBound::AtMost(s) => format!("≤ {}", millis(s)),
        BucketBound::Above(s) => format!("> {}", secs(s)),
    }
}
