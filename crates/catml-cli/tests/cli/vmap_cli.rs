//! `catml print --vmap IN_AXES --vmap-size N`: the batched program, read back and evaluated
//! against a loop; bad specs fail in one line.

use std::path::{Path, PathBuf};
use std::process::Command;

use catml::interp;
use catml::ir::listing;
use catml::tensor::{DType, Tensor, TensorType};
use catml::verify::vmap::{slice_at, stack_at};

fn module() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules/tied_residual.json")
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(args)
        .arg(module())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn print_vmap_batches_x_and_shares_the_parameters() {
    let (code, text, err) = run(&["print", "--vmap", "1,none,none", "--vmap-size", "4"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let q = listing::parse(&text, catml::prim::builtins()).unwrap();
    assert_eq!(q.inputs()[0].ty.dims(), [2, 4, 3]);
    let p = catml::train::read_module(&module()).unwrap();
    let ramp = |ty: TensorType, k: f64| {
        let n = ty.numel();
        Tensor::from_f64s(
            ty.dtype,
            ty.shape,
            (0..n).map(|i| ((i as f64) * k).sin()).collect(),
        )
        .unwrap()
    };
    let xs: Vec<Tensor> = (0..4)
        .map(|i| ramp(TensorType::new(DType::F64, [2, 3]), 0.3 + i as f64))
        .collect();
    let w = ramp(TensorType::new(DType::F64, [3, 3]), 0.7);
    let b = ramp(TensorType::new(DType::F64, [3]), 1.1);
    let got = interp::eval(&q, &[stack_at(&xs, 1), w.clone(), b.clone()]).unwrap();
    for (i, x) in xs.iter().enumerate() {
        let want = interp::eval(&p, &[x.clone(), w.clone(), b.clone()]).unwrap();
        assert_eq!(slice_at(&got[0], 0, i), want[0]);
    }
}

#[test]
fn bad_vmap_specs_fail_in_one_line() {
    for (spec, message) in [
        ("0,zero,none", "--vmap `0,zero,none`: entry 1 `zero` is neither a non-negative axis nor `none`"),
        ("0,none", "--vmap `0,none`: input axes: 2 given, the program has 3 inputs"),
        ("3,none,none", "--vmap `3,none,none`: input `X`: batch axis 3 is out of range for its rank 2 (at most 2)"),
        ("none,none,none", "--vmap `none,none,none`: no input is batched: give at least one input an axis"),
    ] {
        let (code, out, err) = run(&["print", "--vmap", spec, "--vmap-size", "2"]);
        assert_eq!(code, Some(1), "{spec}");
        assert_eq!(out, "");
        let line = err.strip_prefix("catml: ").unwrap().trim_end();
        assert!(line.ends_with(message), "{spec}: {line}");
        assert_eq!(err.lines().count(), 1);
    }
}
