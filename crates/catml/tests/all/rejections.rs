//! Golden rejection messages of the LensIR JSON reader: every `modules/*.json` here is an
//! invalid module whose fault only JSON can hold (malformed text, fields, paths, the format
//! string), and its sibling `*.expected` holds the exact one-line `ValidationErrors` message.
//! The type rules' rejections are file tests in the listing format (`tests/files/types/`).
//! Run with `UPDATE_EXPECT=1` to rewrite the expectations (bless mode), then review the diff.

use std::fs;
use std::path::{Path, PathBuf};

fn modules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modules")
}

fn bless() -> bool {
    std::env::var_os("UPDATE_EXPECT").is_some()
}

/// Validates the module at `path` and compares its rejection message with `path.expected`.
/// Returns a description of the mismatch, if any.
fn check(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).expect("module file is readable");
    let actual = match catml::ir::json::from_str(&text, catml::prim::builtins()) {
        Ok(_) => format!("<accepted: {} is a valid module>", path.display()),
        Err(e) => e.to_string(),
    };
    assert!(!actual.contains('\n'), "multi-line message: {actual:?}");
    let expected_path = path.with_extension("expected");
    if bless() {
        fs::write(&expected_path, format!("{actual}\n")).expect("expectation is writable");
        return None;
    }
    let expected = match fs::read_to_string(&expected_path) {
        Ok(s) => s.trim_end_matches('\n').to_string(),
        Err(_) => return Some(format!("{}: no .expected file", path.display())),
    };
    (expected != actual).then(|| {
        format!(
            "{}\n  expected: {expected}\n  actual:   {actual}",
            path.display()
        )
    })
}

fn module_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(modules_dir())
        .expect("tests/modules exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_module_is_rejected_with_its_expected_message() {
    let failures: Vec<String> = module_paths().iter().filter_map(|p| check(p)).collect();
    assert!(
        failures.is_empty(),
        "{} of {} modules differ (UPDATE_EXPECT=1 to bless):\n{}",
        failures.len(),
        module_paths().len(),
        failures.join("\n")
    );
}

#[test]
fn every_expectation_has_its_module() {
    let orphans: Vec<PathBuf> = fs::read_dir(modules_dir())
        .expect("tests/modules exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "expected"))
        .filter(|p| !p.with_extension("json").exists())
        .collect();
    assert!(
        orphans.is_empty(),
        "expectations without a module: {orphans:?}"
    );
}

#[test]
fn the_required_rejections_are_all_present() {
    let files = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/files/types");
    let present = |name: &str| {
        modules_dir().join(format!("{name}.json")).exists()
            || files.join(format!("{name}.catml")).exists()
    };
    for required in [
        "unknown_primitive",
        "add_shape_mismatch",
        "add_dtype_mismatch",
        "wrong_operand_count",
        "zero_dimension",
        "negative_dimension",
        "element_count_overflow",
        "duplicate_input",
        "duplicate_node",
        "node_named_like_input",
        "use_before_definition",
        "unknown_operand",
        "empty_outputs",
        "unknown_output",
        "missing_attribute",
        "attribute_wrong_type",
        "permute_not_a_permutation",
        "gather_index_out_of_range",
        "reshape_changes_element_count",
        "sum_axis_out_of_range",
        "sum_duplicate_axes",
        "broadcast_dims_do_not_fit",
        "parameter_not_an_input",
        "malformed_json",
        "trailing_json",
        "unknown_field",
        "unknown_format",
        "several_errors",
    ] {
        assert!(present(required), "missing {required}");
    }
}

/// The "(and N more)" count is the number of errors after the first, and the first error is
/// the earliest in the module.
#[test]
fn several_errors_are_all_collected_in_order() {
    let text = fs::read_to_string(modules_dir().join("several_errors.json")).unwrap();
    let errors = catml::ir::json::from_str(&text, catml::prim::builtins())
        .unwrap_err()
        .0;
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].starts_with("inputs[1]"), "{lines:#?}");
    assert!(lines[1].starts_with("nodes[0]"), "{lines:#?}");
    assert!(lines[2].starts_with("nodes[2]"), "{lines:#?}");
    assert!(lines[3].starts_with("outputs[0]"), "{lines:#?}");
}
