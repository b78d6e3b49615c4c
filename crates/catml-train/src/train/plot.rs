//! The loss curve as SVG: training loss and evaluation loss per epoch.

use std::path::Path;

use plotters::prelude::*;

use super::{EpochMetrics, TrainError};

/// The SVG text of the loss curves.
pub fn loss_curve_svg(history: &[EpochMetrics]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let last = history.last().map_or(1, |m| m.epoch.max(1));
        let top = history
            .iter()
            .flat_map(|m| [m.loss, m.eval.loss])
            .fold(0.0f64, f64::max);
        let top = if top > 0.0 { top * 1.05 } else { 1.0 };
        let mut chart = ChartBuilder::on(&root)
            .caption("loss", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0usize..last, 0.0..top)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("epoch")
            .y_desc("loss")
            .draw()
            .map_err(|e| e.to_string())?;
        let eval_label = match history.first() {
            Some(m) => format!("{} loss", m.eval_on.replace('_', "-")),
            None => "eval loss".to_string(),
        };
        let train: Vec<f64> = history.iter().map(|m| m.loss).collect();
        let eval: Vec<f64> = history.iter().map(|m| m.eval.loss).collect();
        let series = [
            ("train loss (running)".to_string(), BLUE, train),
            (eval_label, RED, eval),
        ];
        for (label, color, values) in series {
            chart
                .draw_series(LineSeries::new(
                    history.iter().zip(values).map(|(m, v)| (m.epoch, v)),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Writes the loss curves atomically.
pub fn write_plot(path: &Path, history: &[EpochMetrics]) -> Result<(), TrainError> {
    let fail = |reason: String| TrainError::Output {
        path: path.display().to_string(),
        reason,
    };
    let svg = loss_curve_svg(history).map_err(fail)?;
    crate::tensor::write_atomic(path, svg.as_bytes()).map_err(|e| fail(e.to_string()))
}
