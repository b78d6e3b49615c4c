//! The tied residual block (docs/examples.md), traced from Rust: A = XW + b, H = tanh A,
//! Y = X + HW + b, with one W and one b each used twice and the bias broadcast explicitly
//! (B = 2, d = 3, f64). The traced program is compared with `modules/tied_residual.json` up to
//! names, and both are evaluated on `modules/tied_residual.inputs.json`.
//!
//! `cargo run -p catml --example tied_residual`

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use catml::interp;
use catml::ir::{json, structural_difference, Program};
use catml::nn::{param, seeded, ChaCha8Rng, Init};
use catml::tensor::{DType, Tensor, TensorType};
use catml::trace::{trace_named, TraceError, Value};

fn tied_block(x: &Value, rng: &mut ChaCha8Rng) -> Result<Value, TraceError> {
    let t = x.ty()?;
    let (rows, d) = (t.dims()[0], t.dims()[1]);
    let w = param("W", &TensorType::new(t.dtype, [d, d]), Init::Glorot, rng);
    let b = param("b", &TensorType::new(t.dtype, [d]), Init::Zeros, rng);
    let bb = b.broadcast_rows(rows); // one broadcast, read twice
    let a = x.matmul(&w) + &bb;
    let h = a.tanh();
    Ok(x + (h.matmul(&w) + &bb))
}

fn modules() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../modules")
}

/// `name = op(operands)` of node `i`.
fn node_text(p: &Program, i: usize) -> String {
    let n = &p.nodes()[i];
    let operands: Vec<&str> = n.operands.iter().map(|&o| p.name(o)).collect();
    format!("{} = {}({})", n.name, n.prim.name(), operands.join(", "))
}

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let x = TensorType::new(DType::F64, [2, 3]);
    let traced = trace_named(&[("X", x)], |v| tied_block(&v[0], &mut seeded(0)))?;
    println!(
        "traced program as LensIR JSON:\n{}",
        json::to_string(&traced.program)
    );

    let text = std::fs::read_to_string(modules().join("tied_residual.json"))?;
    let module = json::from_str(&text, catml::prim::builtins())?;
    println!("\n{:<32} modules/tied_residual.json", "traced");
    for i in 0..traced.program.n_nodes().max(module.n_nodes()) {
        let left = (i < traced.program.n_nodes()).then(|| node_text(&traced.program, i));
        let right = (i < module.n_nodes()).then(|| node_text(&module, i));
        println!(
            "{:<32} {}",
            left.unwrap_or_default(),
            right.unwrap_or_default()
        );
    }
    let difference = structural_difference(&traced.program, &module);
    match &difference {
        None => println!(
            "\nstructure: equal up to names (ops, wiring, attributes, input types and kinds)"
        ),
        Some(d) => println!("\nstructure: different: {d}"),
    }

    let inputs: BTreeMap<String, Tensor> = serde_json::from_str(&std::fs::read_to_string(
        modules().join("tied_residual.inputs.json"),
    )?)?;
    let expected = interp::eval_named(&module, &inputs)?;
    let ordered: Vec<Tensor> = ["X", "W", "b"].iter().map(|n| inputs[*n].clone()).collect();
    let got = interp::eval(&traced.program, &ordered)?;
    let same_values = got == expected;
    println!(
        "values on tied_residual.inputs.json: {}",
        if same_values {
            "identical"
        } else {
            "different"
        }
    );
    println!("Y = {:?}", got[0].to_f64_vec());

    Ok(if difference.is_none() && same_values {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
