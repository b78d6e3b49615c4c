//! Arithmetic over whole parameter stores, entry by entry (a store as one long vector):
//! `map`, `zip_map`, `axpy` (y += a x), `dot` and `norm`.

use super::{Params, Tensor, TensorType};

/// Why two stores could not be combined entry by entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsMismatch {
    #[error("`{name}` is in one store but not the other")]
    Missing { name: String },
    #[error("`{name}` has type {left} in one store and {right} in the other")]
    Type {
        name: String,
        left: TensorType,
        right: TensorType,
    },
}

impl Params {
    /// A store with `f(name, tensor)` for every entry.
    ///
    /// ```
    /// use catml_core::tensor::{Params, Tensor};
    /// let mut p = Params::new();
    /// p.insert("w", Tensor::f64([2], vec![1.0, -2.0]).unwrap());
    /// let half = p.map(|_, t| t.map_f64(|x| x / 2.0));
    /// assert_eq!(half.get("w").unwrap().to_f64_vec(), vec![0.5, -1.0]);
    /// ```
    pub fn map(&self, mut f: impl FnMut(&str, &Tensor) -> Tensor) -> Params {
        self.iter()
            .map(|(name, t)| (name.to_string(), f(name, t)))
            .collect()
    }

    /// A store with `f(name, mine, theirs)` for every entry; both stores must hold the same
    /// names with the same types.
    pub fn zip_map(
        &self,
        other: &Params,
        mut f: impl FnMut(&str, &Tensor, &Tensor) -> Tensor,
    ) -> Result<Params, ParamsMismatch> {
        self.check_matches(other)?;
        Ok(self
            .iter()
            .map(|(name, t)| {
                let u = other.get(name).expect("checked");
                (name.to_string(), f(name, t, u))
            })
            .collect())
    }

    /// `self += a x`, entry by entry, in each entry's dtype. On a mismatch nothing changes.
    ///
    /// ```
    /// use catml_core::tensor::{Params, Tensor};
    /// let mut w = Params::new();
    /// w.insert("w", Tensor::f64([2], vec![1.0, 1.0]).unwrap());
    /// let mut g = Params::new();
    /// g.insert("w", Tensor::f64([2], vec![4.0, -2.0]).unwrap());
    /// w.axpy(-0.5, &g).unwrap(); // one gradient step of size 0.5
    /// assert_eq!(w.get("w").unwrap().to_f64_vec(), vec![-1.0, 2.0]);
    /// assert_eq!(g.norm(), 20f64.sqrt());
    /// ```
    pub fn axpy(&mut self, a: f64, x: &Params) -> Result<(), ParamsMismatch> {
        *self = self.zip_map(x, |_, y, x| axpy_tensor(a, x, y))?;
        Ok(())
    }

    /// Σ over entries of ⟨self, other⟩, in f64.
    pub fn dot(&self, other: &Params) -> Result<f64, ParamsMismatch> {
        self.check_matches(other)?;
        Ok(self
            .iter()
            .map(|(name, t)| t.dot(other.get(name).expect("checked")))
            .sum())
    }

    /// The Euclidean norm of every entry together, in f64 (what global-norm clipping reads).
    pub fn norm(&self) -> f64 {
        self.iter()
            .flat_map(|(_, t)| t.to_f64_vec())
            .map(|v| v * v)
            .sum::<f64>()
            .sqrt()
    }

    /// Same names, each with the same type.
    fn check_matches(&self, other: &Params) -> Result<(), ParamsMismatch> {
        for (name, t) in self.iter() {
            match other.get(name) {
                None => return Err(ParamsMismatch::Missing { name: name.into() }),
                Some(u) if u.ty() != t.ty() => {
                    return Err(ParamsMismatch::Type {
                        name: name.into(),
                        left: t.ty(),
                        right: u.ty(),
                    })
                }
                Some(_) => {}
            }
        }
        match other.names().find(|n| !self.contains(n)) {
            Some(name) => Err(ParamsMismatch::Missing { name: name.into() }),
            None => Ok(()),
        }
    }
}

/// y + a x, in y's dtype (the types are equal).
fn axpy_tensor(a: f64, x: &Tensor, y: &Tensor) -> Tensor {
    match (x, y) {
        (Tensor::F32(x), Tensor::F32(y)) => {
            let a = a as f32;
            let data = y.data().iter().zip(x.data()).map(|(y, x)| y + a * x);
            Tensor::f32(y.dims().to_vec(), data.collect()).expect("same shape")
        }
        (Tensor::F64(x), Tensor::F64(y)) => {
            let data = y.data().iter().zip(x.data()).map(|(y, x)| y + a * x);
            Tensor::f64(y.dims().to_vec(), data.collect()).expect("same shape")
        }
        _ => {
            let (y64, x64) = (y.to_f64_vec(), x.to_f64_vec());
            let data = y64.iter().zip(x64).map(|(y, x)| y + a * x);
            Tensor::from_f64s(y.dtype(), y.dims().to_vec(), data.collect()).expect("same shape")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(entries: &[(&str, Tensor)]) -> Params {
        entries
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect()
    }

    fn sample() -> Params {
        store(&[
            (
                "a.W",
                Tensor::f64([2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap(),
            ),
            ("a.b", Tensor::f32([2], vec![0.5, -0.5]).unwrap()),
        ])
    }

    #[test]
    fn axpy_adds_a_multiple_in_each_entrys_dtype() {
        let mut y = sample();
        y.axpy(2.0, &sample()).unwrap();
        assert_eq!(
            y.get("a.W").unwrap().to_f64_vec(),
            vec![3.0, 6.0, 9.0, 12.0]
        );
        assert_eq!(
            y.get("a.b").unwrap(),
            &Tensor::f32([2], vec![1.5, -1.5]).unwrap()
        );
    }

    #[test]
    fn dot_and_norm_treat_the_store_as_one_vector() {
        let p = sample();
        assert_eq!(p.dot(&p).unwrap(), 30.0 + 0.5);
        assert_eq!(p.norm(), 30.5f64.sqrt());
        let twice = p.map(|_, t| t.map_f64(|x| 2.0 * x));
        assert_eq!(p.dot(&twice).unwrap(), 61.0);
    }

    #[test]
    fn zip_map_sees_both_entries_by_name() {
        let p = sample();
        let diff = p
            .zip_map(&p.map(|_, t| t.map_f64(|x| x + 1.0)), |_, a, b| {
                b.map_f64(|x| x * 0.0 + 1.0)
                    .map_f64(|x| x * a.numel() as f64)
            })
            .unwrap();
        assert_eq!(diff.get("a.W").unwrap().to_f64_vec(), vec![4.0; 4]);
        assert_eq!(diff.get("a.b").unwrap().to_f64_vec(), vec![2.0; 2]);
    }

    #[test]
    fn mismatched_stores_are_refused_and_left_unchanged() {
        let mut y = sample();
        let mut missing = sample();
        missing.remove("a.b");
        assert_eq!(
            y.axpy(1.0, &missing),
            Err(ParamsMismatch::Missing { name: "a.b".into() })
        );
        assert_eq!(
            missing.dot(&y),
            Err(ParamsMismatch::Missing { name: "a.b".into() })
        );
        let mut retyped = sample();
        retyped.insert("a.b", Tensor::f64([2], vec![0.0, 0.0]).unwrap());
        assert!(
            matches!(y.axpy(1.0, &retyped), Err(ParamsMismatch::Type { ref name, .. }) if name == "a.b")
        );
        assert_eq!(y, sample());
    }
}
