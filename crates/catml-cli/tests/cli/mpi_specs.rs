//! Training specs for data-parallel runs, written into a folder: the digits CNN (8x8 UCI
//! digits, conv 1->16, pool, conv 16->32, pool, linear -> 10, cross-entropy) and the mid-size
//! MLP (784-512-512-10 tanh on seeded synthetic data), each with its module and CSV data.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use catml::ir::json;
use catml::nn::{flatten, seeded, Conv2d, Linear, Pool2d, Sequential};
use catml::tensor::TensorType;
use catml::trace::{trace_named, Value};

/// The `[distributed]` section of a spec.
pub fn distributed(shards: usize, deterministic: bool, timeout: f64) -> String {
    format!(
        "[distributed]\nshards = {shards}\ndeterministic = {deterministic}\ntimeout = {timeout}\n"
    )
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The digits as CSV rows `p0..p63,label` (pixels scaled to [0, 1]), the first `rows` of them.
fn digits_csv(rows: usize) -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../catml/examples/data/digits.csv.gz"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("digits.csv.gz"))
        .read_to_string(&mut text)
        .expect("gzip");
    let mut out: String = (0..64).map(|i| format!("p{i},")).collect();
    out.push_str("label\n");
    for line in text.lines().filter(|l| !l.trim().is_empty()).take(rows) {
        let v: Vec<f64> = line.split(',').map(|s| s.trim().parse().unwrap()).collect();
        for p in &v[..64] {
            write!(out, "{},", p / 16.0).unwrap();
        }
        writeln!(out, "{}", v[64] as i64).unwrap();
    }
    out
}

/// `dir/digits.toml` (and its module and data): the digits CNN at batch `batch` on the first
/// `rows` digits, `epochs` epochs of Adam, with `extra` appended to the spec.
pub fn digits(dir: &Path, batch: usize, rows: usize, epochs: usize, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let net = Sequential::new()
        .push("conv1", Conv2d::new(16, [3, 3]).pad(1))
        .push("relu1", |x: &Value| x.relu())
        .push("pool1", Pool2d::max([2, 2]))
        .push("conv2", Conv2d::new(32, [3, 3]).pad(1))
        .push("relu2", |x: &Value| x.relu())
        .push("pool2", Pool2d::max([2, 2]))
        .push("flatten", flatten)
        .push("out", Linear::new(10));
    let x = (
        "x",
        TensorType::new(catml::tensor::DType::F32, [batch, 1, 8, 8]),
    );
    let traced = trace_named(&[x], |v| net.apply(&v[0], &mut seeded(7), "")).unwrap();
    write(&dir.join("cnn.json"), &json::to_string(&traced.program));
    write(&dir.join("digits.csv"), &digits_csv(rows));
    let columns: Vec<String> = (0..64).map(|i| format!("\"p{i}\"")).collect();
    let spec = format!(
        r#"seed = 7
epochs = {epochs}
batch_size = {batch}

[data]
train = "digits.csv"

[objects.image]
shape = [1, 8, 8]
columns = [{}]

[objects.digit]
shape = [10]
labels = "label"

[arrows.cnn]
module = "cnn.json"
source = "image"
target = "digit"

[[supervised]]
name = "digit"
path = ["cnn"]
loss = "cross_entropy"

[optimiser]
kind = "adam"
lr = 0.003

[output]
checkpoint = "out/checkpoint.safetensors"
metrics = "out/metrics.jsonl"

{extra}"#,
        columns.join(", ")
    );
    let path = dir.join("digits.toml");
    write(&path, &spec);
    path
}

/// `dir/mlp.toml`: the 784-512-512-10 tanh MLP at batch `batch` on `rows` seeded synthetic
/// rows (label = the argmax of the first ten inputs), `epochs` epochs of SGD.
pub fn mid_mlp(dir: &Path, batch: usize, rows: usize, epochs: usize, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let module = format!(
        r#"{{
  "format": "lensir-module/1",
  "inputs": [
    {{"name":"x","shape":[{batch},784],"dtype":"f32"}},
    {{"name":"W1","shape":[512,784],"dtype":"f32"}},
    {{"name":"b1","shape":[512],"dtype":"f32"}},
    {{"name":"W2","shape":[512,512],"dtype":"f32"}},
    {{"name":"b2","shape":[512],"dtype":"f32"}},
    {{"name":"W3","shape":[10,512],"dtype":"f32"}},
    {{"name":"b3","shape":[10],"dtype":"f32"}}
  ],
  "parameters": ["W1", "b1", "W2", "b2", "W3", "b3"],
  "nodes": [
    {{"name":"h1","op":"linear","operands":["x","W1","b1"]}},
    {{"name":"a1","op":"tanh","operands":["h1"]}},
    {{"name":"h2","op":"linear","operands":["a1","W2","b2"]}},
    {{"name":"a2","op":"tanh","operands":["h2"]}},
    {{"name":"out","op":"linear","operands":["a2","W3","b3"]}}
  ],
  "outputs": ["out"]
}}"#
    );
    write(&dir.join("mlp.json"), &module);
    let mut csv: String = (0..784).map(|i| format!("x{i},")).collect();
    csv.push_str("label\n");
    let mut state = 0x9e3779b97f4a7c15u64;
    for _ in 0..rows {
        let mut row = Vec::with_capacity(784);
        for _ in 0..784 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            row.push(((state >> 11) % 1000) as f64 / 1000.0);
        }
        let label = (0..10).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
        for v in &row {
            write!(csv, "{v},").unwrap();
        }
        writeln!(csv, "{label}").unwrap();
    }
    write(&dir.join("mlp.csv"), &csv);
    let columns: Vec<String> = (0..784).map(|i| format!("\"x{i}\"")).collect();
    let spec = format!(
        r#"seed = 3
epochs = {epochs}
batch_size = {batch}

[data]
train = "mlp.csv"

[objects.x]
shape = [784]
columns = [{}]

[objects.class]
shape = [10]
labels = "label"

[arrows.mlp]
module = "mlp.json"
source = "x"
target = "class"

[[supervised]]
name = "class"
path = ["mlp"]
loss = "cross_entropy"

[optimiser]
kind = "sgd"
lr = 0.05
momentum = 0.9

{extra}"#,
        columns.join(", ")
    );
    let path = dir.join("mlp.toml");
    write(&path, &spec);
    path
}

/// `dir/triangle.toml`: examples/triangle.toml with its files, `epochs` epochs, the cosine
/// schedule's length fixed at `total` steps (so runs of different lengths share it), and
/// `extra` appended.
pub fn triangle(dir: &Path, epochs: usize, total: usize, extra: &str) -> PathBuf {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    std::fs::create_dir_all(dir.join("triangle")).unwrap();
    for f in ["f.json", "g.json", "h.json", "train.csv", "test.csv"] {
        std::fs::copy(
            examples.join("triangle").join(f),
            dir.join("triangle").join(f),
        )
        .unwrap();
    }
    let text = std::fs::read_to_string(examples.join("triangle.toml")).unwrap();
    let text = text
        .replace("epochs = 25", &format!("epochs = {epochs}"))
        .replace(
            "floor = 0.05 }",
            &format!("floor = 0.05, total = {total} }}"),
        );
    assert!(text.contains(&format!("total = {total}")));
    let path = dir.join("triangle.toml");
    write(&path, &format!("{text}\n{extra}"));
    path
}
