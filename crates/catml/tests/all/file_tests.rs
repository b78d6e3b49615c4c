//! File tests: each `tests/files/**/*.catml` is a listing whose `;` comment lines say what to
//! run on it and what must come out (docs/file-tests.md):
//!
//! - `; test: parse` (the default), `print`, `grad`, `vjp`, `jvp` or `eval`;
//! - `; input: NAME = [..]`: an input's data for `eval` (its type is the listing's);
//! - `; check: LINE`: one line of the expected output;
//! - `; error: LINE`: one expected error, which names its line and column.
//!
//! `UPDATE_EXPECT=1` rewrites every file's `; check:` and `; error:` lines from what the run
//! gives (bless mode); review the diff.

use std::fs;
use std::path::{Path, PathBuf};

use catml::ad;
use catml::interp;
use catml::ir::{listing, Program};
use catml::prim::builtins;
use catml::tensor::{DType, Tensor};

const CHECK: &str = "; check:";
const ERROR: &str = "; error:";

fn files_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/files")
}

/// Every `.catml` file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("tests/files exists") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if path.extension().is_some_and(|x| x == "catml") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The value of the directive `; KEY: VALUE` on `line`, if it is one.
fn directive<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix(';')?.trim_start();
    let value = rest.strip_prefix(key)?.strip_prefix(':')?;
    Some(value.strip_prefix(' ').unwrap_or(value))
}

/// What running a file gives: output lines, or the errors.
#[derive(Debug, PartialEq)]
enum Outcome {
    Lines(Vec<String>),
    Errors(Vec<String>),
}

impl Outcome {
    fn expectation_lines(&self) -> Vec<String> {
        match self {
            Outcome::Lines(lines) => lines.iter().map(|l| format!("{CHECK} {l}")).collect(),
            Outcome::Errors(errors) => errors.iter().map(|e| format!("{ERROR} {e}")).collect(),
        }
    }
}

/// The tensor an `; input:` line gives for input `name` of `p`: flat data in the input's type.
fn input_tensor(p: &Program, name: &str, data: &str) -> Result<Tensor, String> {
    let input = p
        .inputs()
        .iter()
        .find(|i| i.name == name)
        .ok_or_else(|| format!("`; input: {name}`: no such input"))?;
    let values: Vec<f64> =
        serde_json::from_str(data).map_err(|e| format!("`; input: {name}`: {e}"))?;
    let dims = input.ty.dims().to_vec();
    match input.ty.dtype {
        DType::I64 => Tensor::i64(dims, values.iter().map(|&v| v as i64).collect()),
        dtype => Tensor::from_f64s(dtype, dims, values),
    }
    .map_err(|e| format!("`; input: {name}`: {e}"))
}

fn eval_lines(p: &Program, text: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for input in p.inputs() {
        let line = text
            .lines()
            .filter_map(|l| directive(l, "input"))
            .find(|l| l.split('=').next().map(str::trim) == Some(input.name.as_str()))
            .ok_or_else(|| format!("no `; input: {} = [..]` line", input.name))?;
        let data = line.split_once('=').map_or("", |(_, d)| d.trim());
        args.push(input_tensor(p, &input.name, data)?);
    }
    let out = interp::eval(p, &args).map_err(|e| e.to_string())?;
    Ok(p.output_names()
        .iter()
        .zip(out)
        .map(|(name, t)| format!("{name} = {t}"))
        .collect())
}

/// Runs the file's test on its text.
fn run(text: &str) -> Result<Outcome, String> {
    let kind = text
        .lines()
        .find_map(|l| directive(l, "test"))
        .unwrap_or("parse")
        .trim();
    let p = match listing::parse(text, builtins()) {
        Ok(p) => p,
        Err(errors) => {
            return Ok(Outcome::Errors(
                errors.0.iter().map(ToString::to_string).collect(),
            ))
        }
    };
    let printed =
        |q: &Program| Outcome::Lines(listing::print(q).lines().map(String::from).collect());
    let ad_error = |e: ad::AdError| Outcome::Errors(vec![e.to_string()]);
    Ok(match kind {
        "parse" | "print" => printed(&p),
        "grad" => ad::grad(&p).map_or_else(ad_error, |g| printed(&g.program)),
        "vjp" => ad::vjp(&p).map_or_else(ad_error, |v| printed(&v.program)),
        "jvp" => ad::jvp(&p).map_or_else(ad_error, |j| printed(&j.program)),
        "eval" => match eval_lines(&p, text) {
            Ok(lines) => Outcome::Lines(lines),
            Err(e) => Outcome::Errors(vec![e]),
        },
        other => return Err(format!("unknown `; test: {other}`")),
    })
}

/// The file's expectation, read from its `; check:` or `; error:` lines.
fn expected(text: &str) -> Outcome {
    let errors: Vec<String> = text
        .lines()
        .filter_map(|l| directive(l, "error"))
        .map(String::from)
        .collect();
    if errors.is_empty() {
        Outcome::Lines(
            text.lines()
                .filter_map(|l| directive(l, "check"))
                .map(String::from)
                .collect(),
        )
    } else {
        Outcome::Errors(errors)
    }
}

/// `text` with its expectation lines replaced by `outcome`'s, at the end of the file.
fn blessed(text: &str, outcome: &Outcome) -> String {
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| directive(l, "check").is_none() && directive(l, "error").is_none())
        .collect();
    let end = kept
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(0, |k| k + 1);
    let mut out: String = kept[..end].iter().map(|l| format!("{l}\n")).collect();
    for line in outcome.expectation_lines() {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Runs one file; returns what is wrong with it, if anything.
fn check(path: &Path, bless: bool) -> Option<String> {
    let text = fs::read_to_string(path).expect("file test is readable");
    let shown = path.strip_prefix(files_dir()).unwrap_or(path).display();
    let actual = match run(&text) {
        Ok(a) => a,
        Err(e) => return Some(format!("{shown}: {e}")),
    };
    if let Outcome::Errors(errors) = &actual {
        if let Some(e) = errors.iter().find(|e| !names_line_and_column(e)) {
            return Some(format!(
                "{shown}: the error does not name its line and column: {e}"
            ));
        }
    }
    if bless {
        fs::write(path, blessed(&text, &actual)).expect("file test is writable");
        return None;
    }
    let want = expected(&text);
    (want != actual).then(|| {
        format!(
            "{shown}\n  expected:\n    {}\n  actual:\n    {}",
            want.expectation_lines().join("\n    "),
            actual.expectation_lines().join("\n    ")
        )
    })
}

/// `line L, column C: ...`
fn names_line_and_column(error: &str) -> bool {
    let Some(rest) = error.strip_prefix("line ") else {
        return false;
    };
    let Some((line, rest)) = rest.split_once(", column ") else {
        return false;
    };
    let Some((column, _)) = rest.split_once(':') else {
        return false;
    };
    line.parse::<usize>().is_ok() && column.parse::<usize>().is_ok()
}

#[test]
fn every_file_test_gives_its_expected_output() {
    let bless = std::env::var_os("UPDATE_EXPECT").is_some();
    let files = files_under(&files_dir());
    assert!(files.len() >= 40, "{} file tests", files.len());
    let failures: Vec<String> = files.iter().filter_map(|f| check(f, bless)).collect();
    assert!(
        failures.is_empty(),
        "{} of {} file tests differ (UPDATE_EXPECT=1 to bless):\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn every_file_test_states_an_expectation() {
    let bare: Vec<PathBuf> = files_under(&files_dir())
        .into_iter()
        .filter(|f| {
            let text = fs::read_to_string(f).unwrap();
            !text
                .lines()
                .any(|l| directive(l, "check").is_some() || directive(l, "error").is_some())
        })
        .collect();
    assert!(bare.is_empty(), "file tests without expectations: {bare:?}");
}

#[test]
fn bless_moves_the_expectations_to_the_end_and_keeps_the_rest() {
    let text = "; test: parse\n; check: old\nprogram(\n; error: stale\n)\n\n";
    let outcome = Outcome::Errors(vec!["line 1, column 2: new".into()]);
    assert_eq!(
        blessed(text, &outcome),
        "; test: parse\nprogram(\n)\n; error: line 1, column 2: new\n"
    );
    assert_eq!(expected(&blessed(text, &outcome)), outcome);
    assert!(names_line_and_column(
        "line 3, column 8: unknown dtype `f16`"
    ));
    assert!(!names_line_and_column(
        "nodes[0] `y`: unknown primitive `reul`"
    ));
}
