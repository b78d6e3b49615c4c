//! Tensors: dtypes, shapes, contiguous row-major buffers and the kernels that compute on them.
//!
//! `tensor` knows nothing of programs. Every array here is dense and row-major; a shape's
//! dimensions are positive and the empty shape is a scalar.

pub mod alloc;
mod array;
mod buffer;
pub mod checked;
mod convert;
mod display;
mod dtype;
mod e8m0;
mod elems;
pub mod fastmath;
mod float8;
mod json;
pub mod kernels;
mod params;
mod params_math;
mod pool;
mod rational;
mod shape;
mod shared_buffers;
mod stored;

pub use array::{Array, Tensor, TensorError};
pub use buffer::Lent;
pub use display::{EDGE_ITEMS, SUMMARY_THRESHOLD};
pub use dtype::{DType, Element, Float, ALL_DTYPES};
pub use params::{write_atomic, Params, ParamsError};
pub use params_math::ParamsMismatch;
pub use pool::BufferPool;
pub use rational::{rational_from_f64, rational_to_f64, RArray, Rational};
pub use shape::{keeps_last_axis, keeps_last_axis_in_matrix, Shape, Strides, TensorType};
pub use stored::Stored;
