//! The workloads timed against the peers (peers/bench.py): the tied residual block
//! (docs/examples.md) and a 784-512-512-10 tanh MLP, in f32 and f64, as eval and as
//! value-and-grad (L = sum of the outputs, so every seed is ones; gradients with respect to every
//! input). Each program is compiled once into an `Executable`, as a user evaluating it many times
//! would; `*_interpreted` runs the interpreter instead, for comparison.
//!
//! Shared by `benches/ad.rs` (criterion) and `examples/peer_timings.rs` (JSON lines).

use catml::ad;
use catml::interp::{eval_with_options, EvalOptions, Executable};
use catml::ir::{Builder, InputKind, Program};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub struct Workload {
    pub workload: &'static str,
    pub size: String,
    pub dtype: DType,
    pub program: Program,
    pub inputs: Vec<Tensor>,
    /// The VJP program and its arguments: the inputs, then all-ones seeds.
    pub vjp: Program,
    pub vjp_args: Vec<Tensor>,
    /// `program` and `vjp`, compiled.
    pub compiled: [Executable; 2],
}

impl Workload {
    fn new(
        workload: &'static str,
        size: String,
        dtype: DType,
        program: Program,
        inputs: Vec<Tensor>,
    ) -> Workload {
        let vjp = ad::vjp(&program).expect("differentiable").program;
        let mut vjp_args = inputs.clone();
        vjp_args.extend(program.output_types().iter().map(|t| Tensor::full(t, 1.0)));
        let compiled = [program.clone(), vjp.clone()].map(|p| Executable::new(p).expect("plans"));
        Workload {
            compiled,
            workload,
            size,
            dtype,
            program,
            inputs,
            vjp,
            vjp_args,
        }
    }

    /// Evaluates into `results`, which held the previous call's results: their buffers serve
    /// this call (`Executable::run_into`), the steady state of a program called repeatedly.
    pub fn eval_into(&self, options: EvalOptions, results: &mut Vec<Tensor>) {
        self.compiled[0]
            .run_into(&self.inputs, options, results)
            .expect("evaluates")
    }

    /// The VJP program on `vjp_args` into `results`, as `eval_into`.
    pub fn value_and_grad_into(&self, options: EvalOptions, results: &mut Vec<Tensor>) {
        self.compiled[1]
            .run_into(&self.vjp_args, options, results)
            .expect("evaluates")
    }

    pub fn eval_interpreted(&self, options: EvalOptions) -> Vec<Tensor> {
        eval_with_options(&self.program, &self.inputs, options).expect("evaluates")
    }

    pub fn value_and_grad_interpreted(&self, options: EvalOptions) -> Vec<Tensor> {
        eval_with_options(&self.vjp, &self.vjp_args, options).expect("evaluates")
    }

    pub fn dtype_str(&self) -> &'static str {
        self.dtype.as_str()
    }
}

/// Standard normal draws (Box-Muller) times `scale`, as a tensor of `dtype`.
fn normal(rng: &mut ChaCha8Rng, dtype: DType, dims: &[usize], scale: f64) -> Tensor {
    let n: usize = dims.iter().product();
    let data = (0..n)
        .map(|_| {
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random::<f64>();
            scale * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        })
        .collect();
    Tensor::from_f64s(dtype, dims.to_vec(), data).expect("sized")
}

/// A = X W + b, H = tanh A, Y = X + H W + b with one W and one b, each used twice: the program
/// alone, inputs X, W, b in that order.
pub fn tied_residual_program(rows: usize, d: usize, dtype: DType) -> Program {
    let ty = |dims: &[usize]| TensorType::new(dtype, dims.to_vec());
    let mut b = Builder::new();
    let x = b.input("X", ty(&[rows, d]), InputKind::Data).unwrap();
    let w = b.input("W", ty(&[d, d]), InputKind::Param).unwrap();
    let bias = b.input("b", ty(&[d]), InputKind::Param).unwrap();
    let bb = b.broadcast_rows(bias, rows).unwrap();
    let xw = b.matmul(x, w).unwrap();
    let a = b.add(xw, bb).unwrap();
    let h = b.tanh(a).unwrap();
    let hw = b.matmul(h, w).unwrap();
    let hwb = b.add(hw, bb).unwrap();
    let y = b.add(x, hwb).unwrap();
    b.finish(&[y]).unwrap()
}

/// The tied residual block on standard normal X and b, and W scaled by 1/√d.
pub fn tied_residual(rows: usize, d: usize, dtype: DType) -> Workload {
    let p = tied_residual_program(rows, d, dtype);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let inputs = vec![
        normal(&mut rng, dtype, &[rows, d], 1.0),
        normal(&mut rng, dtype, &[d, d], 1.0 / (d as f64).sqrt()),
        normal(&mut rng, dtype, &[d], 1.0),
    ];
    Workload::new("tied_residual", format!("{rows}x{d}"), dtype, p, inputs)
}

pub const MLP_LAYERS: [usize; 4] = [784, 512, 512, 10];
pub const MLP_BATCH: usize = 256;

/// h1 = tanh(linear(x, W1, b1)), h2 = tanh(linear(h1, W2, b2)), y = linear(h2, W3, b3),
/// with each W of shape (out, in): the program alone, as tracing builds it.
pub fn mlp_program(dtype: DType) -> Program {
    let ty = |dims: &[usize]| TensorType::new(dtype, dims.to_vec());
    let mut b = Builder::new();
    let mut h = b
        .input("x", ty(&[MLP_BATCH, MLP_LAYERS[0]]), InputKind::Data)
        .unwrap();
    let n_layers = MLP_LAYERS.len() - 1;
    for (l, pair) in MLP_LAYERS.windows(2).enumerate() {
        let (n_in, n_out) = (pair[0], pair[1]);
        let w = b
            .input(&format!("W{}", l + 1), ty(&[n_out, n_in]), InputKind::Param)
            .unwrap();
        let bias = b
            .input(&format!("b{}", l + 1), ty(&[n_out]), InputKind::Param)
            .unwrap();
        let z = b.linear(h, w, bias).unwrap();
        h = if l + 1 < n_layers {
            b.tanh(z).unwrap()
        } else {
            z
        };
    }
    b.finish(&[h]).unwrap()
}

/// The MLP with inputs: x standard normal, each W normal with scale 1/sqrt(fan-in), each b
/// standard normal.
pub fn mlp(dtype: DType) -> Workload {
    let p = mlp_program(dtype);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut inputs = vec![normal(&mut rng, dtype, &[MLP_BATCH, MLP_LAYERS[0]], 1.0)];
    for pair in MLP_LAYERS.windows(2) {
        let (n_in, n_out) = (pair[0], pair[1]);
        inputs.push(normal(
            &mut rng,
            dtype,
            &[n_out, n_in],
            1.0 / (n_in as f64).sqrt(),
        ));
        inputs.push(normal(&mut rng, dtype, &[n_out], 1.0));
    }
    let size = format!(
        "{}/{MLP_BATCH}",
        MLP_LAYERS.map(|n| n.to_string()).join("-")
    );
    Workload::new("mlp", size, dtype, p, inputs)
}

/// One step of Adam on `n` parameters: m' = 0.9 m + 0.1 g, v' = 0.999 v + 0.001 g²,
/// p' = p - 0.01 m' / (sqrt(v') + 1e-8), and beside it relu(g) g; outputs p', m', v' and
/// relu(g) g. Elementwise chains only: what fused passes are for.
pub fn adam_step_program(dtype: DType, n: usize) -> Program {
    let ty = TensorType::new(dtype, [n]);
    let mut b = Builder::new();
    let [p, g, m, v] =
        ["p", "g", "m", "v"].map(|s| b.input(s, ty.clone(), InputKind::Data).unwrap());
    let m_decayed = b.scale(m, 0.9).unwrap();
    let g_part = b.scale(g, 0.1).unwrap();
    let m2 = b.add(m_decayed, g_part).unwrap();
    let v_decayed = b.scale(v, 0.999).unwrap();
    let g2 = b.square(g).unwrap();
    let g2_part = b.scale(g2, 0.001).unwrap();
    let v2 = b.add(v_decayed, g2_part).unwrap();
    let root = b.sqrt(v2).unwrap();
    let eps = b.full_like(1e-8, root).unwrap();
    let denom = b.add(root, eps).unwrap();
    let ratio = b.div(m2, denom).unwrap();
    let step = b.scale(ratio, 0.01).unwrap();
    let p2 = b.sub(p, step).unwrap();
    let r = b.relu(g).unwrap();
    let rg = b.mul(r, g).unwrap();
    b.finish(&[p2, m2, v2, rg]).unwrap()
}

/// The Adam step on `n` parameters with standard normal p, g and m, and v = m².
pub fn adam_step(dtype: DType, n: usize) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let [p, g, m] = [0; 3].map(|_| normal(&mut rng, dtype, &[n], 1.0));
    let v = Tensor::from_f64s(
        dtype,
        vec![n],
        m.to_f64_vec().iter().map(|x| x * x).collect(),
    )
    .unwrap();
    Workload::new(
        "adam_step",
        n.to_string(),
        dtype,
        adam_step_program(dtype, n),
        vec![p, g, m, v],
    )
}

/// Every workload of the peer table, in its order.
pub fn all() -> Vec<Workload> {
    let mut out = Vec::new();
    for (rows, d) in [(2, 3), (256, 512)] {
        for dtype in [DType::F32, DType::F64] {
            out.push(tied_residual(rows, d, dtype));
        }
    }
    for dtype in [DType::F32, DType::F64] {
        out.push(mlp(dtype));
    }
    out
}
