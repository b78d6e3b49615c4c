//! Gradient clipping by global norm: if ‖(g_1, ..., g_n)‖₂ > c, every gradient is scaled by
//! c / ‖g‖ so the concatenated gradient has norm exactly c; otherwise nothing changes.

use crate::tensor::{Params, Tensor};

/// The Euclidean norm of all gradients taken together, in f64.
pub fn global_norm(grads: &Params) -> f64 {
    grads
        .iter()
        .map(|(_, g)| g.to_f64_vec().iter().map(|x| x * x).sum::<f64>())
        .sum::<f64>()
        .sqrt()
}

/// Scales `grads` down to global norm `max_norm` if it is larger; returns the norm before.
pub fn clip_by_global_norm(grads: &mut Params, max_norm: f64) -> f64 {
    let norm = global_norm(grads);
    if norm > max_norm {
        let scale = max_norm / norm;
        let names: Vec<String> = grads.names().map(str::to_string).collect();
        for name in names {
            let g = grads.get(&name).expect("listed above");
            let scaled: Vec<f64> = g.to_f64_vec().iter().map(|x| x * scale).collect();
            let t = Tensor::from_f64s(g.dtype(), g.shape().clone(), scaled).expect("same count");
            grads.insert(name, t);
        }
    }
    norm
}
