//! Paths: composable sequences of arrows, and the identity path at an object.

use std::fmt;

/// A path through a diagram: arrows applied left to right (`["f", "g"]` is g ∘ f), or the
/// identity at an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Path {
    Arrows(Vec<String>),
    Identity(String),
}

impl Path {
    /// The path through these arrows, in order of application.
    pub fn of<S: AsRef<str>>(arrows: impl IntoIterator<Item = S>) -> Path {
        Path::Arrows(arrows.into_iter().map(|s| s.as_ref().to_string()).collect())
    }

    /// The identity path at `object`.
    pub fn identity(object: &str) -> Path {
        Path::Identity(object.to_string())
    }

    /// The arrows, in order of application (none for an identity).
    pub fn arrows(&self) -> &[String] {
        match self {
            Path::Arrows(a) => a,
            Path::Identity(_) => &[],
        }
    }
}

impl fmt::Display for Path {
    /// `f ; g` for arrows applied in that order, `id(A)` for an identity.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Arrows(a) => write!(f, "{}", a.join(" ; ")),
            Path::Identity(o) => write!(f, "id({o})"),
        }
    }
}

/// A resolved path: its ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ends {
    pub source: String,
    pub target: String,
}
