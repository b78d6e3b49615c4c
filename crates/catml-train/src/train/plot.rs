//! The training curves as SVG. The upper panel holds the losses: the running training loss,
//! the evaluation loss, each term's evaluation value and each equation's defect; the lower
//! panel, drawn when some path's target holds class labels, each such path's accuracy. The loss
//! axis is linear or logarithmic.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{EpochMetrics, TrainError};

/// How the loss axis is drawn (`plot_scale = "linear"` or `"log"` in a spec's `[output]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlotScale {
    #[default]
    Linear,
    /// log10 of the loss; values at or below zero are drawn at the smallest positive value.
    Log,
}

/// One named curve: its value at each epoch.
struct Curve {
    label: String,
    values: Vec<f64>,
    width: u32,
}

/// The loss curves: totals drawn thick, terms and defects thin.
fn loss_curves(history: &[EpochMetrics]) -> Vec<Curve> {
    let eval_on = history
        .first()
        .map_or("eval".to_string(), |m| m.eval_on.replace('_', "-"));
    let mut curves = vec![
        Curve {
            label: "train loss (running)".to_string(),
            values: history.iter().map(|m| m.loss).collect(),
            width: 3,
        },
        Curve {
            label: format!("{eval_on} loss"),
            values: history.iter().map(|m| m.eval.loss).collect(),
            width: 3,
        },
    ];
    let Some(last) = history.last() else {
        return curves;
    };
    let value_of = |get: &dyn Fn(&EpochMetrics) -> Option<f64>| -> Vec<f64> {
        history.iter().map(|m| get(m).unwrap_or(f64::NAN)).collect()
    };
    for name in last.eval.terms.keys() {
        if last.eval.defects.contains_key(name) {
            continue; // an equation's term is its defect, drawn below
        }
        curves.push(Curve {
            label: format!("{eval_on} term {name}"),
            values: value_of(&|m| m.eval.terms.get(name).copied()),
            width: 1,
        });
    }
    for name in last.eval.defects.keys() {
        curves.push(Curve {
            label: format!("{eval_on} defect {name}"),
            values: value_of(&|m| m.eval.defects.get(name).copied()),
            width: 1,
        });
    }
    curves
}

fn accuracy_curves(history: &[EpochMetrics]) -> Vec<Curve> {
    let Some(last) = history.last() else {
        return Vec::new();
    };
    last.eval
        .accuracy
        .keys()
        .map(|name| Curve {
            label: format!("accuracy {name}"),
            values: history
                .iter()
                .map(|m| m.eval.accuracy.get(name).copied().unwrap_or(f64::NAN))
                .collect(),
            width: 2,
        })
        .collect()
}

fn draw_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    history: &[EpochMetrics],
    caption: &str,
    y_desc: &str,
    curves: &[Curve],
    log: bool,
    fixed: Option<(f64, f64)>,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let last = history.last().map_or(1, |m| m.epoch.max(1));
    let finite = || curves.iter().flat_map(|c| c.values.iter().copied());
    let floor = finite()
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold(f64::INFINITY, f64::min);
    let floor = if floor.is_finite() { floor } else { 1e-12 };
    let shown = |v: f64| if log { v.max(floor).log10() } else { v };
    let (lo, hi) = match fixed {
        Some(range) => range,
        None => {
            let values: Vec<f64> = finite().filter(|v| v.is_finite()).map(&shown).collect();
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if !lo.is_finite() {
                (0.0, 1.0)
            } else if log {
                (lo.floor(), hi.ceil().max(lo.floor() + 1.0))
            } else {
                (lo.min(0.0), if hi > 0.0 { hi * 1.05 } else { 1.0 })
            }
        }
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0usize..last, lo..hi)
        .map_err(|e| err(&e))?;
    let log_label = |y: &f64| format!("1e{}", y.round());
    let linear_label = |y: &f64| format!("{y:.3}");
    let mut mesh = chart.configure_mesh();
    mesh.x_desc("epoch").y_desc(y_desc);
    if log {
        mesh.y_label_formatter(&log_label);
    } else {
        mesh.y_label_formatter(&linear_label);
    }
    mesh.draw().map_err(|e| err(&e))?;
    for (i, c) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(usize, f64)> = history
            .iter()
            .zip(&c.values)
            .filter(|(_, v)| v.is_finite())
            .map(|(m, &v)| (m.epoch, shown(v)))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(c.width)))
            .map_err(|e| err(&e))?
            .label(c.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}

/// The SVG text of the training curves.
pub fn training_curves_svg(history: &[EpochMetrics], scale: PlotScale) -> Result<String, String> {
    let losses = loss_curves(history);
    let accuracy = accuracy_curves(history);
    let height = if accuracy.is_empty() { 420 } else { 720 };
    let log = scale == PlotScale::Log;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (top, bottom) = if accuracy.is_empty() {
            (root.clone(), None)
        } else {
            let (t, b) = root.split_vertically(420);
            (t, Some(b))
        };
        let y_desc = if log { "loss (log10 axis)" } else { "loss" };
        draw_panel(&top, history, "loss", y_desc, &losses, log, None)?;
        if let Some(b) = bottom {
            draw_panel(
                &b,
                history,
                "accuracy",
                "fraction correct",
                &accuracy,
                false,
                Some((0.0, 1.0)),
            )?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The SVG text of the training curves on a linear loss axis.
pub fn loss_curve_svg(history: &[EpochMetrics]) -> Result<String, String> {
    training_curves_svg(history, PlotScale::Linear)
}

/// Writes the training curves atomically (linear loss axis).
pub fn write_plot(path: &Path, history: &[EpochMetrics]) -> Result<(), TrainError> {
    write_plot_scaled(path, history, PlotScale::Linear)
}

/// Writes the training curves atomically.
pub fn write_plot_scaled(
    path: &Path,
    history: &[EpochMetrics],
    scale: PlotScale,
) -> Result<(), TrainError> {
    let fail = |reason: String| TrainError::Output {
        path: path.display().to_string(),
        reason,
    };
    let svg = training_curves_svg(history, scale).map_err(fail)?;
    crate::tensor::write_atomic(path, svg.as_bytes()).map_err(|e| fail(e.to_string()))
}
