//! import(export(p)) evaluates as p: hand-written programs and the generator's random programs,
//! with their reverse- and forward-mode programs, in f32 and f64.

use std::collections::BTreeMap;

use catml_core::ad;
use catml_core::interp;
use catml_core::ir::{InputKind, Program};
use catml_core::tensor::{DType, Params, Tensor};
use catml_onnx::{
    decode_model, export, export_jvp, export_vjp, import, ExportOptions, Exported, Shapes,
    NOT_EXPORTED,
};
use catml_verify::verify::generate::{generate, random_inputs, GenConfig};
use prost::Message;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How far an imported program may lie from the original: none where the operators are the
/// same; where the importer composes what the exporter wrote as one operator (LayerNormalization,
/// Gemm with a bias, ...) the rounding differs.
fn tolerance(p: &Program) -> f64 {
    let f32_inside = p.inputs().iter().any(|i| i.ty.dtype == DType::F32)
        || p.nodes().iter().any(|n| n.ty.dtype == DType::F32);
    if f32_inside {
        1e-4
    } else {
        1e-11
    }
}

#[derive(Default)]
struct Tally {
    outputs: usize,
    bitwise: usize,
    worst: f64,
    lowered: std::collections::BTreeSet<String>,
}

/// Evaluates the exported model after import, on the named values, against `want`.
fn check(
    e: &Exported,
    tol: f64,
    named: &BTreeMap<String, Tensor>,
    want: &[Tensor],
    what: &str,
    t: &mut Tally,
) {
    let bytes = e.model.encode_to_vec();
    let model = decode_model(&bytes).unwrap_or_else(|err| panic!("{what}: decode: {err}"));
    let imp = import(&model, &Shapes::new(), None).unwrap_or_else(|err| {
        if std::env::var("EXPORT_DEBUG").is_ok() {
            for (i, n) in model.graph.as_ref().unwrap().node.iter().enumerate() {
                eprintln!(
                    "{i}: {} {:?} -> {:?} {:?}",
                    n.op_type,
                    n.input,
                    n.output,
                    n.attribute
                        .iter()
                        .map(|a| (
                            &a.name,
                            a.i,
                            &a.ints,
                            a.t.as_ref().map(|t| (t.data_type, &t.dims))
                        ))
                        .collect::<Vec<_>>()
                );
            }
        }
        panic!("{what}: import: {err}")
    });
    let args: Vec<Tensor> = imp
        .program
        .inputs()
        .iter()
        .map(|i| {
            named
                .get(&i.name)
                .cloned()
                .unwrap_or_else(|| panic!("{what}: no value for imported input `{}`", i.name))
        })
        .collect();
    let got = interp::eval(&imp.program, &args).unwrap_or_else(|err| panic!("{what}: eval: {err}"));
    assert_eq!(got.len(), want.len(), "{what}: output count");
    let names: Vec<&str> = e
        .model
        .graph
        .as_ref()
        .unwrap()
        .output
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(imp.outputs, names, "{what}: output names");
    for (k, n) in e.lowered.keys().enumerate() {
        let _ = k;
        t.lowered.insert(n.clone());
    }
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.ty(), w.ty(), "{what}: output {k} type");
        t.outputs += 1;
        if g == w {
            t.bitwise += 1;
            continue;
        }
        let scale = 1.0 + w.to_f64_vec().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let d = g.max_abs_diff(w) / scale;
        t.worst = t.worst.max(d / tol);
        assert!(
            d <= tol,
            "{what}: output {k} differs by {d:e} (normwise)\n{g:?}\n{w:?}"
        );
    }
}

/// The program, its VJP and its JVP, exported, imported and evaluated.
fn round_trip(p: &Program, x: &[Tensor], what: &str, t: &mut Tally) {
    let mut named: BTreeMap<String, Tensor> = BTreeMap::new();
    let mut params = Params::new();
    for (i, v) in p.inputs().iter().zip(x) {
        named.insert(i.name.clone(), v.clone());
        if i.kind == InputKind::Param {
            params.insert(i.name.clone(), v.clone());
        }
    }
    let opts = ExportOptions::default();
    let want = interp::eval(p, x).unwrap();
    let e = export(p, &params, &opts).unwrap_or_else(|err| panic!("{what}: export: {err}"));
    check(&e, tolerance(p), &named, &want, what, t);

    let v = ad::vjp(p).unwrap();
    let mut vn = named.clone();
    let mut vx = x.to_vec();
    for (k, ty) in p.output_types().iter().enumerate() {
        let s = Tensor::from_f64s(
            ty.dtype,
            ty.shape.clone(),
            (0..ty.numel())
                .map(|j| 0.5 + 0.25 * ((j + k) % 3) as f64)
                .collect(),
        )
        .unwrap();
        vn.insert(format!("seed.{k}"), s.clone());
        vx.push(s);
    }
    let want = interp::eval(&v.program, &vx).unwrap();
    let e = export_vjp(p, &params, &opts).unwrap_or_else(|err| panic!("{what} vjp: export: {err}"));
    check(&e, tolerance(p), &vn, &want, &format!("{what} vjp"), t);

    let j = ad::jvp(p).unwrap();
    let mut jn = named;
    let mut jx = x.to_vec();
    for s in &j.layout.tangent_inputs {
        let ty = &p.inputs()[s.input].ty;
        let d = Tensor::from_f64s(
            ty.dtype,
            ty.shape.clone(),
            (0..ty.numel())
                .map(|k| 1.0 - 0.125 * (k % 5) as f64)
                .collect(),
        )
        .unwrap();
        jn.insert(format!("tangent.{}", s.name), d.clone());
        jx.push(d);
    }
    let want = interp::eval(&j.program, &jx).unwrap();
    let e = export_jvp(p, &params, &opts).unwrap_or_else(|err| panic!("{what} jvp: export: {err}"));
    check(&e, tolerance(p), &jn, &want, &format!("{what} jvp"), t);
}

#[test]
fn generated_programs_round_trip_with_their_derivatives() {
    let prims: Vec<String> = GenConfig::default()
        .prims
        .into_iter()
        .filter(|n| !NOT_EXPORTED.contains(&n.as_str()))
        .collect();
    let mut t = Tally::default();
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    for k in 0..1000 {
        let dtype = if k % 2 == 0 { DType::F64 } else { DType::F32 };
        let cfg = GenConfig {
            n_nodes: rng.random_range(2..=16),
            dtype,
            prims: prims.clone(),
            ..GenConfig::default()
        };
        let seed = rng.random::<u64>();
        let p = generate(&cfg, seed).unwrap();
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let x = random_inputs(&p, &mut r);
        round_trip(
            &p,
            &x,
            &format!("program {k} (seed {seed}, {dtype})"),
            &mut t,
        );
    }
    eprintln!(
        "round trip: {} outputs, {} bitwise, worst {:.3} of the tolerance",
        t.outputs, t.bitwise, t.worst
    );
    eprintln!("lowered: {:?}", t.lowered);
    eprintln!(
        "not drawn: {:?}",
        catml_verify::verify::generate::uncovered(catml_core::prim::builtins())
    );
    assert!(t.bitwise * 2 > t.outputs, "most outputs are bitwise equal");
}
