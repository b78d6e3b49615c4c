//! A compiled `Executable` gives the interpreter's results bit for bit, call after call, while
//! reusing the buffers of earlier calls (docs/memory.md); it never lets a reused buffer alias
//! a value the caller holds.

use catml::interp::{self, EvalError, EvalOptions, Executable};
use catml::ir::{Builder, InputKind, Program};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};

/// y = tanh(x W + b) . x, and the VJP of its sum: broadcasts, products, elementwise chains.
fn block(dtype: DType) -> (Program, Vec<Tensor>) {
    let ty = |dims: &[usize]| TensorType::new(dtype, dims.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[8, 16]), InputKind::Data).unwrap();
    let w = b.input("w", ty(&[16, 16]), InputKind::Param).unwrap();
    let bias = b.input("b", ty(&[16]), InputKind::Param).unwrap();
    let xw = b.matmul(x, w).unwrap();
    let bb = b.broadcast_rows(bias, 8).unwrap();
    let a = b.add(xw, bb).unwrap();
    let h = b.tanh(a).unwrap();
    let y = b.mul(h, x).unwrap();
    let p = b.finish(&[y]).unwrap();
    let v = catml::ad::vjp(&p).unwrap().program;
    let value = |n: usize, k: usize| {
        let data = (0..n)
            .map(|i| ((i * 7 + k) % 13) as f64 / 6.5 - 1.0)
            .collect();
        Tensor::from_f64s(dtype, vec![n], data).unwrap()
    };
    let args = vec![
        value(128, 1).reshaped([8, 16].into()),
        value(256, 2).reshaped([16, 16].into()),
        value(16, 3),
        Tensor::full(&ty(&[8, 16]), 1.0),
    ];
    (v, args)
}

#[test]
fn calls_after_the_first_reuse_buffers_and_equal_the_interpreter_bitwise() {
    for dtype in [DType::F32, DType::F64] {
        let (p, args) = block(dtype);
        let want = interp::eval(&p, &args).unwrap();
        let exe = Executable::new(p).unwrap();
        assert_eq!(exe.pooled_bytes(), 0);
        for call in 0..4 {
            let got = exe.run(&args, EvalOptions::default()).unwrap();
            assert_eq!(got, want, "{dtype} call {call}");
            if call == 0 {
                assert!(exe.pooled_bytes() > 0, "values that died were kept");
            }
            exe.recycle(got);
        }
        assert!(exe.pooled_bytes() as u64 <= exe.plan().peak().bytes);
        assert_eq!(
            exe.clone().run(&args, EvalOptions::default()).unwrap(),
            want
        );
    }
}

#[test]
fn reused_buffers_never_alias_the_inputs_or_results_still_held() {
    let (p, args) = block(DType::F64);
    let before: Vec<Vec<f64>> = args.iter().map(Tensor::to_f64_vec).collect();
    let exe = Executable::new(p).unwrap();
    // Results of earlier calls are kept (not recycled): later calls must not write them.
    let first = exe.run(&args, EvalOptions::default()).unwrap();
    let kept: Vec<Vec<f64>> = first.iter().map(Tensor::to_f64_vec).collect();
    for _ in 0..3 {
        let again = exe.run(&args, EvalOptions::default()).unwrap();
        assert_eq!(again, first);
    }
    let now: Vec<Vec<f64>> = first.iter().map(Tensor::to_f64_vec).collect();
    assert_eq!(now, kept, "results held by the caller are untouched");
    let after: Vec<Vec<f64>> = args.iter().map(Tensor::to_f64_vec).collect();
    assert_eq!(after, before, "the inputs are untouched");
}

#[test]
fn errors_leave_the_executable_usable_and_threads_may_share_it() {
    let ty = TensorType::new(DType::F64, [3]);
    let mut b = Builder::new();
    let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let l = b.log(x).unwrap();
    let e = b.exp(l).unwrap();
    let exe = Executable::new(b.finish(&[e]).unwrap()).unwrap();
    let good = Tensor::f64([3], vec![1.0, 2.0, 3.0]).unwrap();
    let bad = Tensor::f64([3], vec![1.0, -2.0, 3.0]).unwrap();
    let want = exe
        .run(std::slice::from_ref(&good), EvalOptions::default())
        .unwrap();
    let err = exe.run(&[bad], EvalOptions::default()).unwrap_err();
    assert!(
        matches!(err, EvalError::Kernel { index: 0, .. }),
        "the log node is named: {err}"
    );
    assert_eq!(
        exe.run(std::slice::from_ref(&good), EvalOptions::default())
            .unwrap(),
        want
    );
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    exe.run(std::slice::from_ref(&good), EvalOptions::default())
                        .unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), want);
        }
    });
}

#[test]
fn an_executable_checks_its_budget_on_every_call() {
    let (p, args) = block(DType::F64);
    let exe = Executable::new(p).unwrap();
    let tight = EvalOptions {
        memory_budget: Some(64),
        ..EvalOptions::default()
    };
    let err = exe.run(&args, tight).unwrap_err();
    assert!(
        matches!(err, EvalError::OverBudget { budget: 64, .. }),
        "{err}"
    );
    assert!(exe.run(&args, EvalOptions::default()).is_ok());
}
