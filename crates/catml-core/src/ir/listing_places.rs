//! Where each part of a listing sits, so that a validation error found after parsing (an
//! unknown primitive, an operand type mismatch, a duplicate name) names its line and column like
//! a parse error does.

use super::validate::{ValidationError, ValidationErrors};

/// The line and the 1-based column (in characters) of a piece of the listing.
pub(crate) type At = (usize, usize);

/// One input line: its name and its type.
pub(crate) struct InputPlace {
    pub name: At,
    pub ty: At,
}

/// One instruction line: its name, its primitive and each operand.
pub(crate) struct NodePlace {
    pub name: At,
    pub op: At,
    pub operands: Vec<At>,
}

#[derive(Default)]
pub(crate) struct Places {
    pub inputs: Vec<InputPlace>,
    pub nodes: Vec<NodePlace>,
    /// The `outputs:` line, just after the keyword.
    pub outputs_line: At,
    pub outputs: Vec<At>,
}

impl Places {
    /// `inputs[i]` or `nodes[k]`, as the validator names a definition.
    fn definition(&self, place: &str) -> Option<At> {
        let index = |prefix: &str| {
            place
                .strip_prefix(prefix)?
                .strip_suffix(']')?
                .parse::<usize>()
                .ok()
        };
        if let Some(i) = index("inputs[") {
            return self.inputs.get(i).map(|p| p.name);
        }
        self.nodes.get(index("nodes[")?).map(|n| n.name)
    }

    /// The operand named `operand` of instruction `index` (its first use).
    fn operand(&self, index: usize, operands: &[String], operand: &str) -> Option<At> {
        let k = operands.iter().position(|o| o == operand)?;
        self.nodes.get(index)?.operands.get(k).copied()
    }

    /// `e` told at its line and column, in the listing's words; an error with no place in a
    /// listing is returned as it is.
    fn place(&self, e: ValidationError, operands: &[Vec<String>]) -> ValidationError {
        use ValidationError as E;
        let node = |i: usize| self.nodes.get(i);
        let placed = match &e {
            E::Duplicate { place, name, first } => self.definition(place).map(|at| {
                let first = self.definition(first).map_or(String::new(), |(l, _)| {
                    format!(" (first defined on line {l})")
                });
                (at, format!("`{name}` is defined twice{first}"))
            }),
            E::InvalidDim {
                index, dim, shape, ..
            } => self.inputs.get(*index).map(|p| {
                (
                    p.ty,
                    format!(
                        "invalid dimension {dim} in shape {shape}, expected a positive integer"
                    ),
                )
            }),
            E::TooManyElements {
                index, shape, max, ..
            } => self.inputs.get(*index).map(|p| {
                (
                    p.ty,
                    format!("shape {shape} has too many elements (at most {max} allowed)"),
                )
            }),
            E::UnknownPrimitive {
                index,
                op,
                suggestion,
                ..
            } => node(*index).map(|n| {
                let hint = suggestion
                    .as_ref()
                    .map_or(String::new(), |s| format!(" (did you mean `{s}`?)"));
                (n.op, format!("unknown primitive `{op}`{hint}"))
            }),
            E::Type {
                index,
                name,
                op,
                source,
            } => node(*index).map(|n| (n.op, format!("`{name}` ({op}): {source}"))),
            E::UseBeforeDef {
                index,
                operand,
                defined_at,
                ..
            } => {
                let at = self.operand(*index, &operands[*index], operand);
                at.map(|at| {
                    let line = node(*defined_at).map_or(0, |n| n.name.0);
                    (
                        at,
                        format!("operand `{operand}` is used before its definition on line {line}"),
                    )
                })
            }
            E::UnknownOperand { index, operand, .. } => self
                .operand(*index, &operands[*index], operand)
                .map(|at| (at, format!("unknown operand `{operand}`"))),
            E::NoOutputs => Some((
                self.outputs_line,
                "a program needs at least one output".to_string(),
            )),
            E::UnknownOutput { index, name } => self
                .outputs
                .get(*index)
                .map(|&at| (at, format!("unknown output `{name}`"))),
            _ => None,
        };
        match placed {
            Some(((line, column), message)) => E::Listing {
                line,
                column,
                message,
            },
            None => e,
        }
    }

    /// Every error of `errors` at its place, in order of position.
    pub(crate) fn place_all(
        &self,
        errors: ValidationErrors,
        operands: &[Vec<String>],
    ) -> ValidationErrors {
        let mut placed: Vec<ValidationError> = errors
            .0
            .into_iter()
            .map(|e| self.place(e, operands))
            .collect();
        placed.sort_by_key(|e| match e {
            ValidationError::Listing { line, column, .. } => (*line, *column),
            _ => (0, 0),
        });
        ValidationErrors(placed)
    }
}
