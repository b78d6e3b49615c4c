//! `catml ops`: the registry's primitives, as text, JSON (a contract) and Markdown.

use std::process::Command;

fn catml(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_catml"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn ops_json_lists_every_registered_primitive_with_name_attrs_and_convention() {
    let (ok, out, err) = catml(&["ops", "--json"]);
    assert!(ok, "{err}");
    let ops: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["name"].as_str().unwrap()).collect();
    let registered: Vec<&str> = catml::prim::builtins().names().collect();
    assert_eq!(names, registered);
    for o in &ops {
        assert!(
            o["attrs"].is_array() && o.get("convention").is_some(),
            "{o}"
        );
    }
    let clip = ops.iter().find(|o| o["name"] == "clip").unwrap();
    let attrs: Vec<&str> = clip["attrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(attrs, ["min", "max"]);
    let relu = ops.iter().find(|o| o["name"] == "relu").unwrap();
    assert_eq!(relu["convention"], "relu'(0) = 0");
}

#[test]
fn ops_of_one_name_and_a_misspelt_one() {
    let (ok, out, _) = catml(&["ops", "sqrt"]);
    assert!(ok);
    assert!(
        out.starts_with("sqrt: ") && out.contains("domain: a nonnegative value"),
        "{out}"
    );
    let (ok, out, err) = catml(&["ops", "reul"]);
    assert!(!ok && out.is_empty());
    assert!(
        err.contains("no primitive `reul`") && err.contains("relu"),
        "{err}"
    );
}

#[test]
fn ops_markdown_is_the_docs_page() {
    let (ok, out, _) = catml(&["ops", "--markdown"]);
    assert!(ok);
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ops.md");
    assert_eq!(out, std::fs::read_to_string(page).unwrap());
}
