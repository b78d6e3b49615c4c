// With the `openblas` feature, link Debian's libopenblas (which exports the CBLAS symbols).
fn main() {
    if std::env::var_os("CARGO_FEATURE_OPENBLAS").is_some() {
        println!("cargo:rustc-link-lib=openblas");
    }
}
