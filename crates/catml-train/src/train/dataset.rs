//! Binding table columns to a diagram's objects: each object reads some columns of each row
//! (all present, or the object is missing in that row).

use std::collections::BTreeMap;

use super::{Table, TrainError};
use crate::diagram::Diagram;
use crate::tensor::{Tensor, TensorType};

/// Which columns hold an object's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Columns {
    /// One column per element of the object's per-example type, in row-major order.
    Values(Vec<String>),
    /// One column of integer class labels 0..classes, one-hot encoded into an object of type
    /// `[classes]`.
    Labels { column: String, classes: usize },
}

/// One object's data: a row of `width` values per example and whether the row has it.
#[derive(Debug, Clone, PartialEq)]
struct ObjectData {
    width: usize,
    values: Vec<f64>,
    present: Vec<bool>,
    /// The class of each row, for label-encoded objects.
    labels: Option<Vec<usize>>,
}

/// A table's rows as data for a diagram's objects.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    origin: String,
    n_rows: usize,
    objects: BTreeMap<String, ObjectData>,
}

fn column(table: &Table, object: &str, name: &str) -> Result<usize, TrainError> {
    table
        .column_index(name)
        .ok_or_else(|| TrainError::UnknownColumn {
            object: object.to_string(),
            column: name.to_string(),
            available: table.columns().join(", "),
        })
}

fn bind(
    table: &Table,
    object: &str,
    ty: &TensorType,
    columns: &Columns,
) -> Result<ObjectData, TrainError> {
    let n = table.n_rows();
    match columns {
        Columns::Values(names) => {
            if names.len() != ty.numel() {
                return Err(TrainError::ColumnCount {
                    object: object.to_string(),
                    expected: ty.numel(),
                    found: names.len(),
                    ty: ty.clone(),
                });
            }
            let idx = names
                .iter()
                .map(|c| column(table, object, c))
                .collect::<Result<Vec<_>, _>>()?;
            let mut values = vec![0.0; n * idx.len()];
            let mut present = vec![false; n];
            for r in 0..n {
                let row = table.row(r);
                if idx.iter().all(|&c| row[c].is_some()) {
                    present[r] = true;
                    for (k, &c) in idx.iter().enumerate() {
                        values[r * idx.len() + k] = row[c].expect("checked");
                    }
                }
            }
            Ok(ObjectData {
                width: idx.len(),
                values,
                present,
                labels: None,
            })
        }
        Columns::Labels {
            column: name,
            classes,
        } => {
            if ty.dims() != [*classes] {
                return Err(TrainError::LabelType {
                    object: object.to_string(),
                    classes: *classes,
                    ty: ty.clone(),
                });
            }
            let c = column(table, object, name)?;
            let mut values = vec![0.0; n * classes];
            let mut present = vec![false; n];
            let mut labels = vec![0; n];
            for r in 0..n {
                let Some(v) = table.row(r)[c] else { continue };
                if v.fract() != 0.0 || v < 0.0 || v >= *classes as f64 {
                    return Err(TrainError::Label {
                        path: table.origin.clone(),
                        line: table.line(r),
                        column: name.clone(),
                        value: v,
                        classes: *classes,
                    });
                }
                let k = v as usize;
                present[r] = true;
                labels[r] = k;
                values[r * classes + k] = 1.0;
            }
            Ok(ObjectData {
                width: *classes,
                values,
                present,
                labels: Some(labels),
            })
        }
    }
}

impl Dataset {
    /// Binds columns of `table` to objects of `diagram`.
    pub fn new(
        table: &Table,
        bindings: &[(String, Columns)],
        diagram: &Diagram,
    ) -> Result<Dataset, TrainError> {
        let mut objects = BTreeMap::new();
        for (object, columns) in bindings {
            let ty = diagram
                .object_type(object)
                .ok_or_else(|| TrainError::UnknownObject {
                    object: object.clone(),
                })?;
            objects.insert(object.clone(), bind(table, object, ty, columns)?);
        }
        Ok(Dataset {
            origin: table.origin.clone(),
            n_rows: table.n_rows(),
            objects,
        })
    }

    /// Where the rows came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Whether the object has columns at all.
    pub fn binds(&self, object: &str) -> bool {
        self.objects.contains_key(object)
    }

    /// Whether row `r` has the object's values.
    pub fn has(&self, object: &str, r: usize) -> bool {
        self.objects.get(object).is_some_and(|o| o.present[r])
    }

    /// The class label of row `r`, for a label-encoded object that row has.
    pub fn label(&self, object: &str, r: usize) -> Option<usize> {
        let o = self.objects.get(object)?;
        Some(o.labels.as_ref()?[r]).filter(|_| o.present[r])
    }

    /// Whether the object is bound to class labels.
    pub fn is_labels(&self, object: &str) -> bool {
        self.objects.get(object).is_some_and(|o| o.labels.is_some())
    }

    /// How many rows have the object.
    pub fn count(&self, object: &str) -> usize {
        self.objects
            .get(object)
            .map_or(0, |o| o.present.iter().filter(|&&p| p).count())
    }

    /// A `[batch, ...]` tensor of the object's values at `rows`, zeros where a row lacks them and
    /// past the end of `rows`.
    pub fn gather(&self, object: &str, ty: &TensorType, rows: &[usize], batch: usize) -> Tensor {
        let o = &self.objects[object];
        let mut data = vec![0.0; batch * o.width];
        for (i, &r) in rows.iter().enumerate() {
            data[i * o.width..(i + 1) * o.width]
                .copy_from_slice(&o.values[r * o.width..(r + 1) * o.width]);
        }
        let ty = crate::diagram::batched(ty, batch);
        Tensor::from_f64s(ty.dtype, ty.shape, data).expect("batch * width values")
    }
}
