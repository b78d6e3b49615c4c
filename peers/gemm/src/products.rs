//! The matrix products of the peer workloads (`peers/bench.py`), as their value-and-grad
//! programs run them: C (m, n) = A (m, k) B (k, n), with A or B read transposed through strides
//! where the program reads a stored matrix transposed.

/// One product. `a_t`: A is stored (k, m) row-major and read transposed; `b_t` likewise for B.
/// `forward`: the eval program runs it too (else only the value-and-grad program does).
#[derive(Debug, Clone)]
pub struct Product {
    pub label: String,
    pub forward: bool,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a_t: bool,
    pub b_t: bool,
}

/// Whether the eval program runs a product, or only the value-and-grad program.
#[derive(Clone, Copy, PartialEq)]
enum Pass {
    Forward,
    Backward,
}
use Pass::{Backward, Forward};

fn product(
    pass: Pass,
    label: String,
    (m, k, n): (usize, usize, usize),
    a_t: bool,
    b_t: bool,
) -> Product {
    Product {
        forward: pass == Forward,
        label,
        m,
        k,
        n,
        a_t,
        b_t,
    }
}

/// A workload's products.
pub struct Workload {
    pub name: &'static str,
    pub products: Vec<Product>,
}

impl Workload {
    pub fn all() -> Vec<Workload> {
        vec![mlp(), tied(), peak()]
    }
}

/// The MLP 784-512-512-10 at batch 256, W stored (out, in): each layer's forward z = h Wᵀ and
/// weight gradient dW = dzᵀ h and input gradient dh = dz W (h0 = x: the workloads' gradients
/// are with respect to every input).
fn mlp() -> Workload {
    let (batch, widths) = (256, [784, 512, 512, 10]);
    let mut products = Vec::new();
    for (l, w) in widths.windows(2).enumerate() {
        let (n_in, n_out) = (w[0], w[1]);
        let layer = l + 1;
        products.push(product(
            Forward,
            format!("z{layer} = h W{layer}ᵀ"),
            (batch, n_in, n_out),
            false,
            true,
        ));
        products.push(product(
            Backward,
            format!("dW{layer} = dzᵀ h"),
            (n_out, batch, n_in),
            true,
            false,
        ));
        products.push(product(
            Backward,
            format!("dh{l} = dz W{layer}"),
            (batch, n_out, n_in),
            false,
            false,
        ));
    }
    Workload {
        name: "mlp",
        products,
    }
}

/// The tied residual block at 256x512: y = X + tanh(X W + b) W + b, W (512, 512). Forward: two
/// products; backward: dW from each use (a transposed left operand) and the two input
/// gradients (W read transposed).
fn tied() -> Workload {
    let (r, d) = (256, 512);
    let products = vec![
        product(Forward, "X W".into(), (r, d, d), false, false),
        product(Forward, "h W".into(), (r, d, d), false, false),
        product(Backward, "dW += hᵀ dy".into(), (d, r, d), true, false),
        product(Backward, "dh = dy Wᵀ".into(), (r, d, d), false, true),
        product(Backward, "dW += Xᵀ da".into(), (d, r, d), true, false),
        product(Backward, "dX = da Wᵀ".into(), (r, d, d), false, true),
    ];
    Workload {
        name: "tied_residual",
        products,
    }
}

/// A large square product: the machine's practical peak.
fn peak() -> Workload {
    Workload {
        name: "peak",
        products: vec![product(
            Forward,
            "square".into(),
            (2048, 2048, 2048),
            false,
            false,
        )],
    }
}
