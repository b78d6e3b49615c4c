//! The triangle objective's convenience (docs/examples.md): the gradients of the triangle loss
//! L = ½‖h(x) − g(f(x))‖².

use super::arrow::per_example;
use super::{arrow_params, Arrow, Batch, Diagram, DiagramError, Equation, Path};
use crate::tensor::{Params, Tensor, TensorType};

/// `(loss, h_grads, f_grads, g_grads)`, each arrow's gradients under its own parameter names.
pub type TriangleGradients = (f64, Params, Params, Params);

/// L(x) = ½ Σ_rows ‖h(x) − g(f(x))‖² for `direct` h: E -> D, `left` f: E -> S and `right`
/// g: S -> D on a batch `x` of E, and the gradient of L for each arrow's parameters. The
/// residual r = h(x) − g(f(x)) flows back through h; −r flows back through g, then f.
///
/// The arrows' objects are declared from their programs' types; mismatched ends are the
/// diagram's usual errors.
pub fn triangle_gradients(
    direct: &Arrow,
    left: &Arrow,
    right: &Arrow,
    x: &Tensor,
) -> Result<TriangleGradients, DiagramError> {
    let mut d = Diagram::new();
    for a in [left, right, direct] {
        for (object, ty) in [
            (a.source(), a.input_type().clone()),
            (a.target(), a.output_type()),
        ] {
            if d.object_type(object).is_none() {
                d.object(object, per_example(&ty))?;
            }
        }
    }
    for a in [direct, left, right] {
        d.arrow(a.clone())?;
    }
    d.equation(Equation::new(
        "triangle",
        Path::of([direct.name()]),
        Path::of([left.name(), right.name()]),
    ))?;
    let compiled = d.compile()?;
    let batch = compiled.batch();
    let mut b = Batch::default();
    b.objects.insert(left.source().to_string(), x.clone());
    b.weights.insert(
        "triangle".to_string(),
        Tensor::full(&TensorType::new(compiled.dtype(), [batch]), 1.0),
    );
    let (losses, grads) = compiled.gradients(&d.params(), &b)?;
    Ok((
        losses.total,
        arrow_params(&grads, direct.name()),
        arrow_params(&grads, left.name()),
        arrow_params(&grads, right.name()),
    ))
}
