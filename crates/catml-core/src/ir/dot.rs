//! Graphviz DOT pictures of programs (pure text; rendering is up to `dot`).
//!
//! - a node is a rounded box: `name = op`, its type, and its attributes (shortened);
//! - a data input is an ellipse, a parameter a filled box marked `param`;
//! - each output occurrence is a filled marker labelled with its name
//!   ([`Program::output_names`]: `grad.W` in a VJP program) with an edge from its value;
//! - nodes of one tag sit in a cluster labelled `tag <name>`, with the parameters that tag
//!   reads first (as [`Program::tag_of`] assigns them);
//! - an edge into a node with several operands is labelled with the operand's position.
//!
//! [`side_by_side`] draws several programs as clusters of one graph (a program and its VJP).

use std::fmt::Write;

use serde_json::Value;

use super::{Def, InputKind, Program, Var};

/// Attribute text longer than this is cut (constants carry whole tensors).
const MAX_ATTR_CHARS: usize = 40;

/// The DOT text of one program.
///
/// ```
/// use catml_core::ir::{dot, Builder, InputKind};
/// use catml_core::prim::Ops;
/// use catml_core::tensor::{DType, TensorType};
///
/// let mut b = Builder::new();
/// let x = b.input("x", TensorType::new(DType::F64, [2]), InputKind::Data).unwrap();
/// let y = b.tanh(x).unwrap();
/// let text = dot::program(&b.finish(&[y]).unwrap());
/// assert!(text.starts_with("digraph program {"));
/// assert!(text.contains("v0 -> v1;"));
/// ```
pub fn program(p: &Program) -> String {
    let mut out = header();
    write_program(&mut out, p, "", "  ");
    out.push_str("}\n");
    out
}

/// One graph with each program in its own cluster labelled by its title, e.g.
/// `[("forward", &p), ("reverse (vjp)", &v.program)]`.
pub fn side_by_side(parts: &[(&str, &Program)]) -> String {
    let mut out = header();
    for (k, (title, p)) in parts.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_p{k} {{");
        let _ = writeln!(out, "    label=\"{}\";", escape(title));
        out.push_str("    style=dashed;\n");
        write_program(&mut out, p, &format!("p{k}_"), "    ");
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

fn header() -> String {
    let mut out = String::from("digraph program {\n");
    out.push_str("  rankdir=TB;\n");
    out.push_str("  node [fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
    out
}

/// Escapes a DOT string body.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn short_attrs(p: &Program, v: Var) -> Option<String> {
    let Def::Node(n) = p.def(v) else { return None };
    let attrs = n.prim.attrs();
    if attrs.is_empty() {
        return None;
    }
    let text = Value::Object(attrs).to_string();
    Some(if text.chars().count() > MAX_ATTR_CHARS {
        let cut: String = text.chars().take(MAX_ATTR_CHARS).collect();
        format!("{cut}…")
    } else {
        text
    })
}

/// The statement declaring value `v`.
fn value_statement(p: &Program, v: Var, id: &str) -> String {
    match p.def(v) {
        Def::Input(i) => match i.kind {
            InputKind::Data => format!(
                "{id} [label=\"{}\\n{}\", shape=ellipse];",
                escape(&i.name),
                i.ty
            ),
            InputKind::Param => format!(
                "{id} [label=\"{}\\n{}\\nparam\", shape=box, style=filled, fillcolor=\"#fff2cc\"];",
                escape(&i.name),
                i.ty
            ),
        },
        Def::Node(n) => {
            let mut label = format!("{} = {}\\n{}", escape(&n.name), escape(n.prim.name()), n.ty);
            if let Some(a) = short_attrs(p, v) {
                let _ = write!(label, "\\n{}", escape(&a));
            }
            format!("{id} [label=\"{label}\", shape=box, style=rounded];")
        }
    }
}

fn write_program(out: &mut String, p: &Program, prefix: &str, indent: &str) {
    let id = |v: Var| format!("{prefix}v{}", v.index());
    // Tags in order of first appearance, each with the values it holds.
    let mut tags: Vec<(&str, Vec<Var>)> = Vec::new();
    let mut untagged = Vec::new();
    for i in 0..p.n_vars() {
        let v = Var(i as u32);
        let tag = match p.def(v) {
            Def::Input(input) if input.kind == InputKind::Data => None,
            _ => p.tag_of(v),
        };
        match tag {
            None => untagged.push(v),
            Some(t) => match tags.iter_mut().find(|(name, _)| *name == t) {
                Some((_, vars)) => vars.push(v),
                None => tags.push((t, vec![v])),
            },
        }
    }
    for v in untagged {
        let _ = writeln!(out, "{indent}{}", value_statement(p, v, &id(v)));
    }
    for (k, (tag, vars)) in tags.iter().enumerate() {
        let _ = writeln!(out, "{indent}subgraph cluster_{prefix}tag{k} {{");
        let _ = writeln!(out, "{indent}  label=\"tag {}\";", escape(tag));
        let _ = writeln!(out, "{indent}  style=rounded; color=\"#6d9eeb\";");
        for &v in vars {
            let _ = writeln!(out, "{indent}  {}", value_statement(p, v, &id(v)));
        }
        let _ = writeln!(out, "{indent}}}");
    }
    for (i, n) in p.nodes().iter().enumerate() {
        let target = id(p.node_var(i));
        for (k, &o) in n.operands.iter().enumerate() {
            if n.operands.len() > 1 {
                let _ = writeln!(out, "{indent}{} -> {target} [label=\"{k}\"];", id(o));
            } else {
                let _ = writeln!(out, "{indent}{} -> {target};", id(o));
            }
        }
    }
    for (k, (&o, name)) in p.outputs().iter().zip(p.output_names()).enumerate() {
        let marker = format!("{prefix}out{k}");
        let _ = writeln!(
            out,
            "{indent}{marker} [label=\"{}\", shape=invhouse, style=filled, fillcolor=\"#d9ead3\"];",
            escape(&name)
        );
        let _ = writeln!(out, "{indent}{} -> {marker};", id(o));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Builder;
    use crate::prim::Ops;
    use crate::tensor::{DType, TensorType};

    fn tagged_program() -> Program {
        let t = TensorType::new(DType::F64, [2]);
        let mut b = Builder::new();
        let x = b.input("x \"in\"", t.clone(), InputKind::Data).unwrap();
        let w = b.input("lin.w", t, InputKind::Param).unwrap();
        b.set_tag(Some("lin".to_string()));
        let y = b.mul(x, w).unwrap();
        b.set_tag(None);
        let z = b.tanh(y).unwrap();
        b.finish(&[z, y]).unwrap()
    }

    #[test]
    fn names_are_escaped_and_parameters_marked() {
        let text = program(&tagged_program());
        assert!(text.contains(r#"v0 [label="x \"in\"\nf64[2]", shape=ellipse];"#));
        assert!(text.contains(r#"v1 [label="lin.w\nf64[2]\nparam", shape=box"#));
    }

    #[test]
    fn a_tag_is_a_cluster_holding_its_nodes_and_parameters() {
        let text = program(&tagged_program());
        let cluster = text
            .split("subgraph cluster_tag0 {")
            .nth(1)
            .and_then(|s| s.split("  }").next())
            .unwrap();
        assert!(cluster.contains("label=\"tag lin\""));
        assert!(cluster.contains("v1 [label=\"lin.w"));
        assert!(cluster.contains("v2 [label=\"t = mul"));
        assert!(!cluster.contains("v3 ["));
    }

    #[test]
    fn operand_positions_and_every_output_occurrence_are_drawn() {
        let text = program(&tagged_program());
        assert!(text.contains("v0 -> v2 [label=\"0\"];"));
        assert!(text.contains("v1 -> v2 [label=\"1\"];"));
        assert!(text.contains("v2 -> v3;"));
        assert!(text.contains("v3 -> out0;"));
        assert!(text.contains("v2 -> out1;"));
        assert!(text.contains("out0 [label=\"t.1\", shape=invhouse"));
        assert!(text.contains("out1 [label=\"t\", shape=invhouse"));
    }

    #[test]
    fn side_by_side_prefixes_ids_so_the_programs_stay_apart() {
        let p = tagged_program();
        let text = side_by_side(&[("forward", &p), ("again", &p)]);
        assert!(text.contains("subgraph cluster_p0 {"));
        assert!(text.contains("subgraph cluster_p1 {"));
        assert!(text.contains("p0_v0 -> p0_v2"));
        assert!(text.contains("p1_v0 -> p1_v2"));
        assert!(text.contains("subgraph cluster_p1_tag0 {"));
    }

    #[test]
    fn long_attributes_are_cut() {
        let mut b = Builder::new();
        let c = b
            .constant(crate::tensor::Tensor::f64([20], vec![0.125; 20]).unwrap())
            .unwrap();
        let text = program(&b.finish(&[c]).unwrap());
        let line = text.lines().find(|l| l.contains("constant")).unwrap();
        assert!(line.contains('…'), "{line}");
        assert!(line.len() < 160, "{line}");
    }
}
