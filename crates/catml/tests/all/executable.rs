//! A compiled `Executable` gives the interpreter's results bit for bit, call after call, while
//! reusing the buffers of earlier calls (docs/memory.md); it never lets a reused buffer alias
//! a value the caller holds.

use catml::interp::{self, EvalError, EvalOptions, EvalPlan, Executable};
use catml::ir::{Builder, InputKind, Program};
use catml::prim::Ops;
use catml::tensor::{DType, Tensor, TensorType};

/// A value of the given dims whose elements, in [-1, 1), depend on `k`.
fn value<const R: usize>(dtype: DType, dims: [usize; R], k: usize) -> Tensor {
    let n = dims.iter().product();
    let data = (0..n)
        .map(|i| ((i * 7 + k) % 13) as f64 / 6.5 - 1.0)
        .collect();
    Tensor::from_f64s(dtype, dims.to_vec(), data).unwrap()
}

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
    let args = vec![
        value(dtype, [8, 16], 1),
        value(dtype, [16, 16], 2),
        value(dtype, [16], 3),
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
            match call {
                0 => assert_eq!(exe.pooled_bytes(), 0, "the first call is traced"),
                _ => assert!(exe.pooled_bytes() > 0, "values that died were kept"),
            }
            exe.recycle(got);
        }
        let shared = exe.shared_bytes().expect("learnt from the first call");
        assert!(exe.pooled_bytes() <= shared);
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

/// Checks that the last node of `p` (its one output) fails with the count and first index a
/// scan of its unchecked value finds, in the interpreter and the executable alike.
fn fails_as_a_scan_would(p: Program, inputs: &[Tensor], op: &str) {
    let unchecked = EvalOptions {
        check_non_finite: false,
        ..EvalOptions::default()
    };
    let value = interp::eval_with_options(&p, inputs, unchecked).unwrap()[0].to_f64_vec();
    let bad: Vec<usize> = (0..value.len())
        .filter(|&i| !value[i].is_finite())
        .collect();
    assert!(bad.len() > 1, "the case makes non-finite values");
    let index = p.n_nodes() - 1;
    let want = EvalError::NonFinite {
        index,
        name: p.nodes()[index].name.clone(),
        op: op.to_string(),
        count: bad.len(),
        first: bad[0],
    };
    assert_eq!(interp::eval(&p, inputs).unwrap_err(), want);
    let exe = Executable::new(p).unwrap();
    for _ in 0..2 {
        assert_eq!(exe.run(inputs, EvalOptions::default()).unwrap_err(), want);
    }
}

#[test]
fn elementwise_passes_count_their_non_finite_values_as_a_scan_would() {
    // 300 x 200 elements are split across the threads and written in blocks; the values that
    // overflow lie in several blocks and both pieces.
    let dims = [300, 200];
    let ty = TensorType::new(DType::F32, dims.to_vec());
    let n = 300 * 200;
    let x: Vec<f64> = (0..n)
        .map(|i| {
            if i % 7919 == 11 {
                3.0e38
            } else {
                (i % 13) as f64 * 0.1
            }
        })
        .collect();
    let x = Tensor::from_f64s(DType::F32, dims.to_vec(), x).unwrap();
    // exp of a caller's value: into a new buffer.
    let mut b = Builder::new();
    let v = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let e = b.exp(v).unwrap();
    fails_as_a_scan_would(b.finish(&[e]).unwrap(), std::slice::from_ref(&x), "exp");
    // add into a dying node value's own buffer, and of two caller's values into a new one.
    let mut b = Builder::new();
    let v = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let w = b.input("w", ty.clone(), InputKind::Data).unwrap();
    let m = b.neg(v).unwrap();
    let s = b.add(m, w).unwrap();
    let minus = Tensor::from_f64s(
        DType::F32,
        dims.to_vec(),
        x.to_f64_vec().iter().map(|v| -v).collect(),
    )
    .unwrap();
    fails_as_a_scan_would(b.finish(&[s]).unwrap(), &[x.clone(), minus.clone()], "add");
    let mut b = Builder::new();
    let v = b.input("x", ty.clone(), InputKind::Data).unwrap();
    let s = b.add(v, v).unwrap();
    fails_as_a_scan_would(b.finish(&[s]).unwrap(), std::slice::from_ref(&x), "add");
    // tanh_pullback u (1 - y²), where y² overflows, into the dying u's buffer.
    let mut b = Builder::new();
    let y = b.input("y", ty.clone(), InputKind::Data).unwrap();
    let u = b.input("u", ty, InputKind::Data).unwrap();
    let m = b.neg(u).unwrap();
    let t = b.tanh_pullback(y, m).unwrap();
    let ones = Tensor::from_f64s(DType::F32, dims.to_vec(), vec![1.0; n]).unwrap();
    fails_as_a_scan_would(b.finish(&[t]).unwrap(), &[x, ones], "tanh_pullback");
}

/// x ↦ x + the index of the pool thread running the kernel (-1 off the pool): where a call ran.
#[derive(Debug)]
struct PlusThreadIndex;

impl catml::ir::Primitive for PlusThreadIndex {
    fn name(&self) -> &str {
        "plus_thread_index"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType, catml::ir::TypeError> {
        Ok(inputs[0].clone())
    }
    fn eval(&self, inputs: &[&Tensor]) -> Result<Tensor, catml::ir::KernelError> {
        let t = inputs[0];
        let index = rayon::current_thread_index().map_or(-1.0, |i| i as f64);
        let data = t.to_f64_vec().iter().map(|v| v + index).collect();
        Ok(Tensor::from_f64s(t.dtype(), t.shape().clone(), data).unwrap())
    }
}

#[test]
fn a_large_program_runs_on_a_pool_thread_and_a_small_one_on_the_callers() {
    if rayon::current_num_threads() < 2 {
        return; // a pool of one thread is never worth the hand-off
    }
    let ran_on = |n: usize| {
        let mut b = Builder::new();
        let ty = TensorType::new(DType::F64, [n]);
        let x = b.input("x", ty.clone(), InputKind::Data).unwrap();
        let y = b
            .apply_hinted("y", std::sync::Arc::new(PlusThreadIndex), &[x])
            .unwrap();
        let exe = Executable::new(b.finish(&[y]).unwrap()).unwrap();
        let out = exe
            .run(&[Tensor::full(&ty, 0.0)], EvalOptions::default())
            .unwrap();
        out[0].to_f64_vec()[0]
    };
    assert_eq!(ran_on(4), -1.0, "four elements stay on the caller's thread");
    let index = ran_on(1 << 16);
    assert!(
        index >= 0.0 && index < rayon::current_num_threads() as f64,
        "2^16 elements run on a pool thread, found {index}"
    );
}

/// Values of a smooth pattern in (-0.5, 0.5), but `odd` at every index `i` with
/// `i % every == at`.
fn with_odd(dims: &[usize], (every, at): (usize, usize), odd: f64) -> Tensor {
    let n: usize = dims.iter().product();
    let data = (0..n)
        .map(|i| {
            if i % every == at {
                odd
            } else {
                ((i * 37) % 101) as f64 / 101.0 - 0.5
            }
        })
        .collect();
    Tensor::from_f64s(DType::F32, dims.to_vec(), data).unwrap()
}

#[test]
fn stacked_products_attention_weights_pullbacks_and_broadcasts_count_as_a_scan_would() {
    let f32s = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    // Stacked products, of a caller's stacks and of a stack read through a permute; the
    // products overflow where A holds 3e38 (a permute of NaNs would fail first).
    for through_permute in [false, true] {
        let mut b = Builder::new();
        let a = if through_permute {
            let a = b.input("a", f32s(&[6, 40, 64]), InputKind::Data).unwrap();
            b.permute(a, vec![0, 2, 1]).unwrap()
        } else {
            b.input("a", f32s(&[6, 64, 40]), InputKind::Data).unwrap()
        };
        let w = b.input("w", f32s(&[6, 40, 48]), InputKind::Data).unwrap();
        let c = b.batch_matmul(a, w, false, false).unwrap();
        let p = b.finish(&[c]).unwrap();
        let a_dims = if through_permute {
            [6, 40, 64]
        } else {
            [6, 64, 40]
        };
        let inputs = [
            with_odd(&a_dims, (2011, 5), 3e38),
            Tensor::full(&f32s(&[6, 40, 48]), 4.0),
        ];
        fails_as_a_scan_would(p, &inputs, "batch_matmul");
    }
    // Attention weights of queries split into heads by a permute: scores that overflow to
    // +inf or -inf, or to NaN (+inf and -inf in one sum), make their rows NaN. The kernel
    // counts only the rows whose maximum or sum is not finite.
    let q_dims = [2, 64, 4, 32];
    for odd in [[3e38, 0.25], [-3e38, 0.25], [3e38, -3e38]] {
        let mut b = Builder::new();
        let q = b.input("q", f32s(&q_dims), InputKind::Data).unwrap();
        let k = b
            .input("k", f32s(&[2, 4, 64, 32]), InputKind::Data)
            .unwrap();
        let qh = b.permute(q, vec![0, 2, 1, 3]).unwrap();
        let probs = b
            .attention_probs(qh, k, catml::prim::AttentionMask::none())
            .unwrap();
        let p = b.finish(&[probs]).unwrap();
        // Elements 7 and 8 of every 3001st run: one query row of one head gets both.
        let mut q = with_odd(&q_dims, (3001, 7), odd[0]).to_f64_vec();
        (0..q.len())
            .filter(|i| i % 3001 == 8)
            .for_each(|i| q[i] = odd[1]);
        let inputs = [
            Tensor::from_f64s(DType::F32, q_dims.to_vec(), q).unwrap(),
            Tensor::full(&f32s(&[2, 4, 64, 32]), 4.0),
        ];
        fails_as_a_scan_would(p, &inputs, "attention_probs");
    }
    // The softmax pullback, blocks on several threads.
    let mut b = Builder::new();
    let y = b.input("y", f32s(&[32, 64, 64]), InputKind::Data).unwrap();
    let v = b.input("v", f32s(&[32, 64, 64]), InputKind::Data).unwrap();
    let g = b.softmax_pullback(y, v, 2, 1.0).unwrap();
    let p = b.finish(&[g]).unwrap();
    let inputs = [
        with_odd(&[32, 64, 64], (1 << 20, 1), 0.0),
        with_odd(&[32, 64, 64], (7001, 3), f64::NAN),
    ];
    fails_as_a_scan_would(p, &inputs, "softmax_pullback");
    // Broadcasts of a caller's value: counted from the operand, times the copies of each
    // element.
    let mut b = Builder::new();
    let row = b.input("row", f32s(&[3]), InputKind::Data).unwrap();
    let rows = b.broadcast_rows(row, 4).unwrap();
    let p = b.finish(&[rows]).unwrap();
    let row = Tensor::from_f64s(DType::F32, vec![3], vec![1.0, f64::NAN, 2.0]).unwrap();
    fails_as_a_scan_would(p, &[row], "broadcast_rows");
    let mut b = Builder::new();
    let seed = b.input("seed", f32s(&[]), InputKind::Data).unwrap();
    let filled = b.broadcast(seed, vec![5, 7], vec![]).unwrap();
    let p = b.finish(&[filled]).unwrap();
    fails_as_a_scan_would(p, &[Tensor::scalar(DType::F32, f64::INFINITY)], "broadcast");
}

/// The block's value-and-grad at a size of a few elements, with a reshape, a constant, a sum,
/// a linear layer, a permute, a mean and a stack of products: small enough to run in one
/// buffer.
fn small_block(dtype: DType) -> (Program, Vec<Tensor>) {
    let ty = |dims: &[usize]| TensorType::new(dtype, dims.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[2, 3]), InputKind::Data).unwrap();
    let w = b.input("w", ty(&[3, 3]), InputKind::Param).unwrap();
    let bias = b.input("b", ty(&[3]), InputKind::Param).unwrap();
    let xw = b.matmul(x, w).unwrap();
    let bb = b.broadcast_rows(bias, 2).unwrap();
    let a = b.add(xw, bb).unwrap();
    let h = b.tanh(a).unwrap();
    let r = b.reshape(h, [3, 2]).unwrap();
    let c = b
        .constant(
            Tensor::from_f64s(dtype, vec![3, 2], vec![0.5, -1.0, 2.0, 0.25, 1.5, -0.75]).unwrap(),
        )
        .unwrap();
    let y = b.mul(r, c).unwrap();
    let s = b.sum(y, Some(vec![1])).unwrap();
    // linear(h, W, b): h W^T + b; its pullback permutes, and a mean of it.
    let l = b.linear(h, w, bias).unwrap();
    let t = b.permute(l, vec![1, 0]).unwrap();
    let m = b.mean(t, Some(vec![0])).unwrap();
    // Two products of a stack, the second operand read transposed.
    let stack = b.reshape(xw, [2, 1, 3]).unwrap();
    let q = b.batch_matmul(stack, stack, false, true).unwrap();
    let p = b.finish(&[s, h, m, q]).unwrap();
    let v = catml::ad::vjp(&p).unwrap().program;
    let args = vec![
        value(dtype, [2, 3], 1),
        value(dtype, [3, 3], 2),
        value(dtype, [3], 3),
        Tensor::full(&ty(&[3]), 1.0),
        Tensor::full(&ty(&[2, 3]), 1.0),
        Tensor::full(&ty(&[2]), 1.0),
        Tensor::full(&ty(&[2, 1, 1]), 1.0),
    ];
    (v, args)
}

/// Each element's bits, so that NaNs compare.
fn bits(values: &[Tensor]) -> Vec<Vec<u64>> {
    let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| v.to_bits()).collect();
    values.iter().map(bits).collect()
}

#[test]
fn a_small_program_runs_in_one_buffer_and_equals_the_interpreter_bitwise() {
    for dtype in [DType::F32, DType::F64] {
        let (p, args) = small_block(dtype);
        let exe = Executable::new(p.clone()).unwrap();
        assert!(exe.in_one_buffer(), "{dtype}");
        let want = interp::eval(&p, &args).unwrap();
        for call in 0..3 {
            let got = exe.run(&args, EvalOptions::default()).unwrap();
            assert_eq!(bits(&got), bits(&want), "{dtype} call {call}");
            exe.recycle(got);
        }
        // Errors are the interpreter's, and leave the buffer serving the next call.
        let mut infinite = args.clone();
        infinite[0] = Tensor::from_f64s(
            dtype,
            vec![2, 3],
            vec![f64::INFINITY, 1.0, 2.0, 3.0, -4.0, 5.0],
        )
        .unwrap();
        let err = interp::eval(&p, &infinite).unwrap_err();
        assert!(matches!(err, EvalError::NonFinite { .. }), "{err}");
        assert_eq!(exe.run(&infinite, EvalOptions::default()).unwrap_err(), err);
        let unchecked = EvalOptions {
            check_non_finite: false,
            ..EvalOptions::default()
        };
        assert_eq!(
            bits(&exe.run(&infinite, unchecked).unwrap()),
            bits(&interp::eval_with_options(&p, &infinite, unchecked).unwrap())
        );
        let mut wrong = args.clone();
        wrong[1] = Tensor::full(&TensorType::new(dtype, [3, 2]), 1.0);
        assert_eq!(
            exe.run(&wrong, EvalOptions::default()).unwrap_err(),
            interp::eval(&p, &wrong).unwrap_err()
        );
        assert_eq!(
            exe.run(&args[1..], EvalOptions::default()).unwrap_err(),
            interp::eval(&p, &args[1..]).unwrap_err()
        );
        let tight = EvalOptions {
            memory_budget: Some(64),
            ..EvalOptions::default()
        };
        // The executable's own plan holds fewer values than the interpreter's.
        let peak = exe.plan().peak();
        assert!(peak.bytes < EvalPlan::new(&p).unwrap().peak().bytes);
        assert!(matches!(
            exe.run(&args, tight).unwrap_err(),
            EvalError::OverBudget { needed, budget: 64, node: Some((i, ..)) }
                if needed == peak.bytes && Some(i) == peak.node
        ));
        let (got, report) = exe.run_with_report(&args, EvalOptions::default()).unwrap();
        assert_eq!(bits(&got), bits(&want));
        assert_eq!(report, interp::eval_with_report(&p, &args).unwrap().1);
        assert_eq!(
            bits(&exe.clone().run(&args, EvalOptions::default()).unwrap()),
            bits(&want)
        );
        // A plan of the caller's choosing is followed on tensors.
        let planned = Executable::with_plan(p.clone(), interp::EvalPlan::new(&p).unwrap()).unwrap();
        assert!(!planned.in_one_buffer());
    }
    // Values of two dtypes, or too many bytes, are evaluated on tensors.
    assert!(!Executable::new(block(DType::F64).0)
        .unwrap()
        .in_one_buffer());
}

/// An executable keeps every buffer its calls share where those fit in the budget beside the
/// inputs. Here every value is small, so free buffers of its size serve it (no slab), and they
/// hold the peak exactly: even a budget of the peak keeps them all, and live values and free
/// buffers stay within it. (`tests/peak_memory.rs` measures a program
/// whose shared buffers do not fit.)
#[test]
fn free_buffers_kept_stay_within_what_the_budget_leaves_above_the_peak() {
    let (p, args) = block(DType::F64);
    let want = interp::eval(&p, &args).unwrap();
    let inputs: u64 = args.iter().map(|a| a.ty().bytes() as u64).sum();
    let exe = Executable::new(p).unwrap();
    let peak = exe.plan().peak().bytes;
    for _ in 0..2 {
        exe.recycle(exe.run(&args, EvalOptions::default()).unwrap());
    }
    let shared = exe.shared_bytes().unwrap() as u64;
    let kept = exe.pooled_bytes() as u64;
    assert!(
        kept > peak / 4 && kept <= shared,
        "with room, {kept} bytes of the {shared} shared are kept"
    );
    assert_eq!(
        shared + inputs,
        peak,
        "the shared buffers hold the peak exactly"
    );
    let tight = EvalOptions {
        memory_budget: Some(peak),
        ..EvalOptions::default()
    };
    for call in 0..2 {
        let got = exe.run(&args, tight).unwrap();
        assert_eq!(got, want, "call {call}");
        let results: u64 = got.iter().map(|r| r.ty().bytes() as u64).sum();
        assert_eq!(exe.pooled_bytes() as u64 + results + inputs, peak);
        exe.recycle(got);
        assert_eq!(exe.pooled_bytes() as u64, shared);
    }
}

/// Values of a page and more live in the slab an executable learns. A caller keeping a call's
/// results while making the next call holds their ranges: the next call's values placed there
/// get memory of their own, so the kept results are never overwritten, and every call's results
/// are the interpreter's.
#[test]
fn results_kept_across_calls_keep_their_values() {
    // Rows of 16 f64s: 64 rows make each value 8 KiB, above the slab's smallest.
    let ty = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    let mut b = Builder::new();
    let x = b.input("x", ty(&[64, 16]), InputKind::Data).unwrap();
    let w = b.input("w", ty(&[16, 16]), InputKind::Param).unwrap();
    let xw = b.matmul(x, w).unwrap();
    let h = b.tanh(xw).unwrap();
    let y = b.mul(h, x).unwrap();
    let big = b.finish(&[y]).unwrap();
    let big = catml::ad::vjp(&big).unwrap().program;
    let args = |k: usize| {
        vec![
            value(DType::F64, [64, 16], k),
            value(DType::F64, [16, 16], k + 1),
            value(DType::F64, [64, 16], k + 2),
        ]
    };
    let exe = Executable::new(big.clone()).unwrap();
    let mut kept = Vec::new();
    for k in 0..4 {
        let got = exe.run(&args(k), EvalOptions::default()).unwrap();
        assert_eq!(got, interp::eval(&big, &args(k)).unwrap(), "call {k}");
        kept.push((k, got));
    }
    assert!(exe.shared_bytes().unwrap() >= 8 << 10, "a slab was learnt");
    for (k, got) in &kept {
        assert_eq!(
            got,
            &interp::eval(&big, &args(*k)).unwrap(),
            "kept from call {k}"
        );
    }
}
