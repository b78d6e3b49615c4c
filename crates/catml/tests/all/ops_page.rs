//! `docs/ops.md` is the registry's catalog: regenerate it with
//! `UPDATE_EXPECT=1 cargo test -p catml --test all ops_page`.

use std::path::Path;

use catml::prim::{builtins, catalog};

#[test]
fn docs_ops_md_is_the_registry_catalog() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ops.md");
    let page = catalog::markdown(builtins());
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == page,
        "docs/ops.md differs from the registry; regenerate it with UPDATE_EXPECT=1"
    );
}

#[test]
fn every_registered_primitive_is_in_the_catalog() {
    let r = builtins();
    let listed: Vec<String> = catalog::catalog(r).into_iter().map(|o| o.name).collect();
    let names: Vec<&str> = r.names().collect();
    assert_eq!(listed, names);
}

/// The cells of a Markdown table row: split at every `|` not escaped as `\|`.
fn cells(row: &str) -> usize {
    let inner = row.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut count = 1;
    let mut escaped = false;
    for c in inner.chars() {
        match c {
            '\\' => escaped = !escaped,
            '|' if !escaped => count += 1,
            _ => escaped = false,
        }
        if c == '|' {
            escaped = false;
        }
    }
    count
}

#[test]
fn every_row_of_the_ops_table_has_the_headers_cells() {
    let page = catalog::markdown(builtins());
    let rows: Vec<&str> = page.lines().filter(|l| l.starts_with('|')).collect();
    let header = cells(rows[0]);
    assert_eq!(header, 7);
    for row in &rows {
        assert_eq!(cells(row), header, "{row}");
    }
    assert_eq!(rows.len(), builtins().names().count() + 2);
    let abs = rows.iter().find(|r| r.starts_with("| `abs` |")).unwrap();
    assert!(abs.contains(r"\|x\|"), "{abs}");
    assert_eq!(cells(r"| a \| b | c |"), 2);
}
