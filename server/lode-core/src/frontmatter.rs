//! Frontmatter: the YAML block at the top of a note, read as flat `key: value` metadata.
//! Only top-level scalar keys and inline lists are understood; anything nested is ignored.

/// Parses the text of a frontmatter block (including its `---` fences) into lowercase keys and
/// unquoted values, in order. Inline lists (`[a, b]`) keep their brackets.
pub fn parse(block: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in block.lines() {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "+++" || trimmed.starts_with(' ') || trimmed.starts_with('\t') || trimmed.starts_with('#') {
            continue;
        }
        let sep = if block.starts_with("+++") { '=' } else { ':' };
        let Some((k, v)) = trimmed.split_once(sep) else { continue };
        let key = k.trim().to_lowercase();
        if key.is_empty() || key.contains(' ') {
            continue;
        }
        out.push((key, value(v).to_owned()));
    }
    out
}

/// The value of a `key: value` line: unquoted, without a trailing comment. A `#` starts a
/// comment only when whitespace precedes it (as in YAML and TOML), so `a#b` and `#` inside
/// quotes stay. A quoted value followed by a comment (`"a # b" # note`) keeps its quoted text.
fn value(raw: &str) -> &str {
    let v = raw.trim();
    for q in ['"', '\''] {
        let Some(inner) = v.strip_prefix(q) else { continue };
        if let Some(end) = inner.find(q) {
            if inner[end + 1..].trim_start().starts_with('#') {
                return &inner[..end];
            }
        }
        if let Some(inner) = inner.strip_suffix(q) {
            return inner;
        }
    }
    strip_comment(raw).trim()
}

/// `v` up to a `#` that starts a comment: the first one at the start or after whitespace.
pub fn strip_comment(v: &str) -> &str {
    let mut prev_space = true;
    for (i, c) in v.char_indices() {
        if c == '#' && prev_space {
            return &v[..i];
        }
        prev_space = c.is_whitespace();
    }
    v
}

/// Interprets a frontmatter value as a boolean flag (`true`, `yes`, `on`, `1`). A trailing
/// comment is ignored, so metadata stored before comments were stripped still reads as the flag.
pub fn is_true(v: &str) -> bool {
    let v = v.trim();
    let v = strip_comment(v).trim();
    let v = v.strip_prefix(['"', '\'']).and_then(|x| x.strip_suffix(['"', '\''])).unwrap_or(v);
    matches!(v.trim().to_lowercase().as_str(), "true" | "yes" | "on" | "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scalars_and_skips_nested() {
        let fm = "---\ntitle: \"Ledger API\"\ntags: [a, b]\nowner:\n  name: x\nNo-Egress: yes\n---";
        assert_eq!(
            parse(fm),
            vec![
                ("title".into(), "Ledger API".into()),
                ("tags".into(), "[a, b]".into()),
                ("owner".into(), "".into()),
                ("no-egress".into(), "yes".into()),
            ]
        );
        assert!(is_true("yes"));
    }

    #[test]
    fn inline_comments_are_not_values() {
        let fm = "---\nno_egress: true  # private\nno-egress: yes # x\nurl: a#b\nquoted: \"x # y\"\nsingle: 'x # y' # note\n\
            hash: #\ntags: [a, b] # c\nempty:\ntitle: C# notes\ninner: \"a\"b\"\n---";
        assert_eq!(
            parse(fm),
            vec![
                ("no_egress".into(), "true".into()),
                ("no-egress".into(), "yes".into()),
                ("url".into(), "a#b".into()),
                ("quoted".into(), "x # y".into()),
                ("single".into(), "x # y".into()),
                ("hash".into(), "".into()),
                ("tags".into(), "[a, b]".into()),
                ("empty".into(), "".into()),
                ("title".into(), "C# notes".into()),
                ("inner".into(), "a\"b".into()),
            ]
        );
        let toml = "+++\nno_egress = \"true\" # private\n+++";
        assert_eq!(parse(toml), vec![("no_egress".into(), "true".into())]);
        for v in ["true  # private", "yes # x", "\"true\"", " on ", "1"] {
            assert!(is_true(v), "{v:?}");
        }
        for v in ["false # true", "# true", "no", "", "truely"] {
            assert!(!is_true(v), "{v:?}");
        }
    }
}
