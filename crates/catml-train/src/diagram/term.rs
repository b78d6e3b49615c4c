//! Loss terms: equations between paths and supervised terms tying a path to labelled data.

use super::Path;

/// How two batches are compared, row by row (a row's value is then weighted and summed).
///
/// - `SquaredError`: ½ Σ_j (a_j − b_j)² over the F elements of the row (the spec's
///   `squared_error`, the default);
/// - `Mse`: (1/F) Σ_j (a_j − b_j)² over the row (the spec's `mse`); averaged over the rows it
///   is the `mse` primitive, the mean over all elements, so with uniform row weights
///   `Mse` = `SquaredError` · 2/F;
/// - `CrossEntropy`: −Σ_j p_j log softmax(z)_j with z the second argument's class scores. In an
///   equation p = softmax of the left path's scores (the left path is the reference); in a
///   supervised term p is the target data (one-hot labels or any distribution). Both need
///   per-example rank 1. The `softmax` and `log_softmax` primitives shift each row by its
///   (stopped) maximum before exponentiating, so no row overflows, whatever its scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distance {
    SquaredError,
    Mse,
    CrossEntropy,
}

impl Distance {
    pub fn as_str(self) -> &'static str {
        match self {
            Distance::SquaredError => "squared_error",
            Distance::Mse => "mse",
            Distance::CrossEntropy => "cross_entropy",
        }
    }
}

/// Two paths with the same ends that should agree: the commutation defect
/// `Σ_rows w · distance(left(x), right(x))` is a loss term (times `weight`) and a metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Equation {
    pub name: String,
    pub left: Path,
    pub right: Path,
    pub weight: f64,
    pub distance: Distance,
}

impl Equation {
    /// `left ≈ right` with weight 1 and squared error.
    pub fn new(name: &str, left: Path, right: Path) -> Equation {
        Equation {
            name: name.to_string(),
            left,
            right,
            weight: 1.0,
            distance: Distance::SquaredError,
        }
    }

    pub fn weight(mut self, weight: f64) -> Equation {
        self.weight = weight;
        self
    }

    pub fn distance(mut self, distance: Distance) -> Equation {
        self.distance = distance;
        self
    }
}

/// A path fitted to labelled data: `Σ_rows w · loss(path(source data), target data)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Supervised {
    pub name: String,
    pub path: Path,
    pub weight: f64,
    pub loss: Distance,
}

impl Supervised {
    /// Squared error with weight 1.
    pub fn new(name: &str, path: Path) -> Supervised {
        Supervised {
            name: name.to_string(),
            path,
            weight: 1.0,
            loss: Distance::SquaredError,
        }
    }

    pub fn weight(mut self, weight: f64) -> Supervised {
        self.weight = weight;
        self
    }

    pub fn loss(mut self, loss: Distance) -> Supervised {
        self.loss = loss;
        self
    }
}

/// A term of the loss.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    Equation(Equation),
    Supervised(Supervised),
}

impl Term {
    pub fn name(&self) -> &str {
        match self {
            Term::Equation(e) => &e.name,
            Term::Supervised(s) => &s.name,
        }
    }

    pub fn weight(&self) -> f64 {
        match self {
            Term::Equation(e) => e.weight,
            Term::Supervised(s) => s.weight,
        }
    }

    pub fn distance(&self) -> Distance {
        match self {
            Term::Equation(e) => e.distance,
            Term::Supervised(s) => s.loss,
        }
    }
}
