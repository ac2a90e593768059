//! Figures over repeated runs: the median with the smallest and largest value, per tool.

use serde::{Deserialize, Serialize};

use crate::results::Run;

/// Median, minimum and maximum of one figure over runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Runs that had the figure.
    pub n: usize,
}

impl Spread {
    /// The spread of `values` (NaNs left out); `None` without values. The median of an even count
    /// is the mean of the two middle values.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut sorted: Vec<f64> = values.into_iter().filter(|v| !v.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            n,
        })
    }

    /// The spread of `figure` over `runs` (runs without it left out).
    pub fn over(runs: &[&Run], figure: impl Fn(&Run) -> Option<f64>) -> Option<Self> {
        Self::of(runs.iter().filter_map(|r| figure(r)))
    }

    /// `median [min–max]` with `format` applied to each; the median alone for a single value.
    pub fn show(&self, format: impl Fn(f64) -> String) -> String {
        if self.n == 1 || self.min == self.max {
            format(self.median)
        } else {
            format!(
                "{} [{}–{}]",
                format(self.median),
                format(self.min),
                format(self.max)
            )
        }
    }
}

/// The run whose `figure` is the median (the lower middle one for an even count): the run to chart.
pub fn median_run<'a>(runs: &[&'a Run], figure: impl Fn(&Run) -> Option<f64>) -> Option<&'a Run> {
    let mut with: Vec<(&Run, f64)> = runs.iter().filter_map(|r| Some((*r, figure(r)?))).collect();
    with.sort_by(|a, b| a.1.total_cmp(&b.1));
    with.get(with.len().saturating_sub(1) / 2).map(|(r, _)| *r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_counts_take_the_middle_value() {
        let s = Spread::of([37.3, 54.0, 137.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (54.0, 37.3, 137.0, 3));
        // Order does not matter.
        assert_eq!(Spread::of([137.0, 37.3, 54.0]), Some(s));
    }

    #[test]
    fn even_counts_average_the_two_middle_values() {
        let s = Spread::of([4.0, 1.0, 3.0, 10.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (3.5, 1.0, 10.0, 4));
    }

    #[test]
    fn no_values_no_spread_and_nans_are_left_out() {
        assert_eq!(Spread::of([]), None);
        assert_eq!(Spread::of([f64::NAN]), None);
        let s = Spread::of([2.0, f64::NAN]).unwrap();
        assert_eq!((s.median, s.n), (2.0, 1));
    }

    #[test]
    fn shown_as_median_with_its_range() {
        let secs = |v: f64| format!("{v:.1} s");
        assert_eq!(
            Spread::of([1.0, 2.0, 5.0]).unwrap().show(secs),
            "2.0 s [1.0 s–5.0 s]"
        );
        assert_eq!(Spread::of([7.0]).unwrap().show(secs), "7.0 s");
        assert_eq!(Spread::of([7.0, 7.0]).unwrap().show(secs), "7.0 s");
    }
}
