//! JSON on stdout: by default each tensor (and each small record) on one line inside an
//! indented outline, so a result reads row by row; `--pretty` gives one number per line.

use serde_json::Value;

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

/// A list of scalars: written on one line.
fn is_flat(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.iter().all(is_scalar),
        v => is_scalar(v),
    }
}

/// A tensor, or a record of scalars and lists of scalars: written on one line.
fn is_leaf(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("data") || m.values().all(is_flat),
        v => is_flat(v),
    }
}

fn write(v: &Value, indent: usize, out: &mut String) {
    let pad = |n: usize, out: &mut String| out.extend(std::iter::repeat_n(' ', n));
    if is_leaf(v) {
        out.push_str(&serde_json::to_string(v).expect("serialisable"));
        return;
    }
    let (open, close, items): (char, char, Vec<(Option<&String>, &Value)>) = match v {
        Value::Object(m) => ('{', '}', m.iter().map(|(k, v)| (Some(k), v)).collect()),
        Value::Array(a) => ('[', ']', a.iter().map(|v| (None, v)).collect()),
        _ => unreachable!("scalars are leaves"),
    };
    out.push(open);
    out.push('\n');
    for (i, (key, item)) in items.iter().enumerate() {
        pad(indent + 2, out);
        if let Some(k) = key {
            out.push_str(&serde_json::to_string(k).expect("serialisable"));
            out.push_str(": ");
        }
        write(item, indent + 2, out);
        if i + 1 < items.len() {
            out.push(',');
        }
        out.push('\n');
    }
    pad(indent, out);
    out.push(close);
}

/// The text of a result: compact (tensors on one line) or pretty (one value per line).
pub fn render(v: &Value, pretty: bool) -> String {
    let mut s = if pretty {
        serde_json::to_string_pretty(v).expect("serialisable")
    } else {
        let mut s = String::new();
        write(v, 0, &mut s);
        s
    };
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tensors_sit_on_one_line_and_the_text_reads_back() {
        let v = json!({"outputs": [{"name": "y", "dtype": "f64", "shape": [2], "data": [1.0, 2.5]}],
                       "by_tag": {"t": {"parameters": ["W"], "elements": 2}}, "bytes": 16});
        let text = render(&v, false);
        assert_eq!(
            text,
            "{\n  \"by_tag\": {\n    \"t\": {\"elements\":2,\"parameters\":[\"W\"]}\n  },\n  \"bytes\": 16,\n  \"outputs\": [\n    {\"data\":[1.0,2.5],\"dtype\":\"f64\",\"name\":\"y\",\"shape\":[2]}\n  ]\n}\n"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }
}
