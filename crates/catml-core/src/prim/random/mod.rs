//! Counter-based random numbers (`docs/random.md`): keys (`random_split`, `random_fold_in`),
//! draws (`random_uniform`, `random_normal`) and `dropout`, all reading an explicit `i64[2]` key
//! operand, so one key gives the same bits on every run and at every thread count.

pub(crate) mod dropout;
pub(crate) mod keys;
pub(crate) mod sample;
pub mod threefry;

use crate::ir::TypeError;
use crate::tensor::{DType, TensorType};

/// Operand `i` is a key: i64[2].
pub(crate) fn key_operand(inputs: &[TensorType], i: usize) -> Result<(), TypeError> {
    let want = TensorType::new(DType::I64, [2]);
    if inputs[i] == want {
        Ok(())
    } else {
        Err(TypeError::Operand {
            index: i,
            expected: "a key, i64[2] (two 32-bit words)".to_string(),
            found: inputs[i].clone(),
        })
    }
}

/// A key constant for drawing rules: two words in 0..2^32.
fn draw_key(d: &mut dyn crate::ir::Draw) -> Result<crate::ir::Var, crate::ir::DrawError> {
    let words = vec![
        d.int(0, u32::MAX as usize) as i64,
        d.int(0, u32::MAX as usize) as i64,
    ];
    let t = crate::tensor::Tensor::i64([2], words).expect("two words");
    d.apply(std::sync::Arc::new(crate::prim::Constant::new(t)), &[])
}
