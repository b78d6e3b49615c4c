use catml::nn::seeded;
use catml::tensor::{DType, Params, Tensor};
use catml::trace::trace;

use super::{mlp, ty};

/// A path in the temp directory that no other test or process uses, removed on drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(stem: &str) -> TempFile {
        let name = format!("catml-{stem}-{}.safetensors", std::process::id());
        TempFile(std::env::temp_dir().join(name))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn traced_parameters_survive_a_safetensors_file_and_give_the_same_outputs() {
    let mut rng = seeded(21);
    let traced = trace(&[ty(DType::F32, &[2])], |x| mlp(&x[0], &mut rng)).unwrap();
    let file = TempFile::new("trace-params");
    traced.params.save(&file.0).unwrap();
    let loaded = Params::load(&file.0).unwrap();
    assert_eq!(loaded, traced.params);
    let names: Vec<&str> = loaded.names().collect();
    assert_eq!(names, vec!["lin1.W", "lin1.b", "lin2.W", "lin2.b"]);

    let x = Tensor::f32([2], vec![0.5, -0.25]).unwrap();
    let args = catml::trace::arguments(&traced.program, &loaded, std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        catml::interp::eval(&traced.program, &args).unwrap(),
        traced.eval(&[x]).unwrap()
    );
}
