//! `--plot FILE.svg`: three panels drawn with plotters — pending workloads
//! over time (whole numbers on its axis), utilisation per flavor over
//! time, and the wait-time distribution (cumulative) per ClusterQueue,
//! each as a step line: a sampled value holds until the next sample, the
//! way the simulator's state does between instants. Pure rendering of a
//! report.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::report::{Report, WorkloadState};

#[derive(Debug, thiserror::Error)]
#[error("drawing the plot: {0}")]
pub struct PlotError(String);

const WIDTH: u32 = 1100;
const PANEL: u32 = 340;

fn err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError(format!("{e:?}"))
}

/// Renders the report's series as one SVG document.
pub fn render_svg(report: &Report) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, PANEL * 3)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let panels = root.split_evenly((3, 1));
        let end = report.summary.end_seconds.max(1.0);

        // Workloads are counted: an integer axis, so every tick is a whole number.
        let pending: Vec<(f64, u32)> = report
            .series
            .pending
            .iter()
            .map(|&(t, n)| (t, u32::try_from(n).unwrap_or(u32::MAX)))
            .collect();
        let max_pending = pending.iter().map(|p| p.1).max().unwrap_or(0).max(1);
        let mut chart = ChartBuilder::on(&panels[0])
            .caption("Pending workloads", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end, 0..max_pending + 1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("virtual seconds")
            .y_desc("workloads")
            .y_labels((max_pending as usize + 2).min(11))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(steps(&pending, 0, end), &BLUE))
            .map_err(err)?;

        let mut chart = ChartBuilder::on(&panels[1])
            .caption("Utilisation per flavor", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end, 0.0..105.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("virtual seconds")
            .y_desc("% in use")
            .draw()
            .map_err(err)?;
        for (i, (flavor, points)) in report.series.utilization.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let resource = report
                .by_flavor
                .get(flavor)
                .map(|f| f.resource.as_str())
                .unwrap_or("");
            let percent: Vec<(f64, f64)> = points.iter().map(|&(t, u)| (t, u * 100.0)).collect();
            chart
                .draw_series(LineSeries::new(steps(&percent, 0.0, end), color))
                .map_err(err)?
                .label(format!("{flavor} ({resource})"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;

        let mut waits: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for w in &report.workloads {
            if let Some(cq) = &w.cluster_queue {
                // As the report's statistics: no rejected or inadmissible workload.
                if w.state != WorkloadState::Rejected && !w.never_admissible {
                    waits.entry(cq.as_str()).or_default().push(w.wait_seconds);
                }
            }
        }
        let max_wait = waits
            .values()
            .flatten()
            .copied()
            .fold(0.0, f64::max)
            .max(1.0);
        let mut chart = ChartBuilder::on(&panels[2])
            .caption(
                "Wait time per ClusterQueue (cumulative share of its workloads)",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..max_wait * 1.02, 0.0..1.02)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("wait (seconds)")
            .y_desc("share ≤ wait")
            .draw()
            .map_err(err)?;
        for (i, (cq, values)) in waits.iter_mut().enumerate() {
            values.sort_by(f64::total_cmp);
            let n = values.len() as f64;
            let color = Palette99::pick(i).to_rgba();
            // The empirical distribution: a step up at each wait.
            let points: Vec<(f64, f64)> = values
                .iter()
                .enumerate()
                .map(|(k, &w)| (w, (k + 1) as f64 / n))
                .collect();
            let points = steps(&points, 0.0, max_wait * 1.02);
            chart
                .draw_series(LineSeries::new(points, color))
                .map_err(err)?
                .label(cq.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A sampled series as a step line: each value holds until the next sample
/// (`before` until the first one), the last until `end`.
fn steps<Y: Copy>(points: &[(f64, Y)], before: Y, end: f64) -> Vec<(f64, Y)> {
    let mut out = Vec::with_capacity(points.len() * 2 + 2);
    let mut held = before;
    match points.first() {
        Some(&(t, _)) if t > 0.0 => out.push((0.0, before)),
        None => out.push((0.0, before)),
        _ => {}
    }
    for &(t, y) in points {
        if !out.is_empty() {
            out.push((t, held));
        }
        out.push((t, y));
        held = y;
    }
    if out.last().is_some_and(|&(t, _)| t < end) {
        out.push((end, held));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_hold_each_value_until_the_next_sample() {
        assert_eq!(
            steps(&[(10.0, 3), (35.0, 1)], 0, 60.0),
            [
                (0.0, 0),
                (10.0, 0),
                (10.0, 3),
                (35.0, 3),
                (35.0, 1),
                (60.0, 1)
            ]
        );
        // A sample at 0 starts the line; a sample at the end closes it.
        assert_eq!(
            steps(&[(0.0, 2.0), (60.0, 0.0)], 0.0, 60.0),
            [(0.0, 2.0), (60.0, 2.0), (60.0, 0.0)]
        );
        assert_eq!(steps::<u32>(&[], 0, 5.0), [(0.0, 0), (5.0, 0)]);
    }

    /// A polyline's points.
    type Line = Vec<(f64, f64)>;

    /// The `<text>` elements and the blue polylines (the pending series) of
    /// the first panel, as (x, text) and point lists.
    fn pending_panel(svg: &str) -> (Vec<(f64, String)>, Vec<Line>) {
        let panel = &svg[..svg.find("Utilisation per flavor").unwrap_or(svg.len())];
        let attribute = |element: &str, name: &str| -> Option<String> {
            let element = format!(" {element}");
            let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
            let end = start + element[start..].find('"')?;
            Some(element[start..end].to_string())
        };
        let texts = panel
            .split("<text ")
            .skip(1)
            .filter_map(|element| {
                let x = attribute(element, "x")?.parse().ok()?;
                let body = element.split_once('>')?.1.split("</text>").next()?;
                Some((x, body.trim().to_string()))
            })
            .collect();
        let lines = panel
            .split("<polyline ")
            .skip(1)
            .filter(|element| attribute(element, "stroke").as_deref() == Some("#0000FF"))
            .filter_map(|element| attribute(element, "points"))
            .map(|points| {
                points
                    .split_whitespace()
                    .filter_map(|p| p.split_once(','))
                    .filter_map(|(x, y)| Some((x.parse().ok()?, y.parse().ok()?)))
                    .collect()
            })
            .collect();
        (texts, lines)
    }

    /// Pending workloads are whole numbers: every label on the panel's
    /// vertical axis is an integer (it used to read 0.0, 0.5, 1.0, …), and
    /// the count holds between samples (no sloped segment between 0 and 3).
    #[test]
    fn the_pending_panel_counts_whole_workloads_in_steps() {
        let mut report = Report::default();
        report.summary.end_seconds = 60.0;
        report.series.pending = vec![(0.0, 0), (10.0, 3), (35.0, 1), (50.0, 0)];
        let svg = render_svg(&report).unwrap_or_else(|e| panic!("{e}"));
        let (texts, lines) = pending_panel(&svg);
        // The vertical axis' labels sit left of the plotting area (margin + label area).
        let left = 12.0 + 56.0;
        let labels: Vec<&str> = texts
            .iter()
            .filter(|(x, text)| *x < left && text != "workloads")
            .map(|(_, text)| text.as_str())
            .collect();
        assert!(labels.len() >= 4, "{labels:?}");
        for label in &labels {
            assert!(
                label.parse::<u32>().is_ok(),
                "label {label:?} of {labels:?}"
            );
        }
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert!(line.len() >= 8, "{line:?}");
        for pair in line.windows(2) {
            let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
            assert!(x0 == x1 || y0 == y1, "sloped segment {pair:?} in {line:?}");
        }
    }
}
