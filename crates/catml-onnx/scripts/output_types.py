"""Writes src/ops/output_types.rs: for each default-domain ONNX operator, which input's element
type each output has (the operator schemas' shared type constraints), from the pinned `onnx`.

    python crates/catml-onnx/scripts/output_types.py > crates/catml-onnx/src/ops/output_types.rs
"""

import onnx.defs

rows = {}
for schema in onnx.defs.get_all_schemas():
    if schema.domain != "":
        continue
    outs = []
    for o in schema.outputs:
        same = [i for i, x in enumerate(schema.inputs) if x.type_str == o.type_str]
        outs.append(str(same[0]) if same and not o.type_str.startswith("tensor(") else "NONE")
    if any(o != "NONE" for o in outs):
        rows[schema.name] = outs

print("//! For each default-domain operator, the input whose element type each output shares (the")
print("//! schemas' type constraints; `None` when the output's type is its own). Written by")
print("//! `scripts/output_types.py` from the pinned `onnx` package.")
print()
print("const NONE: Option<usize> = None;")
print()
print("/// (op type, per output: the input index whose element type it has), sorted by op type.")
print("pub const OUTPUT_TYPES: &[(&str, &[Option<usize>])] = &[")
for name in sorted(rows):
    outs = ", ".join(o if o == "NONE" else f"Some({o})" for o in rows[name])
    print(f'    ("{name}", &[{outs}]),')
print("];")
