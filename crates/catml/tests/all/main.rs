//! Every integration test of the workspace library, in one binary (one link, not one per file).

mod common;
mod lowering_checks;
mod support;
// The benchmarks' workloads, so that tests and benchmarks build one program each.
#[allow(dead_code)]
#[path = "../../benches/support/attention_block.rs"]
mod attention_block;
#[allow(dead_code)]
#[path = "../../benches/workloads/mod.rs"]
mod workloads;

mod adjoint;
mod api;
mod category_laws;
mod checkpoint;
mod composite_edges;
mod composites;
mod conv_pool;
mod diagram;
mod elementwise_rows;
mod eval_reuse;
mod executable;
mod file_tests;
mod folded_sums;
mod fused_passes;
mod higher_order;
mod large;
mod memory;
mod missing_rule;
mod models;
mod nn_batch_norm;
mod nn_layers;
mod ops_page;
mod optim;
mod parse_robustness;
mod permutes_in_place;
mod primitives;
mod random;
mod rational_composites;
mod reader_checks;
mod recurrent;
mod rejections;
mod reverse_semantics;
mod round_trip;
mod runtime;
mod scan;
mod scan_vmap;
mod spec;
mod statistics;
mod tied_block;
mod tiny_mlp;
mod trace;
mod train;
mod train_step;
mod verify_bundle;
mod vmap;
