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
        out.push((key, unquote(v.trim()).to_owned()));
    }
    out
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// Interprets a frontmatter value as a boolean flag (`true`, `yes`, `on`, `1`).
pub fn is_true(v: &str) -> bool {
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
}
