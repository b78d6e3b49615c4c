//! Printing tensors: `Display` as nested rows under the type, `Debug` on one line; both show
//! every element of a tensor of at most [`SUMMARY_THRESHOLD`] elements and otherwise only the
//! first and last [`EDGE_ITEMS`] entries of each axis, with `...` between (NumPy's summary).

use std::fmt::{self, Write};

use super::{Array, Stored, Tensor};

/// Tensors with more elements than this are summarised.
pub const SUMMARY_THRESHOLD: usize = 1000;
/// Entries kept at each end of a summarised axis.
pub const EDGE_ITEMS: usize = 3;

/// How the nested body is laid out.
struct Layout {
    summarise: bool,
    /// `Some(indent)`: one row per line, continuation lines indented by `indent` spaces.
    multiline: Option<usize>,
}

/// Writes `data` (row-major under `dims`) as nested brackets.
fn write_body<T>(
    out: &mut String,
    dims: &[usize],
    data: &[T],
    layout: &Layout,
    element: &dyn Fn(&mut String, &T),
) {
    if dims.is_empty() {
        element(out, &data[0]);
        return;
    }
    let n = dims[0];
    let stride: usize = dims[1..].iter().product();
    let elided = layout.summarise && n > 2 * EDGE_ITEMS;
    let shown: Vec<Option<usize>> = if elided {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain([None])
            .chain((n - EDGE_ITEMS..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    };
    // Rows of a matrix go on their own lines; blocks of higher rank get a blank line between.
    let separator = match layout.multiline {
        Some(indent) if dims.len() > 1 => {
            let depth = indent + 1;
            let blank = "\n".repeat(dims.len() - 1);
            format!(",{blank}{}", " ".repeat(depth))
        }
        _ => ", ".to_string(),
    };
    out.push('[');
    for (k, i) in shown.iter().enumerate() {
        if k > 0 {
            out.push_str(&separator);
        }
        match i {
            None => out.push_str("..."),
            Some(i) => {
                let inner = Layout {
                    summarise: layout.summarise,
                    multiline: layout.multiline.map(|d| d + 1),
                };
                let slice = &data[i * stride..(i + 1) * stride];
                write_body(out, &dims[1..], slice, &inner, element);
            }
        }
    }
    out.push(']');
}

/// The body of an array, under the formatter's precision (`{:.3}`) if one is given.
fn body<T: Clone + fmt::Debug>(
    a: &Array<T>,
    f: &fmt::Formatter<'_>,
    multiline: Option<usize>,
) -> String {
    let layout = Layout {
        summarise: a.len() > SUMMARY_THRESHOLD && !(multiline.is_none() && f.alternate()),
        multiline,
    };
    let precision = f.precision();
    let element = |out: &mut String, x: &T| {
        let _ = match precision {
            Some(p) => write!(out, "{x:.p$?}"),
            None => write!(out, "{x:?}"),
        };
    };
    let mut out = String::new();
    write_body(&mut out, a.dims(), a.data(), &layout, &element);
    out
}

fn type_prefix(t: &Tensor) -> String {
    t.ty().to_string()
}

/// `f64[2, 3] [[1.0, 2.0, 3.0],` then `[4.0, 5.0, 6.0]]` aligned under the first row.
///
/// ```
/// use catml_core::tensor::Tensor;
/// let t = Tensor::f64([2, 2], vec![1.0, 2.0, 3.0, 4.5]).unwrap();
/// assert_eq!(t.to_string(), "f64[2, 2] [[1.0, 2.0],\n           [3.0, 4.5]]");
/// let big = Tensor::f64([100, 100], (0..10_000).map(f64::from).collect()).unwrap();
/// assert!(big.to_string().lines().count() < 10);
/// ```
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = type_prefix(self);
        let indent = Some(prefix.chars().count() + 1);
        let b = match self {
            Tensor::F32(a) => body(a, f, indent),
            Tensor::F64(a) => body(a, f, indent),
            Tensor::I64(a) => body(a, f, indent),
            Tensor::Bool(a) => body(a, f, indent),
            Tensor::Stored(st) => stored_body(st, f, indent),
        };
        write!(f, "{prefix} {b}")
    }
}

/// One line: `f64[2, 2] [[1.0, 2.0], [3.0, 4.5]]`, summarised above [`SUMMARY_THRESHOLD`]
/// elements; `{:#?}` writes every element.
impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = match self {
            Tensor::F32(a) => body(a, f, None),
            Tensor::F64(a) => body(a, f, None),
            Tensor::I64(a) => body(a, f, None),
            Tensor::Bool(a) => body(a, f, None),
            Tensor::Stored(st) => stored_body(st, f, None),
        };
        write!(f, "{} {b}", type_prefix(self))
    }
}

/// The body of a storage-dtype tensor: floats as f32 values, integers as themselves.
fn stored_body(st: &Stored, f: &fmt::Formatter<'_>, indent: Option<usize>) -> String {
    match st {
        Stored::U64(a) => body(a, f, indent),
        _ if st.dtype().is_floating_point() => {
            let v: Vec<_> = st.to_f64_vec().iter().map(|&x| x as f32).collect();
            body(&Array::from_parts(st.shape().clone(), v), f, indent)
        }
        _ => {
            let v: Vec<_> = st.to_f64_vec().iter().map(|&x| x as i64).collect();
            body(&Array::from_parts(st.shape().clone(), v), f, indent)
        }
    }
}

/// As [`Tensor`]'s `Debug`, under the shape: `Array[2, 2] [[1.0, 2.0], [3.0, 4.5]]`.
impl<T: Clone + fmt::Debug> fmt::Debug for Array<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Array{} {}", self.shape(), body(self, f, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        Tensor::f64(dims.to_vec(), (0..n).map(|i| i as f64).collect()).unwrap()
    }

    #[test]
    fn small_tensors_show_every_element() {
        assert_eq!(
            format!("{:?}", counting(&[2, 3])),
            "f64[2, 3] [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]"
        );
        assert_eq!(counting(&[]).to_string(), "f64[] 0.0");
        let i = Tensor::i64([3], vec![1, -2, 3]).unwrap();
        assert_eq!(i.to_string(), "i64[3] [1, -2, 3]");
        let b = Tensor::bool([2, 2], vec![true, false, false, true]).unwrap();
        assert_eq!(
            b.to_string(),
            "bool[2, 2] [[true, false],\n            [false, true]]"
        );
        let blocks = counting(&[2, 2, 1]).to_string();
        assert_eq!(blocks, "f64[2, 2, 1] [[[0.0],\n               [1.0]],\n\n              [[2.0],\n               [3.0]]]");
    }

    #[test]
    fn precision_applies_to_each_element() {
        let t = Tensor::f32([2], vec![1.0 / 3.0, 2.5]).unwrap();
        assert_eq!(format!("{t:.2}"), "f32[2] [0.33, 2.50]");
    }

    #[test]
    fn large_tensors_show_three_entries_at_each_end_of_each_axis() {
        let t = counting(&[100, 100]);
        let debug = format!("{t:?}");
        assert!(debug.len() < 400, "{debug}");
        assert!(debug.starts_with("f64[100, 100] [[0.0, 1.0, 2.0, ..., 97.0, 98.0, 99.0], [100.0,"));
        assert!(debug.ends_with("..., 9997.0, 9998.0, 9999.0]]"), "{debug}");
        assert_eq!(debug.matches("...").count(), 7); // one per row shown, one for the rows
        let display = t.to_string();
        assert_eq!(display.lines().count(), 7);
        assert_eq!(display.lines().nth(3).unwrap().trim(), "...,");
        // The alternate form keeps everything, for when every number matters.
        assert_eq!(format!("{t:#?}").matches(", ").count(), 1 + 9999); // the type, then the data
    }

    #[test]
    fn a_long_vector_below_the_threshold_is_not_cut() {
        let t = counting(&[1000]);
        assert!(!format!("{t:?}").contains("..."));
        assert!(format!("{:?}", counting(&[1001])).contains("..."));
    }
}
