//! Writes the specs DISTRIBUTED.md measures into a folder: `digits/digits.toml` (the digits
//! CNN at batch 32 on all 1,797 digits) and `mlp/mlp.toml` (the 784-512-512-10 MLP at batch 256
//! on 2,048 synthetic rows), each cut into 2 shards, in piece order or with the all-reduce.
//!
//! `cargo run -p catml-cli --example distributed_specs -- DIR [all-reduce]`

#[path = "../tests/cli/mpi_specs.rs"]
mod specs;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: distributed_specs DIR"));
    let deterministic = args.next().as_deref() != Some("all-reduce");
    let extra = specs::distributed(2, deterministic, 60.0);
    let digits = specs::digits(&dir.join("digits"), 32, 1797, 2, &extra);
    let mlp = specs::mid_mlp(&dir.join("mlp"), 256, 2048, 2, &extra);
    println!("{}\n{}", digits.display(), mlp.display());
}
