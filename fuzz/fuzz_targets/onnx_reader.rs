//! Any bytes given to the ONNX reader and importer: an error or a program, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(model) = catml_onnx::decode_model(data) {
        let _ = catml_onnx::import(&model, &catml_onnx::Shapes::new(), None);
        let _ = catml_onnx::unsupported_nodes(&model, &catml_onnx::Shapes::new(), None);
    }
});
