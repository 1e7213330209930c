//! `--plot FILE.svg`: three panels drawn with plotters — pending workloads
//! over time, utilisation per flavor over time, and the wait-time
//! distribution (cumulative) per ClusterQueue. Pure rendering of a report.

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

        let max_pending = report
            .series
            .pending
            .iter()
            .map(|p| p.1)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let mut chart = ChartBuilder::on(&panels[0])
            .caption("Pending workloads", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end, 0.0..max_pending * 1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("virtual seconds")
            .y_desc("workloads")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                report.series.pending.iter().map(|&(t, n)| (t, n as f64)),
                &BLUE,
            ))
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
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|&(t, u)| (t, u * 100.0)),
                    color,
                ))
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
                if w.state != WorkloadState::Rejected {
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
            let points: Vec<(f64, f64)> = values
                .iter()
                .enumerate()
                .map(|(k, &w)| (w, (k + 1) as f64 / n))
                .collect();
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
