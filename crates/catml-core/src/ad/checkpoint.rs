//! Checkpoint policies: which forward values a reverse-mode program keeps from its forward part.
//! Every value the backward part reads that a policy does not keep is recomputed from kept
//! values just before its first backward use ([`vjp_with`](super::vjp_with),
//! `docs/checkpoint.md`).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::ir::Program;

/// Which computed forward values the backward part of a reverse-mode program may read as they
/// were computed. Program inputs and the program's outputs are always kept; any other forward
/// value the backward part reads and the policy does not keep is recomputed.
///
/// ```
/// use catml_core::ad::CheckpointPolicy;
///
/// let p: CheckpointPolicy = "names:h4,h8".parse().unwrap();
/// assert_eq!(p, CheckpointPolicy::save_only_these_names(["h4", "h8"]));
/// assert_eq!(p.to_string(), "names:h4,h8");
/// assert_eq!("sqrt".parse::<CheckpointPolicy>().unwrap(), CheckpointPolicy::SqrtSegments);
/// assert!("everything".parse::<CheckpointPolicy>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointPolicy {
    /// Keep no computed value: the backward part recomputes what it reads from the inputs.
    NothingSaveable,
    /// Keep the results of contractions ([`Primitive::is_contraction`]: matrix products,
    /// convolutions, attention), recompute the rest from them.
    ///
    /// [`Primitive::is_contraction`]: crate::ir::Primitive::is_contraction
    Dots,
    /// Keep the values whose node name or node tag is one of these.
    SaveOnlyTheseNames(BTreeSet<String>),
    /// Cut the forward part into segments of ⌈√n⌉ of the n values the backward part reads, in
    /// node order, and keep every value that crosses a cut (defined at or before it, read by a
    /// forward node after it). On a chain that is one value per cut: O(√n) memory for one
    /// extra forward evaluation.
    SqrtSegments,
}

impl CheckpointPolicy {
    pub fn nothing_saveable() -> CheckpointPolicy {
        CheckpointPolicy::NothingSaveable
    }

    pub fn dots() -> CheckpointPolicy {
        CheckpointPolicy::Dots
    }

    pub fn save_only_these_names<S: Into<String>>(
        names: impl IntoIterator<Item = S>,
    ) -> CheckpointPolicy {
        CheckpointPolicy::SaveOnlyTheseNames(names.into_iter().map(Into::into).collect())
    }

    pub fn sqrt_segments() -> CheckpointPolicy {
        CheckpointPolicy::SqrtSegments
    }

    /// Which of the first `n_fwd` nodes of `q` (its forward part, the rest being the backward
    /// part) the policy keeps.
    pub(crate) fn kept(&self, q: &Program, n_fwd: usize) -> Vec<bool> {
        let fwd = &q.nodes()[..n_fwd];
        match self {
            CheckpointPolicy::NothingSaveable => vec![false; n_fwd],
            CheckpointPolicy::Dots => fwd.iter().map(|n| n.prim.is_contraction()).collect(),
            CheckpointPolicy::SaveOnlyTheseNames(names) => fwd
                .iter()
                .map(|n| {
                    names.contains(&n.name) || n.tag.as_ref().is_some_and(|t| names.contains(t))
                })
                .collect(),
            CheckpointPolicy::SqrtSegments => sqrt_cuts(q, n_fwd),
        }
    }
}

/// The values crossing the cuts after every ⌈√n⌉-th backward-read forward value.
fn sqrt_cuts(q: &Program, n_fwd: usize) -> Vec<bool> {
    let n_in = q.n_inputs();
    let fwd_node = |v: crate::ir::Var| v.index().checked_sub(n_in).filter(|&i| i < n_fwd);
    let mut read_back = vec![false; n_fwd];
    // The last forward node reading each forward node.
    let mut last_fwd_use: Vec<Option<usize>> = vec![None; n_fwd];
    for (k, n) in q.nodes().iter().enumerate() {
        for &o in &n.operands {
            let Some(j) = fwd_node(o) else { continue };
            if k < n_fwd {
                last_fwd_use[j] = Some(k);
            } else {
                read_back[j] = true;
            }
        }
    }
    let read: Vec<usize> = (0..n_fwd).filter(|&j| read_back[j]).collect();
    let step = (read.len() as f64).sqrt().ceil() as usize;
    let mut kept = vec![false; n_fwd];
    if step == 0 {
        return kept;
    }
    // A cut after node t: every j <= t with a forward reader after t.
    for &t in read.iter().skip(step - 1).step_by(step) {
        for j in 0..=t {
            if last_fwd_use[j].is_some_and(|k| k > t) {
                kept[j] = true;
            }
        }
    }
    kept
}

impl fmt::Display for CheckpointPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointPolicy::NothingSaveable => write!(f, "nothing"),
            CheckpointPolicy::Dots => write!(f, "dots"),
            CheckpointPolicy::SaveOnlyTheseNames(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                write!(f, "names:{}", names.join(","))
            }
            CheckpointPolicy::SqrtSegments => write!(f, "sqrt"),
        }
    }
}

/// A checkpoint policy's text was not one of `nothing`, `dots`, `sqrt`, `names:A,B,...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown checkpoint policy `{0}`: expected nothing, dots, sqrt or names:NAME,NAME,...")]
pub struct PolicyParseError(pub String);

impl FromStr for CheckpointPolicy {
    type Err = PolicyParseError;

    fn from_str(s: &str) -> Result<CheckpointPolicy, PolicyParseError> {
        match s {
            "nothing" | "nothing_saveable" => Ok(CheckpointPolicy::NothingSaveable),
            "dots" | "dots_saveable" => Ok(CheckpointPolicy::Dots),
            "sqrt" | "sqrt_segments" => Ok(CheckpointPolicy::SqrtSegments),
            _ => match s.strip_prefix("names:") {
                Some(list) if list.split(',').all(|n| !n.is_empty()) => {
                    Ok(CheckpointPolicy::save_only_these_names(list.split(',')))
                }
                _ => Err(PolicyParseError(s.to_string())),
            },
        }
    }
}
