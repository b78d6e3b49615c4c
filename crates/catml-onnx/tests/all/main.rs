//! The catml-onnx integration tests, one binary.

mod common;
mod export_errors;
mod export_int;
mod export_roundtrip;
mod export_special;
mod hostile;
mod import;
mod import_bitcast;
mod import_families;
mod import_gridsample;
mod import_int_data;
mod import_int_values;
mod import_ops;
mod import_pool_nd;
mod import_quant;
mod import_recurrent;
mod import_training;
mod storage_dtypes;
mod sub_byte;
