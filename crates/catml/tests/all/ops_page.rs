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
