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
use super::listing_places::{InputPlace, NodePlace, Places};
use super::primitive::Attrs;
use super::validate::{ValidationError, ValidationErrors};
use super::{InputKind, Program, Registry};
use crate::tensor::{DType, TensorType};

/// Words that open a section of the listing: a value with one of these names is quoted, or its
/// line would read as the section header.
const KEYWORDS: &[&str] = &["inputs", "instructions", "outputs"];

fn is_plain(name: &str) -> bool {
    !name.is_empty() && !KEYWORDS.contains(&name) && name.chars().all(is_name_char)
}

fn write_name(out: &mut String, name: &str) {
    if is_plain(name) {
        out.push_str(name);
    } else {
        out.push_str(&serde_json::to_string(name).expect("serialisable"));
    }
}

/// Prints the listing of a program. A node's body (a nested program) is printed as its own
/// listing, indented under the node's line.
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
        if let Some(body) = n.prim.body() {
            for line in print(body).lines() {
                let _ = writeln!(out, "      {line}");
            }
        }
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
    /// The whole line, for columns.
    text: &'a str,
    rest: &'a str,
    line: usize,
}

/// Characters of a plain (unquoted) name.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.-/#@$%".contains(c)
}

/// The text at the cursor as an error shows it: the next word, or the end of the line.
fn shown(rest: &str) -> String {
    let word: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
    if word.is_empty() {
        "the end of the line".to_string()
    } else {
        format!("`{word}`")
    }
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str, line: usize) -> Cursor<'a> {
        Cursor {
            text,
            rest: text.trim_end(),
            line,
        }
    }

    /// The line and column of the next non-blank character.
    fn at(&mut self) -> (usize, usize) {
        self.skip_ws();
        (self.line, self.column())
    }

    /// The 1-based column (in characters) of the cursor.
    fn column(&self) -> usize {
        // `rest` is always a suffix-trimmed tail of `text`, so the pointers share one buffer.
        let offset = self.rest.as_ptr() as usize - self.text.as_ptr() as usize;
        self.text[..offset].chars().count() + 1
    }

    fn err(&self, message: impl Into<String>) -> ValidationError {
        ValidationError::Listing {
            line: self.line,
            column: self.column(),
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

    /// Eats a keyword only when no name character follows it (`param`, not `params`).
    fn eat_word(&mut self, word: &str) -> bool {
        self.skip_ws();
        match self.rest.strip_prefix(word) {
            Some(r) if !r.starts_with(is_name_char) => {
                self.rest = r;
                true
            }
            _ => false,
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), ValidationError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.err(format!("expected `{token}`, found {}", shown(self.rest))))
        }
    }

    /// Nothing but spaces may follow; `what` says what the line may hold.
    fn end(&mut self, what: &str) -> Result<(), ValidationError> {
        self.skip_ws();
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.err(format!("unexpected {} after {what}", shown(self.rest))))
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
            .find(|c: char| !is_name_char(c))
            .unwrap_or(self.rest.len());
        if end == 0 {
            return Err(self.err(format!("expected a name, found {}", shown(self.rest))));
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
/// instruction `k`). A line whose first non-blank character is `;` is a comment. The parser is
/// strict: anything a line does not expect, including text after its last field and any text
/// after the closing `)`, is an error naming its line and column, and so is every error of the
/// type rules (an unknown primitive, operands that do not fit, a duplicate name).
pub fn parse(text: &str, registry: &Registry) -> Result<Program, ValidationErrors> {
    let lines: Vec<(usize, &str)> = text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
    parse_lines(&lines, registry, 0)
}

/// The lines of a body that starts at `lines[0]` (its `program(` line) up to its closing `)`,
/// nested bodies included; `None` when it is not closed.
fn body_extent(lines: &[(usize, &str)]) -> Option<usize> {
    let mut depth = 0usize;
    for (k, (_, raw)) in lines.iter().enumerate() {
        let line = raw.trim();
        if line.starts_with("program(") {
            depth += 1;
        } else if line == ")" {
            depth -= 1;
            if depth == 0 {
                return Some(k + 1);
            }
        }
    }
    None
}

/// Parses numbered lines as a listing; `depth` counts the bodies around it.
fn parse_lines(
    lines: &[(usize, &str)],
    registry: &Registry,
    depth: usize,
) -> Result<Program, ValidationErrors> {
    #[derive(PartialEq)]
    enum Section {
        Start,
        Inputs,
        Instructions,
        Outputs,
        Closed,
    }
    let mut section = Section::Start;
    let mut module = ModuleJson {
        format: None,
        inputs: Vec::new(),
        parameters: Vec::new(),
        nodes: Vec::new(),
        outputs: Vec::new(),
    };
    // Each instruction's declared type, its line and the column of the type.
    let mut declared: Vec<(TensorType, usize, usize)> = Vec::new();
    let mut saw_outputs = false;
    let mut places = Places::default();
    let mut next = 0;
    while next < lines.len() {
        let (line, raw) = lines[next];
        next += 1;
        let mut c = Cursor::new(raw, line);
        c.skip_ws();
        if c.rest.is_empty() || c.rest.starts_with(';') {
            continue;
        }
        match section {
            Section::Start => {
                c.expect("program(")?;
                c.end("`program(`")?;
                section = Section::Inputs;
                continue;
            }
            Section::Closed => {
                return Err(c
                    .err(format!(
                        "unexpected {} after the closing `)`",
                        shown(c.rest)
                    ))
                    .into())
            }
            _ if c.rest.starts_with("inputs:") => {
                c.expect("inputs:")?;
                c.end("`inputs:`")?;
                section = Section::Inputs;
                continue;
            }
            _ if c.rest.starts_with("instructions:") => {
                c.expect("instructions:")?;
                c.end("`instructions:`")?;
                section = Section::Instructions;
                continue;
            }
            _ if c.rest.starts_with("outputs:") => {
                c.expect("outputs:")?;
                places.outputs_line = c.at();
                // An empty list is left to the validator (a module needs an output); after a
                // comma another name must follow.
                if !c.rest.is_empty() {
                    loop {
                        places.outputs.push(c.at());
                        module.outputs.push(c.name()?);
                        if !c.eat(",") {
                            c.end("an output name (separate outputs with `,`)")?;
                            break;
                        }
                    }
                }
                saw_outputs = true;
                section = Section::Outputs;
            }
            _ if c.rest.starts_with(')') => {
                c.expect(")")?;
                c.end("the closing `)`")?;
                if !saw_outputs {
                    return Err(c.err("missing `outputs:` line").into());
                }
                section = Section::Closed;
            }
            Section::Inputs => {
                let name_at = c.at();
                let name = c.name()?;
                c.expect(":")?;
                places.inputs.push(InputPlace {
                    name: name_at,
                    ty: c.at(),
                });
                let ty = c.ty()?;
                if c.eat_word("param") {
                    module.parameters.push(name.clone());
                    c.end("`param`")?;
                } else {
                    c.end(&format!("the type {ty} (only `param` may follow it)"))?;
                }
                module.inputs.push(InputJson {
                    name,
                    shape: dims_json(&ty),
                    dtype: Some(ty.dtype),
                });
            }
            Section::Instructions if c.rest.starts_with("program(") => {
                let Some(node) = module.nodes.last_mut() else {
                    return Err(c
                        .err("a body `program(` must follow its instruction")
                        .into());
                };
                if node.body.is_some() {
                    return Err(c.err("this instruction already has a body").into());
                }
                if depth + 1 >= super::json::MAX_BODY_DEPTH {
                    return Err(c
                        .err(format!(
                            "bodies nest deeper than {} levels",
                            super::json::MAX_BODY_DEPTH
                        ))
                        .into());
                }
                let start = next - 1;
                let Some(len) = body_extent(&lines[start..]) else {
                    return Err(c.err("this body has no closing `)`").into());
                };
                let body = parse_lines(&lines[start..start + len], registry, depth + 1)?;
                node.body = Some(Box::new(super::json::module_json(&body)));
                next = start + len;
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
                let name_at = c.at();
                let name = c.name()?;
                c.expect(":")?;
                c.skip_ws();
                let column = c.column();
                declared.push((c.ty()?, c.line, column));
                c.expect("=")?;
                let op_at = c.at();
                let op_len = c
                    .rest
                    .find(|ch: char| ch == '(' || ch.is_whitespace())
                    .unwrap_or(c.rest.len());
                if op_len == 0 {
                    return Err(c
                        .err(format!("expected `op(`, found {}", shown(c.rest)))
                        .into());
                }
                let op = c.rest[..op_len].to_string();
                c.rest = &c.rest[op_len..];
                if !c.rest.starts_with('(') {
                    c.skip_ws();
                    return Err(c
                        .err(format!(
                            "expected `(` after the primitive `{op}`, found {}",
                            shown(c.rest)
                        ))
                        .into());
                }
                c.rest = &c.rest[1..];
                let mut operands = Vec::new();
                let mut operand_at = Vec::new();
                if !c.eat(")") {
                    loop {
                        operand_at.push(c.at());
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
                c.end("the instruction (only attributes `{..}` and `tag=NAME` may follow it)")?;
                places.nodes.push(NodePlace {
                    name: name_at,
                    op: op_at,
                    operands: operand_at,
                });
                module.nodes.push(NodeJson {
                    name,
                    op,
                    operands,
                    attrs,
                    tag,
                    body: None,
                });
            }
            Section::Outputs => {
                return Err(c
                    .err(format!(
                        "unexpected {} after `outputs:` (expected `)`)",
                        shown(c.rest)
                    ))
                    .into())
            }
        }
    }
    if section == Section::Closed {
        return finish(module, &declared, &places, registry);
    }
    let line = lines.last().map_or(1, |&(n, _)| n);
    let column = lines.last().map_or(0, |(_, l)| l.chars().count()) + 1;
    Err(ValidationError::Listing {
        line,
        column,
        message: "unexpected end: expected `)`".to_string(),
    }
    .into())
}

fn finish(
    module: ModuleJson,
    declared: &[(TensorType, usize, usize)],
    places: &Places,
    registry: &Registry,
) -> Result<Program, ValidationErrors> {
    let operands: Vec<Vec<String>> = module.nodes.iter().map(|n| n.operands.clone()).collect();
    let p = build(module, registry).map_err(|e| places.place_all(e, &operands))?;
    for (k, (n, (ty, line, column))) in p.nodes().iter().zip(declared).enumerate() {
        if n.ty != *ty {
            return Err(ValidationError::Listing {
                line: *line,
                column: *column,
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
