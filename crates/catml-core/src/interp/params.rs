use std::collections::BTreeMap;

use crate::ir::Program;

/// One parameter input.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ParamInfo {
    pub name: String,
    pub elements: usize,
    /// The tag of the first node reading it.
    pub tag: Option<String>,
}

/// Parameter counts: in total and by tag.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ParamCount {
    pub total: usize,
    /// Untagged parameters count under "untagged".
    pub by_tag: BTreeMap<String, usize>,
    pub params: Vec<ParamInfo>,
}

/// The parameter-counting fold over a program.
pub fn params(p: &Program) -> ParamCount {
    let mut count = ParamCount {
        total: 0,
        by_tag: BTreeMap::new(),
        params: Vec::new(),
    };
    for i in p.param_indices() {
        let input = &p.inputs()[i];
        let tag = p.tag_of(p.input_var(i)).map(str::to_string);
        let elements = input.ty.numel();
        count.total += elements;
        *count
            .by_tag
            .entry(tag.clone().unwrap_or_else(|| "untagged".to_string()))
            .or_default() += elements;
        count.params.push(ParamInfo {
            name: input.name.clone(),
            elements,
            tag,
        });
    }
    count
}
