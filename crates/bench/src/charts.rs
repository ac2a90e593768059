//! PNG charts with plotters: ready pods over time for a few owners (one panel per owner and tool),
//! and makespan against node count across the reports in the results directory.
//!
//! Text is drawn with plotters' `ab_glyph` backend from a TrueType file loaded at run time (no
//! system font lookup, no fontconfig), DejaVu Sans by default.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, anyhow};
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::results::{Run, Summary, Tool};
use crate::workload::Owner;

const FONT: &str = "sans-serif";

/// Loads `path` as the font every chart uses. Must be called once before drawing.
pub fn register_font(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "reading the chart font {} (Debian: apt-get install fonts-dejavu-core, or pass --font)",
            path.display()
        )
    })?;
    // plotters keeps registered fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FONT, FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("{} is not a TrueType or OpenType font", path.display()))
}

fn tool_color(tool: Tool) -> RGBColor {
    match tool {
        Tool::K8sm => RGBColor(0x1f, 0x77, 0xb4),
        Tool::DrainPdbParallel => RGBColor(0x94, 0x67, 0xbd),
        Tool::DrainPdb => RGBColor(0xd6, 0x27, 0x28),
        Tool::Drain => RGBColor(0xff, 0x7f, 0x0e),
    }
}

/// Ready pods over time: a row per owner, a column per tool, each panel on its own time axis (the
/// tools' makespans differ by an order of magnitude), with the SLA bound dashed.
pub fn ready_over_time(path: &Path, owners: &[(Owner, u32)], runs: &[&Run]) -> anyhow::Result<()> {
    let (rows, cols) = (owners.len().max(1), runs.len().max(1));
    let size = (460 * cols as u32, 260 * rows as u32 + 60);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "Ready pods over time (dashed: the SLA bound min(ceil(t·d), d−1))",
        (FONT, 26),
    )?;
    let panels = root.split_evenly((rows, cols));
    for (row, (owner, floor)) in owners.iter().enumerate() {
        for (col, run) in runs.iter().enumerate() {
            let panel = &panels[row * cols + col];
            let tool = run.tool;
            let points = run.series.get(&owner.name).cloned().unwrap_or_default();
            let x_max = run
                .span_s()
                .max(points.last().map_or(1.0, |p| p.0))
                .max(1.0)
                * 1.02;
            // Zoomed on the band around the bound, where the tools differ.
            let margin = (owner.replicas / 5).max(2);
            let y_min = f64::from(floor.saturating_sub(margin));
            let y_max = f64::from(owner.replicas) + 1.0;
            let mut chart = ChartBuilder::on(panel)
                .caption(
                    format!(
                        "{} ({} {}) — {}",
                        owner.name,
                        owner.replicas,
                        owner.kind.as_str(),
                        tool.slug()
                    ),
                    (FONT, 16),
                )
                .margin(10)
                .x_label_area_size(34)
                .y_label_area_size(50)
                .build_cartesian_2d(0f64..x_max, y_min..y_max)?;
            chart
                .configure_mesh()
                .x_desc("seconds since the upgrade started")
                .y_desc("ready pods")
                .y_labels(((y_max - y_min) as usize + 1).min(10))
                .y_label_formatter(&|y| format!("{y:.0}"))
                .x_label_formatter(&|x| format!("{x:.0}"))
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 13))
                .light_line_style(WHITE.mix(0.0))
                .draw()?;
            chart.draw_series(DashedLineSeries::new(
                [(0.0, f64::from(*floor)), (x_max, f64::from(*floor))],
                6,
                4,
                BLACK.mix(0.6).stroke_width(1),
            ))?;
            chart.draw_series(LineSeries::new(
                steps(&points),
                tool_color(tool).stroke_width(2),
            ))?;
        }
    }
    root.present()?;
    Ok(())
}

/// A step function through `(t, n)` changes: each value holds until the next change (the series'
/// last point marks the end of the observation).
pub fn steps(points: &[(f64, u32)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(t, n)) in points.iter().enumerate() {
        if i > 0 {
            out.push((t.max(0.0), f64::from(points[i - 1].1)));
        }
        out.push((t.max(0.0), f64::from(n)));
    }
    out
}

/// Median makespan against node count for every tool, from `summaries` comparable with `current`
/// (same pods per node, delays and threshold); the latest summary wins per node count. `None` with
/// fewer than two node counts.
pub fn makespan_points(
    summaries: &[Summary],
    current: &Summary,
) -> Option<BTreeMap<Tool, Vec<(usize, f64)>>> {
    let key = |s: &Summary| {
        let sc = &s.scenario;
        (
            sc.pods / sc.nodes.max(1),
            (sc.pod_ready_delay_s * 1000.0) as u64,
            (sc.restart_delay_s * 1000.0) as u64,
            sc.threshold_percent,
        )
    };
    let mut latest: BTreeMap<usize, &Summary> = BTreeMap::new();
    for s in summaries.iter().filter(|s| key(s) == key(current)) {
        let slot = latest.entry(s.scenario.nodes).or_insert(s);
        if s.machine.date > slot.machine.date {
            *slot = s;
        }
    }
    if latest.len() < 2 {
        return None;
    }
    let mut points: BTreeMap<Tool, Vec<(usize, f64)>> = BTreeMap::new();
    for (nodes, s) in latest {
        for tool in s.tools() {
            if let Some(m) = crate::spread::Spread::over(&s.runs_of(tool), |r| r.makespan_s) {
                points.entry(tool).or_default().push((nodes, m.median));
            }
        }
    }
    Some(points)
}

/// Makespan against node count (log scale), with the lower bound of the current scenario's shape.
pub fn makespan_vs_nodes(
    path: &Path,
    points: &BTreeMap<Tool, Vec<(usize, f64)>>,
    lower_bound_s: f64,
) -> anyhow::Result<()> {
    let all = points.values().flatten();
    let x_max = all.clone().map(|p| p.0).max().unwrap_or(1) as f64 * 1.1;
    let y_max = all.clone().map(|p| p.1).fold(lower_bound_s, f64::max) * 2.0;
    let y_min = all.map(|p| p.1).fold(lower_bound_s, f64::min) / 2.0;
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Makespan against node count", (FONT, 24))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, (y_min.max(0.1)..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("nodes")
        .y_desc("makespan, seconds (log scale)")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()?;
    for (tool, series) in points {
        let color = tool_color(*tool);
        let line: Vec<(f64, f64)> = series.iter().map(|(n, m)| (*n as f64, *m)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
            .label(tool.label())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(line.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
    }
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, lower_bound_s), (x_max, lower_bound_s)],
            6,
            4,
            BLACK.mix(0.6).stroke_width(1),
        ))?
        .label("lower bound (per-owner waves; independent of node count)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.6)));
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_hold_each_value_until_the_next_change() {
        let points = [(0.0, 3), (2.0, 2), (4.0, 3)];
        assert_eq!(
            steps(&points),
            [(0.0, 3.0), (2.0, 3.0), (2.0, 2.0), (4.0, 2.0), (4.0, 3.0)]
        );
        assert!(steps(&[]).is_empty());
    }

    fn summary(nodes: usize, pods: usize, date: &str, makespans: &[(Tool, f64)]) -> Summary {
        let text = include_str!("../tests/fixtures/summary.json");
        let mut summary: Summary = serde_json::from_str(text).unwrap();
        summary.scenario.nodes = nodes;
        summary.scenario.pods = pods;
        summary.machine.date = date.into();
        let template = summary.runs[0].clone();
        summary.runs = makespans
            .iter()
            .map(|&(tool, m)| crate::results::Run {
                tool,
                makespan_s: Some(m),
                ..template.clone()
            })
            .collect();
        summary
    }

    #[test]
    fn makespans_are_charted_per_node_count_from_comparable_runs_the_latest_winning() {
        let current = summary(
            100,
            3000,
            "2026-01-03",
            &[(Tool::K8sm, 60.0), (Tool::Drain, 400.0)],
        );
        let summaries = [
            summary(20, 600, "2026-01-01", &[(Tool::K8sm, 40.0)]),
            summary(
                20,
                600,
                "2026-01-02",
                &[(Tool::K8sm, 45.0), (Tool::K8sm, 41.0), (Tool::K8sm, 50.0)],
            ),
            // 10 pods per node: another shape, left out.
            summary(50, 500, "2026-01-02", &[(Tool::K8sm, 1.0)]),
            current.clone(),
        ];
        let points = makespan_points(&summaries, &current).unwrap();
        assert_eq!(points[&Tool::K8sm], [(20, 45.0), (100, 60.0)]);
        assert_eq!(points[&Tool::Drain], [(100, 400.0)]);
        assert_eq!(
            makespan_points(std::slice::from_ref(&current), &current),
            None
        );
    }
}
