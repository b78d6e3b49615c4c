//! Text from outside never panics the readers: mutated listings and LensIR modules are
//! either read or rejected with an error.

use catml::ir::{json, listing};
use catml::prim::builtins;
use proptest::prelude::*;

const LISTING: &str = r#"program(
  inputs:
    X: f64[2, 3]
    "w 0": f64[3, 3] param
  instructions:
    0: XW: f64[2, 3] = matmul(X, "w 0") {"transpose_b":true}
    1: H: f64[2, 3] = tanh(XW) tag=block
    2: S: f64[] = sum(H) {"axes":[0,1]}
  outputs: S, H
)
"#;

const MODULE: &str = r#"{"format": "lensir-module/1",
 "inputs": [{"name": "X", "shape": [2, 3], "dtype": "f64"}, {"name": "W", "shape": [3, 3]}],
 "parameters": ["W"],
 "nodes": [{"name": "XW", "op": "matmul", "operands": ["X", "W"], "attrs": {"transpose_b": true}},
           {"name": "H", "op": "tanh", "operands": ["XW"], "tag": "block"},
           {"name": "S", "op": "sum", "operands": ["H"], "attrs": {"axes": [0, 1]}}],
 "outputs": ["S", "H"]}"#;

/// `text` with the byte range at `at` (of length `len`) replaced by `insert`, kept on char
/// boundaries.
fn mutate(text: &str, at: usize, len: usize, insert: &str) -> String {
    let mut start = at % (text.len() + 1);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + len).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    format!("{}{}{}", &text[..start], insert, &text[end..])
}

const PIECES: &[&str] = &[
    "",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ":",
    ",",
    "\"",
    "0",
    "-1",
    "f32",
    "param",
    "tag=",
    "=",
    "\n",
    " ",
    "outputs:",
    "inputs:",
    "instructions:",
    "99999999999999999999",
    "é",
    "[]",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn mutated_listings_do_not_panic(at in 0usize..400, len in 0usize..4, piece in 0..PIECES.len()) {
        let text = mutate(LISTING, at, len, PIECES[piece]);
        let _ = listing::parse(&text, builtins());
    }

    #[test]
    fn mutated_modules_do_not_panic(at in 0usize..600, len in 0usize..4, piece in 0..PIECES.len()) {
        let text = mutate(MODULE, at, len, PIECES[piece]);
        let _ = json::from_str(&text, builtins());
    }
}

#[test]
fn the_unmutated_texts_are_valid() {
    let p = listing::parse(LISTING, builtins()).unwrap();
    assert_eq!(p.n_nodes(), 3);
    let q = json::from_str(MODULE, builtins()).unwrap();
    assert_eq!(q.n_nodes(), 3);
}
