//! The `catml._catml` extension module: values and primitives, tracing, programs and their
//! derivatives, module files. The `catml` Python package builds its API on these.

mod array;
mod compiled;
mod errors;
mod load;
mod program;
mod pytree;
mod trace;
mod train;
mod value;

use pyo3::prelude::*;

#[pymodule]
fn _catml(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<value::PyValue>()?;
    m.add_class::<program::PyProgram>()?;
    m.add_class::<compiled::Compiled>()?;
    m.add_class::<compiled::Stage>()?;
    m.add_function(wrap_pyfunction!(pytree::tree_flatten, m)?)?;
    m.add_function(wrap_pyfunction!(pytree::tree_unflatten, m)?)?;
    m.add_function(wrap_pyfunction!(value::apply, m)?)?;
    m.add_function(wrap_pyfunction!(value::constant, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace, m)?)?;
    m.add_function(wrap_pyfunction!(load::load, m)?)?;
    m.add_function(wrap_pyfunction!(train::train, m)?)?;
    m.add("_input_address", wrap_pyfunction!(array::input_address, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
