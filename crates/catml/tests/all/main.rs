//! Every integration test of the workspace library, in one binary (one link, not one per file).

mod common;
mod lowering_checks;
mod support;

mod adjoint;
mod api;
mod category_laws;
mod composite_edges;
mod composites;
mod conv_pool;
mod diagram;
mod elementwise_rows;
mod eval_reuse;
mod file_tests;
mod higher_order;
mod large;
mod missing_rule;
mod mlp000;
mod models;
mod nn_layers;
mod ops_page;
mod optim;
mod parse_robustness;
mod primitives;
mod rational_composites;
mod recurrent;
mod rejections;
mod reverse_semantics;
mod round_trip;
mod runtime;
mod spec;
mod tied_block;
mod trace;
mod train;
mod verify_bundle;
mod vmap;
