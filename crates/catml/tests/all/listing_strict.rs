//! The listing parser is strict: text a line does not expect is an error naming its line and
//! column, on every kind of line, and never turns into something else (a typo of `param` does
//! not make a data input).

use catml::ir::{listing, InputKind};
use catml::prim::builtins;

const GOOD: &str = "program(
  inputs:
    x: f64[3]
    w: f64[3] param
  instructions:
    0: y: f64[3] = mul(x, w) tag=scale
    1: s: f64[] = sum(y) {\"axes\":[0]}
  outputs: s, y
)
";

/// GOOD with line `line` (1-based) replaced by `text`.
fn with_line(line: usize, text: &str) -> String {
    GOOD.lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == line { text } else { l })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn error(text: &str) -> String {
    listing::parse(text, builtins())
        .map(|p| panic!("accepted:\n{text}\nas {p:?}"))
        .unwrap_err()
        .to_string()
}

#[test]
fn the_well_formed_listing_parses() {
    let p = listing::parse(GOOD, builtins()).unwrap();
    assert_eq!(p.inputs()[1].kind, InputKind::Param);
    assert_eq!(p.inputs()[0].kind, InputKind::Data);
    assert_eq!(p.n_nodes(), 2);
}

#[test]
fn a_misspelt_param_is_an_error_not_a_data_input() {
    assert_eq!(
        error(&with_line(4, "    w: f64[3] parm")),
        "line 4, column 15: unexpected `parm` after the type f64[3] (only `param` may follow it)"
    );
    assert_eq!(
        error(&with_line(4, "    w: f64[3] params")),
        "line 4, column 15: unexpected `params` after the type f64[3] (only `param` may follow it)"
    );
}

#[test]
fn junk_after_param_is_an_error() {
    assert_eq!(
        error(&with_line(4, "    W1: f64[3] param garbage!!! %%%")),
        "line 4, column 22: unexpected `garbage!!!` after `param`"
    );
}

#[test]
fn junk_after_an_instruction_is_an_error() {
    assert_eq!(
        error(&with_line(6, "    0: y: f64[3] = mul(x, w) tag=scale extra")),
        "line 6, column 40: unexpected `extra` after the instruction (only attributes `{..}` and `tag=NAME` may follow it)"
    );
    assert_eq!(
        error(&with_line(6, "    0: y: f64[3] = mul x(x, w)")),
        "line 6, column 24: expected `(` after the primitive `mul`, found `x(x,`"
    );
}

#[test]
fn junk_after_section_headers_is_an_error() {
    assert_eq!(
        error(&with_line(1, "program( x")),
        "line 1, column 10: unexpected `x` after `program(`"
    );
    assert_eq!(
        error(&with_line(2, "  inputs: x: f64[3]")),
        "line 2, column 11: unexpected `x:` after `inputs:`"
    );
    assert_eq!(
        error(&with_line(5, "  instructions: 0")),
        "line 5, column 17: unexpected `0` after `instructions:`"
    );
}

#[test]
fn outputs_need_commas_and_nothing_after() {
    assert_eq!(
        error(&with_line(8, "  outputs: s y")),
        "line 8, column 14: unexpected `y` after an output name (separate outputs with `,`)"
    );
    assert_eq!(
        error(&with_line(8, "  outputs: s, ")),
        "line 8, column 14: expected a name, found the end of the line"
    );
}

#[test]
fn junk_at_or_after_the_closing_paren_is_an_error() {
    assert_eq!(
        error(&with_line(9, ") trailing")),
        "line 9, column 3: unexpected `trailing` after the closing `)`"
    );
    let text = format!("{GOOD}\n  more\n");
    assert_eq!(
        error(&text),
        "line 11, column 3: unexpected `more` after the closing `)`"
    );
}

#[test]
fn a_line_after_outputs_must_close_the_program() {
    assert_eq!(
        error(&with_line(9, "    z: f64[3]")),
        "line 9, column 5: unexpected `z:` after `outputs:` (expected `)`)"
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    assert_eq!(
        error(&with_line(4, "    \"wé\": f64[3] parm")),
        "line 4, column 18: unexpected `parm` after the type f64[3] (only `param` may follow it)"
    );
}
