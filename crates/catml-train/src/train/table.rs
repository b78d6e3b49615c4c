//! Tabular data with named columns: numbers, with empty cells for missing values.

use std::path::Path;

use super::TrainError;

/// A table of numeric cells (`None`: missing) under named columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Where the rows came from, for messages (a path, or a name for in-memory data).
    pub origin: String,
    columns: Vec<String>,
    rows: Vec<Vec<Option<f64>>>,
    /// The line of each row in its file (the header is line 1).
    lines: Vec<u64>,
}

impl Table {
    /// A table from rows of cells, one per column (row i is line i + 2, after a header).
    pub fn new(origin: &str, columns: Vec<String>, rows: Vec<Vec<Option<f64>>>) -> Table {
        debug_assert!(rows.iter().all(|r| r.len() == columns.len()));
        let lines = (0..rows.len() as u64).map(|i| i + 2).collect();
        Table {
            origin: origin.to_string(),
            columns,
            rows,
            lines,
        }
    }

    /// Reads a CSV file with a header row; empty cells are missing values.
    pub fn read_csv(path: &Path) -> Result<Table, TrainError> {
        let origin = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| TrainError::Csv {
            path: origin.clone(),
            message: e.to_string(),
        })?;
        Table::from_csv(&origin, file)
    }

    /// Parses CSV text with a header row from any reader.
    pub fn from_csv(origin: &str, reader: impl std::io::Read) -> Result<Table, TrainError> {
        let csv_err = |e: csv::Error| TrainError::Csv {
            path: origin.to_string(),
            message: e.to_string(),
        };
        let mut r = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(reader);
        let columns: Vec<String> = r
            .headers()
            .map_err(csv_err)?
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows = Vec::new();
        let mut lines = Vec::new();
        for record in r.records() {
            let record = record.map_err(csv_err)?;
            let line = record.position().map_or(0, |p| p.line());
            let row = record
                .iter()
                .zip(&columns)
                .map(|(cell, column)| {
                    if cell.is_empty() {
                        return Ok(None);
                    }
                    cell.parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .map(Some)
                        .ok_or_else(|| TrainError::Cell {
                            path: origin.to_string(),
                            line,
                            column: column.clone(),
                            value: cell.to_string(),
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            rows.push(row);
            lines.push(line);
        }
        Ok(Table {
            origin: origin.to_string(),
            columns,
            rows,
            lines,
        })
    }

    /// Writes the table as CSV (missing cells empty), atomically.
    pub fn write_csv(&self, path: &Path) -> Result<(), TrainError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let fail = |message: String| TrainError::Csv {
            path: path.display().to_string(),
            message,
        };
        w.write_record(&self.columns)
            .map_err(|e| fail(e.to_string()))?;
        for row in &self.rows {
            w.write_record(
                row.iter()
                    .map(|c| c.map(|v| v.to_string()).unwrap_or_default()),
            )
            .map_err(|e| fail(e.to_string()))?;
        }
        let bytes = w.into_inner().map_err(|e| fail(e.to_string()))?;
        crate::tensor::write_atomic(path, &bytes).map_err(|e| fail(e.to_string()))
    }

    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    pub fn n_rows(&self) -> usize {
        self.rows.len()
    }

    pub fn row(&self, i: usize) -> &[Option<f64>] {
        &self.rows[i]
    }

    /// The line row `i` came from.
    pub fn line(&self, i: usize) -> u64 {
        self.lines[i]
    }
}
