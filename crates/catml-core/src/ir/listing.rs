//! The CatML listing: a readable text form of a program that parses back to the same program.
//!
//! ```text
//! program(
//!   inputs:
//!     X: f64[2, 3]
//!     W: f64[3, 3] param
//!   instructions:
//!     0: XW: f64[2, 3] = matmul(X, W)
//!     1: H: f64[2, 3] = tanh(XW) tag=block
//!     2: S: f64[] = sum(H) {"axes":[0,1]}
//!   outputs: S
//! )
//! ```

use std::fmt::Write;

use serde_json::Value;

use super::json::{build, InputJson, ModuleJson, NodeJson};
use super::primitive::Attrs;
use super::validate::{ValidationError, ValidationErrors};
use super::{InputKind, Program, Registry};
use crate::tensor::{DType, TensorType};

/// Words that open a section of the listing: a value with one of these names is quoted, or its
/// line would read as the section header.
const KEYWORDS: &[&str] = &["inputs", "instructions", "outputs"];

fn is_plain(name: &str) -> bool {
    !name.is_empty()
        && !KEYWORDS.contains(&name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-/#@$%".contains(c))
}

fn write_name(out: &mut String, name: &str) {
    if is_plain(name) {
        out.push_str(name);
    } else {
        out.push_str(&serde_json::to_string(name).expect("serialisable"));
    }
}

/// Prints the listing of a program.
pub fn print(p: &Program) -> String {
    let mut out = String::from("program(\n  inputs:\n");
    for i in p.inputs() {
        out.push_str("    ");
        write_name(&mut out, &i.name);
        let _ = write!(out, ": {}", i.ty);
        if i.kind == InputKind::Param {
            out.push_str(" param");
        }
        out.push('\n');
    }
    out.push_str("  instructions:\n");
    for (k, n) in p.nodes().iter().enumerate() {
        let _ = write!(out, "    {k}: ");
        write_name(&mut out, &n.name);
        let _ = write!(out, ": {} = {}(", n.ty, n.prim.name());
        for (j, &o) in n.operands.iter().enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            write_name(&mut out, p.name(o));
        }
        out.push(')');
        let attrs = n.prim.attrs();
        if !attrs.is_empty() {
            let _ = write!(out, " {}", Value::Object(attrs));
        }
        if let Some(t) = &n.tag {
            out.push_str(" tag=");
            write_name(&mut out, t);
        }
        out.push('\n');
    }
    out.push_str("  outputs: ");
    for (j, &o) in p.outputs().iter().enumerate() {
        if j > 0 {
            out.push_str(", ");
        }
        write_name(&mut out, p.name(o));
    }
    out.push_str("\n)\n");
    out
}

/// A cursor over one line of the listing.
struct Cursor<'a> {
    rest: &'a str,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn err(&self, message: impl Into<String>) -> ValidationError {
        ValidationError::Listing {
            line: self.line,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        match self.rest.strip_prefix(token) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), ValidationError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.err(format!("expected `{token}` at `{}`", self.rest)))
        }
    }

    fn name(&mut self) -> Result<String, ValidationError> {
        self.skip_ws();
        if self.rest.starts_with('"') {
            let mut it = serde_json::Deserializer::from_str(self.rest).into_iter::<String>();
            let s = it
                .next()
                .and_then(Result::ok)
                .ok_or_else(|| self.err("bad quoted name"))?;
            self.rest = &self.rest[it.byte_offset()..];
            return Ok(s);
        }
        let end = self
            .rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_.-/#@$%".contains(c)))
            .unwrap_or(self.rest.len());
        if end == 0 {
            return Err(self.err(format!("expected a name at `{}`", self.rest)));
        }
        let (name, rest) = self.rest.split_at(end);
        self.rest = rest;
        Ok(name.to_string())
    }

    /// `f64[2, 3]`
    fn ty(&mut self) -> Result<TensorType, ValidationError> {
        self.skip_ws();
        let open = self
            .rest
            .find('[')
            .ok_or_else(|| self.err("expected a type like f64[2, 3]"))?;
        let dtype = DType::parse(&self.rest[..open])
            .ok_or_else(|| self.err(format!("unknown dtype `{}`", &self.rest[..open])))?;
        let close = self
            .rest
            .find(']')
            .ok_or_else(|| self.err("unclosed `[` in type"))?;
        let inner = &self.rest[open + 1..close];
        let dims = if inner.trim().is_empty() {
            Vec::new()
        } else {
            inner
                .split(',')
                .map(|d| d.trim().parse::<usize>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| self.err(format!("bad dimensions `[{inner}]`")))?
        };
        self.rest = &self.rest[close + 1..];
        Ok(TensorType::new(dtype, dims))
    }

    fn json_object(&mut self) -> Result<Attrs, ValidationError> {
        self.skip_ws();
        let mut it = serde_json::Deserializer::from_str(self.rest).into_iter::<Attrs>();
        let attrs = it
            .next()
            .ok_or_else(|| self.err("expected attributes"))?
            .map_err(|e| self.err(format!("bad attributes: {e}")))?;
        self.rest = &self.rest[it.byte_offset()..];
        Ok(attrs)
    }
}

fn dims_json(ty: &TensorType) -> Vec<Value> {
    ty.dims().iter().map(|&d| Value::from(d)).collect()
}

/// Parses a listing back into a program (validated like a LensIR module; node `k` is
/// instruction `k`).
pub fn parse(text: &str, registry: &Registry) -> Result<Program, ValidationErrors> {
    #[derive(PartialEq)]
    enum Section {
        Start,
        Inputs,
        Instructions,
        Done,
    }
    let mut section = Section::Start;
    let mut module = ModuleJson {
        format: None,
        inputs: Vec::new(),
        parameters: Vec::new(),
        nodes: Vec::new(),
        outputs: Vec::new(),
    };
    // Each instruction's declared type and its line.
    let mut declared: Vec<(TensorType, usize)> = Vec::new();
    let mut saw_outputs = false;
    for (i, raw) in text.lines().enumerate() {
        let mut c = Cursor {
            rest: raw.trim(),
            line: i + 1,
        };
        if c.rest.is_empty() {
            continue;
        }
        match section {
            Section::Start => {
                c.expect("program(")?;
                section = Section::Inputs;
                continue;
            }
            _ if c.eat("inputs:") => {
                section = Section::Inputs;
                continue;
            }
            _ if c.eat("instructions:") => {
                section = Section::Instructions;
                continue;
            }
            _ if c.rest.starts_with("outputs:") => {
                c.expect("outputs:")?;
                loop {
                    c.skip_ws();
                    if c.rest.is_empty() {
                        break;
                    }
                    module.outputs.push(c.name()?);
                    if !c.eat(",") {
                        break;
                    }
                }
                saw_outputs = true;
                section = Section::Done;
            }
            _ if c.rest == ")" => {
                if !saw_outputs {
                    return Err(c.err("missing `outputs:` line").into());
                }
                return finish(module, &declared, registry);
            }
            Section::Inputs => {
                let name = c.name()?;
                c.expect(":")?;
                let ty = c.ty()?;
                if c.eat("param") {
                    module.parameters.push(name.clone());
                }
                module.inputs.push(InputJson {
                    name,
                    shape: dims_json(&ty),
                    dtype: Some(ty.dtype),
                });
            }
            Section::Instructions => {
                let index: usize = {
                    let colon = c.rest.find(':').ok_or_else(|| c.err("expected `N:`"))?;
                    let n = c.rest[..colon]
                        .trim()
                        .parse()
                        .map_err(|_| c.err("expected an instruction number"))?;
                    c.rest = &c.rest[colon + 1..];
                    n
                };
                if index != module.nodes.len() {
                    return Err(c
                        .err(format!(
                            "instruction numbered {index}, expected {}",
                            module.nodes.len()
                        ))
                        .into());
                }
                let name = c.name()?;
                c.expect(":")?;
                declared.push((c.ty()?, c.line));
                c.expect("=")?;
                c.skip_ws();
                let open = c.rest.find('(').ok_or_else(|| c.err("expected `op(`"))?;
                let op = c.rest[..open].trim().to_string();
                c.rest = &c.rest[open + 1..];
                let mut operands = Vec::new();
                if !c.eat(")") {
                    loop {
                        operands.push(c.name()?);
                        if c.eat(")") {
                            break;
                        }
                        c.expect(",")?;
                    }
                }
                c.skip_ws();
                let attrs = if c.rest.starts_with('{') {
                    c.json_object()?
                } else {
                    Attrs::new()
                };
                let tag = if c.eat("tag=") { Some(c.name()?) } else { None };
                c.skip_ws();
                if !c.rest.is_empty() {
                    return Err(c.err(format!("unexpected `{}`", c.rest)).into());
                }
                module.nodes.push(NodeJson {
                    name,
                    op,
                    operands,
                    attrs,
                    tag,
                });
            }
            Section::Done => return Err(c.err(format!("unexpected `{}`", c.rest)).into()),
        }
    }
    Err(ValidationError::Listing {
        line: text.lines().count(),
        message: "unexpected end: expected `)`".to_string(),
    }
    .into())
}

fn finish(
    module: ModuleJson,
    declared: &[(TensorType, usize)],
    registry: &Registry,
) -> Result<Program, ValidationErrors> {
    let p = build(module, registry)?;
    for (k, (n, (ty, line))) in p.nodes().iter().zip(declared).enumerate() {
        if n.ty != *ty {
            return Err(ValidationError::Listing {
                line: *line,
                message: format!(
                    "instruction {k} `{}` is declared {ty} but its primitive gives {}",
                    n.name, n.ty
                ),
            }
            .into());
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Builder;
    use crate::prim::Ops;
    use crate::tensor::DType;

    #[test]
    fn values_named_like_section_headers_round_trip() {
        let mut b = Builder::new();
        let ty = TensorType::new(DType::F64, [2]);
        let x = b.input("inputs", ty.clone(), InputKind::Data).unwrap();
        let y = b.input("outputs", ty.clone(), InputKind::Param).unwrap();
        let z = b.input("instructions", ty, InputKind::Data).unwrap();
        let s = b.add(x, y).unwrap();
        let t = b.mul(s, z).unwrap();
        let p = b.finish(&[t, x]).unwrap();
        let text = print(&p);
        assert!(text.contains("\"inputs\": f64[2]"), "{text}");
        assert_eq!(parse(&text, crate::prim::builtins()).unwrap(), p);
    }
}
