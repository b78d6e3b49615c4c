//! The nearest valid name to a misspelt one, so that an error can say what was probably meant.

/// The candidate closest to `word` in optimal string alignment distance (a swap of two
/// neighbouring letters counts once), if it is within a third of the word's length (at least
/// one edit) and keeps some of the word. Ties go to the earlier candidate; an exact match is
/// not a suggestion.
///
/// ```
/// use catml_core::ir::suggest::nearest;
/// assert_eq!(nearest("reul", ["relu", "exp", "reshape"]), Some("relu"));
/// assert_eq!(nearest("frobnicate", ["relu", "exp"]), None);
/// ```
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let budget = (word.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == word {
            return None;
        }
        let d = strsim::osa_distance(&word.to_lowercase(), &c.to_lowercase());
        // A candidate sharing nothing with the word (`c` for `X`) is no suggestion.
        if d <= budget && d < word.chars().count() && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// ` (did you mean `NAME`?)` for the nearest candidate, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    nearest(word, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// A serde message about an unknown field or variant (`unknown field `attr`, expected one of
/// `name`, `op`, ...`) with the nearest expected name appended; other messages unchanged.
pub fn serde_message(message: &str) -> String {
    if !(message.starts_with("unknown field `") || message.starts_with("unknown variant `")) {
        return message.to_string();
    }
    // The backquoted words: the unknown one first, then the expected ones.
    let quoted: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
    match quoted.split_first() {
        Some((unknown, expected)) => {
            format!(
                "{message}{}",
                did_you_mean(unknown, expected.iter().copied())
            )
        }
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_and_single_edits_are_found() {
        assert_eq!(nearest("tga", ["name", "op", "tag"]), Some("tag"));
        assert_eq!(nearest("attr", ["name", "attrs", "tag"]), Some("attrs"));
        assert_eq!(nearest("sofmax", ["softmax", "sum"]), Some("softmax"));
        assert_eq!(nearest("relu", ["relu"]), None);
        assert_eq!(nearest("xyz", ["relu", "exp"]), None);
        assert_eq!(nearest("c", ["X", "W", "b"]), None);
        assert_eq!(nearest("bb", ["X", "W", "b"]), Some("b"));
    }

    #[test]
    fn serde_messages_gain_the_nearest_name() {
        assert_eq!(
            serde_message("unknown field `tga`, expected one of `name`, `op`, `tag` at line 1"),
            "unknown field `tga`, expected one of `name`, `op`, `tag` at line 1 (did you mean `tag`?)"
        );
        assert_eq!(
            serde_message("unknown variant `f46`, expected one of `f32`, `f64`, `i64`"),
            "unknown variant `f46`, expected one of `f32`, `f64`, `i64` (did you mean `f64`?)"
        );
        assert_eq!(serde_message("missing field `op`"), "missing field `op`");
    }
}
