//! A module's parameters from a safetensors file: a plain store whose names are the module's
//! parameter names, or a checkpoint written by training (`param/<arrow>.<name>`), from which
//! the parameters of one arrow are taken.

use std::collections::BTreeSet;
use std::path::Path;

use super::checkpoint::FORMAT as CHECKPOINT_FORMAT;
use crate::ir::{suggest, Program};
use crate::tensor::Params;

/// Why a parameter file does not fit a module: the file and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ParamFileError {
    pub path: String,
    pub reason: String,
}

/// The parameters of `program` held by the safetensors file at `path`, by name.
///
/// - A plain store supplies the parameters it names; a name that is not a parameter of the
///   program, or a tensor of another type than the parameter's, is an error. Parameters it
///   does not name are left to the caller.
/// - A training checkpoint holds every arrow's parameters as `param/<arrow>.<name>`. With
///   `arrow` given, its parameters are taken; without, the one arrow whose parameters match the
///   program's names and types is. Either way every parameter of the program must be there,
///   and the arrow must have no others.
pub fn module_params(
    path: &Path,
    program: &Program,
    arrow: Option<&str>,
) -> Result<Params, ParamFileError> {
    let fail = |reason: String| ParamFileError {
        path: path.display().to_string(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    let (store, meta) =
        Params::from_safetensors_with_metadata(&bytes).map_err(|e| fail(e.to_string()))?;
    let wanted: Vec<_> = program
        .param_indices()
        .iter()
        .map(|&i| &program.inputs()[i])
        .collect();
    let check_type = |name: &str, stored: &str, params: &Params| -> Result<(), ParamFileError> {
        let decl = wanted.iter().find(|d| d.name == name).expect("wanted");
        let t = params.get(stored).expect("present");
        if t.ty() != decl.ty {
            return Err(fail(format!(
                "`{stored}` has type {}, but parameter `{name}` is {}",
                t.ty(),
                decl.ty
            )));
        }
        Ok(())
    };
    if meta.get("format").map(String::as_str) != Some(CHECKPOINT_FORMAT) {
        if arrow.is_some() {
            return Err(fail(
                "not a training checkpoint, so it has no arrows to choose from".to_string(),
            ));
        }
        let mut out = Params::new();
        for (name, t) in store.iter() {
            if !wanted.iter().any(|d| d.name == name) {
                let hint = suggest::did_you_mean(name, wanted.iter().map(|d| d.name.as_str()));
                return Err(fail(format!(
                    "`{name}` is not a parameter of the module{hint}"
                )));
            }
            check_type(name, name, &store)?;
            out.insert(name, t.clone());
        }
        return Ok(out);
    }

    // A checkpoint: the parameters, by arrow.
    let params: Params = store
        .iter()
        .filter_map(|(n, t)| Some((n.strip_prefix("param/")?.to_string(), t.clone())))
        .collect();
    let arrows: BTreeSet<&str> = params
        .names()
        .filter_map(|n| n.split_once('.').map(|(a, _)| a))
        .collect();
    let fits = |a: &str| {
        wanted.iter().all(|d| {
            params
                .get(&format!("{a}.{}", d.name))
                .is_some_and(|t| t.ty() == d.ty)
        })
    };
    let chosen = match arrow {
        Some(a) if arrows.contains(a) => a.to_string(),
        Some(a) => {
            let hint = suggest::did_you_mean(a, arrows.iter().copied());
            return Err(fail(format!(
                "the checkpoint has no arrow `{a}`{hint} (it has {})",
                list(&arrows)
            )));
        }
        None => {
            let fitting: Vec<&str> = arrows.iter().copied().filter(|a| fits(a)).collect();
            match fitting.as_slice() {
                [one] => one.to_string(),
                [] => {
                    return Err(fail(format!(
                        "no arrow of the checkpoint ({}) has this module's parameters with \
                         their types",
                        list(&arrows)
                    )))
                }
                several => {
                    return Err(fail(format!(
                        "arrows {} all fit this module; choose one with --arrow",
                        several.join(", ")
                    )))
                }
            }
        }
    };
    let prefix = format!("{chosen}.");
    let mut out = Params::new();
    for d in &wanted {
        let stored = format!("{prefix}{}", d.name);
        if !params.contains(&stored) {
            return Err(fail(format!(
                "arrow `{chosen}` has no parameter `{}` (stored as `param/{stored}`)",
                d.name
            )));
        }
        check_type(&d.name, &stored, &params)?;
        out.insert(
            d.name.clone(),
            params.get(&stored).expect("present").clone(),
        );
    }
    if let Some(extra) = params
        .names()
        .filter_map(|n| n.strip_prefix(&prefix))
        .find(|n| !out.contains(n))
    {
        return Err(fail(format!(
            "arrow `{chosen}` has parameter `{extra}`, which the module does not: it was \
             trained with another module"
        )));
    }
    Ok(out)
}

fn list(names: &BTreeSet<&str>) -> String {
    if names.is_empty() {
        "no arrows".to_string()
    } else {
        names.iter().copied().collect::<Vec<_>>().join(", ")
    }
}
