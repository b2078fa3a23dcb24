//! Chunker tests: invariants and snapshots over every note of the example vault, plus the bad
//! inputs a vault really contains (invalid UTF-8, giant tables, deep nesting, long prose).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use expect_test::expect_file;

use super::*;

fn vault_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vault")
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

/// Checks what every caller relies on, for any input.
fn check_invariants(raw: &[u8], note: &ChunkedNote, cfg: &ChunkConfig) {
    let mut last_start = 0;
    for p in &note.passages {
        assert!(p.range.start < p.range.end && p.range.end <= raw.len(), "range {:?}", p.range);
        assert!(p.range.start >= last_start, "passages out of order");
        last_start = p.range.start;
        let text = String::from_utf8_lossy(&raw[p.range.clone()]);
        assert_eq!(text.trim(), text, "passage not trimmed: {text:?}");
        assert!(p.parent.start <= p.range.start && p.range.end <= p.parent.end, "parent does not contain passage");
        if let Some(fm) = &note.frontmatter {
            assert!(p.range.start >= fm.end, "frontmatter became a passage");
        }
        // Split pieces are bounded; a whole block that fits is too.
        if p.split {
            assert!(crate::text::token_count(&text) <= cfg.max_tokens.max(8), "piece over budget");
        }
    }
    let again = chunk_note(raw, cfg);
    assert_eq!(again.passages, note.passages, "chunking is not deterministic");
}

fn render(raw: &[u8], note: &ChunkedNote) -> String {
    let mut s = String::new();
    writeln!(s, "title: {:?}", note.title).unwrap();
    if let Some(fm) = &note.frontmatter {
        writeln!(s, "frontmatter: {:?} {:?}", fm, note.meta).unwrap();
    }
    for l in &note.links {
        writeln!(s, "link: {} {:?} @{:?}", l.kind.as_str(), l.target, l.range).unwrap();
    }
    for (i, p) in note.passages.iter().enumerate() {
        writeln!(
            s,
            "\n#{i} {} {:?} [{}] parent={:?}{}",
            p.kind.as_str(),
            p.range,
            p.heading_path.join(" › "),
            p.parent,
            if p.split { " split" } else { "" }
        )
        .unwrap();
        writeln!(s, "{}", String::from_utf8_lossy(&raw[p.range.clone()])).unwrap();
    }
    s
}

#[test]
fn example_vault_snapshots() {
    let mut files = Vec::new();
    markdown_files(&vault_dir(), &mut files);
    assert!(files.len() >= 12, "example vault has {} notes", files.len());
    let cfg = ChunkConfig::default();
    for f in files {
        let raw = std::fs::read(&f).unwrap();
        let note = chunk_note(&raw, &cfg);
        check_invariants(&raw, &note, &cfg);
        assert!(!note.passages.is_empty(), "{} has no passages", f.display());
        let rel = f.strip_prefix(vault_dir()).unwrap().to_string_lossy().replace('/', "__");
        let snap = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/chunks").join(format!("{rel}.txt"));
        expect_file![snap].assert_eq(&render(&raw, &note));
    }
}

fn kinds(md: &str, cfg: &ChunkConfig) -> Vec<(String, String)> {
    let note = chunk_note(md.as_bytes(), cfg);
    check_invariants(md.as_bytes(), &note, cfg);
    note.passages.iter().map(|p| (p.kind.as_str().to_owned(), md[p.range.clone()].to_owned())).collect()
}

#[test]
fn structure_becomes_passages() {
    let md = "---\ntitle: Runbook\nno_egress: true\n---\n# Rotate\n\nIntro para.\n\n1. Stop it.\n   - sub bullet\n2. Start `x`.\n\n> quoted\n\n```sh\nls\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Empty\n\n## Last\nEnd.\n";
    let got = kinds(md, &ChunkConfig::default());
    let want: Vec<(String, String)> = [
        ("paragraph", "Intro para."),
        ("list_item", "1. Stop it.\n   - sub bullet"),
        ("list_item", "2. Start `x`."),
        ("quote", "> quoted"),
        ("code", "```sh\nls\n```"),
        ("table", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("heading", "## Empty"),
        ("paragraph", "End."),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
    let note = chunk_note(md.as_bytes(), &ChunkConfig::default());
    assert_eq!(note.title.as_deref(), Some("Runbook"));
    assert_eq!(note.passages[1].heading_path, ["Rotate"]);
    assert!(note.meta.contains(&("no_egress".into(), "true".into())));
}

#[test]
fn long_paragraph_splits_at_sentences_with_overlap() {
    let sentence = |i: usize| format!("Sentence number {i} has exactly seven words.");
    let md: String = (0..20).map(sentence).collect::<Vec<_>>().join(" ");
    let cfg = ChunkConfig { max_tokens: 30, overlap_tokens: 8, max_depth: 48 };
    let note = chunk_note(md.as_bytes(), &cfg);
    check_invariants(md.as_bytes(), &note, &cfg);
    assert!(note.passages.len() > 4);
    for w in note.passages.windows(2) {
        assert!(w[1].range.start < w[0].range.end, "consecutive pieces overlap");
        assert!(md[w[1].range.clone()].starts_with("Sentence"), "pieces start at a sentence");
    }
    assert_eq!(note.passages.last().unwrap().range.end, md.len());
}

#[test]
fn oversized_list_item_splits_into_its_children() {
    let long = "word ".repeat(50);
    let md = format!("1. Step one.\n2. {long}\n\n   continued para.\n3. Step three.\n");
    let cfg = ChunkConfig { max_tokens: 40, overlap_tokens: 5, max_depth: 48 };
    let got = kinds(&md, &cfg);
    assert_eq!(got[0], ("list_item".into(), "1. Step one.".into()));
    assert_eq!(got.last().unwrap(), &("list_item".into(), "3. Step three.".into()));
    assert!(got.iter().any(|(_, t)| t == "continued para."));
}

#[test]
fn bad_inputs_never_panic_and_keep_invariants() {
    let cfg = ChunkConfig::default();
    let mut cases: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"   \n\n".to_vec(),
        b"caf\xe9 au lait \xff\xfe. Next sentence.\n\n# H\xc3\n\nbody".to_vec(),
        "日本語のテキスト".repeat(2000).into_bytes(),
        "x".repeat(100_000).into_bytes(),
        b"\0\0\0binary\0".to_vec(),
        b"---\ntitle: only frontmatter\n---\n".to_vec(),
        "\r\n# CRLF\r\n\r\npara one\r\n\r\n- a\r\n- b\r\n".as_bytes().to_vec(),
    ];
    let mut table = String::from("| a | b | c |\n|---|---|---|\n");
    for i in 0..20_000 {
        writeln!(table, "| row {i} | value {i} | more text {i} |").unwrap();
    }
    cases.push(table.into_bytes());
    let mut nested = String::new();
    for depth in 0..400 {
        writeln!(nested, "{}- level {depth}", "  ".repeat(depth)).unwrap();
    }
    cases.push(nested.into_bytes());
    let quotes = format!("{} deep\n", ">".repeat(300));
    cases.push(quotes.into_bytes());
    for raw in cases {
        let note = chunk_note(&raw, &cfg);
        check_invariants(&raw, &note, &cfg);
        let body = &raw[note.frontmatter.as_ref().map_or(0, |f| f.end)..];
        let nonblank = body.iter().any(|b| !b.is_ascii_whitespace());
        assert_eq!(!note.passages.is_empty(), nonblank, "passages for {:?}", String::from_utf8_lossy(&raw[..raw.len().min(40)]));
    }
}

#[test]
fn giant_table_is_split_into_row_groups() {
    let mut table = String::from("| a | b |\n|---|---|\n");
    for i in 0..500 {
        writeln!(table, "| r{i} | v{i} |").unwrap();
    }
    let cfg = ChunkConfig::default();
    let note = chunk_note(table.as_bytes(), &cfg);
    assert!(note.passages.len() > 5);
    for p in &note.passages {
        assert_eq!(p.kind, PassageKind::Table);
        assert!(table[p.range.clone()].starts_with('|'), "pieces start at a row");
    }
}

#[test]
fn invalid_utf8_ranges_point_into_raw_bytes() {
    let raw = b"# T\xff\n\nAlpha \xfe\xfd beta.\n\nGamma.\n";
    let note = chunk_note(raw, &ChunkConfig::default());
    assert!(note.lossy);
    let texts: Vec<_> = note.passages.iter().map(|p| &raw[p.range.clone()]).collect();
    assert_eq!(texts, [&b"Alpha \xfe\xfd beta."[..], b"Gamma."]);
}

#[test]
fn queries_compile() {
    assert!(roles_by_kind().iter().filter(|r| r.is_some()).count() >= 12);
    let _ = crate::links::extract("x", &parse_blocks("x").unwrap());
}

#[test]
fn inserted_lode_answers_are_never_passages() {
    // An answer lode inserted earlier must not be retrieved or become evidence for a later one;
    // an ordinary block quote next to it still is a passage.
    let md = "# Q\n\nHow often are certs rotated?\n\n> **lode** — How often are certs rotated?\n>\n> - Certs rotate every 90 days [x](a.md \"lode abc 1-2\") *(quoted & coupled)*\n\n> A quote the user wrote.\n\nAfter.\n";
    let got = kinds(md, &ChunkConfig::default());
    assert!(got.iter().all(|(_, t)| !t.contains("**lode**") && !t.contains("90 days")), "{got:?}");
    assert!(got.iter().any(|(k, t)| k == "quote" && t.contains("A quote the user wrote")), "{got:?}");
    assert!(got.iter().any(|(_, t)| t == "After."), "{got:?}");
}

/// The tags the chunker reads from its own parse are exactly what navigation's own parse finds
/// (the index stores the former, `workspace/symbol`-style navigation reads the latter), over
/// every note of the example vault and the navigation fixtures, and over inputs where the two
/// could part: a byte-order mark, CRLF, tags in code and frontmatter, headings that look like
/// tags, NUL bytes, invalid UTF-8 (no tags read: the bytes are not the text).
#[test]
fn tags_from_the_chunkers_parse_are_navigations_tags() {
    let mut files = Vec::new();
    markdown_files(&vault_dir(), &mut files);
    markdown_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nav"), &mut files);
    let mut inputs: Vec<(String, Vec<u8>)> = files.iter().map(|p| (p.display().to_string(), std::fs::read(p).unwrap())).collect();
    let crafted: &[&[u8]] = &[
        b"\xEF\xBB\xBF---\ntags: [alpha, beta]\n---\n# Title #notatag\n\nText #gamma and `#code` #delta.\n",
        b"# A\r\n\r\nLine with #crlf-tag\r\n\r\n```\n#in-fence\n```\r\n",
        b"#heading-like\n\n#real-tag at start of a paragraph\n\n    #indented-code\n",
        b"text\0with #after-nul and #more\n",
        b"invalid \xff bytes #tag-after\n",
        b"+++\ntags = [\"toml-tag\"]\n+++\nBody #x/y/z #1234 #a-b_c\n",
        b"| a | #cell-tag |\n|---|---|\n| #row | [#not](#x) |\n",
        b"<div>#html-tag</div>\n\n[link #inside](x.md) #after-link\n",
        b"",
        b"#",
        b"# \n#\n##tag\n",
    ];
    inputs.extend(crafted.iter().enumerate().map(|(i, b)| (format!("crafted {i}"), b.to_vec())));
    let mut failed = Vec::new();
    for (name, raw) in &inputs {
        let note = chunk_note(raw, &ChunkConfig::default());
        let want: Option<Vec<Tag>> = std::str::from_utf8(raw).ok().map(|text| {
            crate::nav::links(text)
                .into_iter()
                .filter(|l| matches!(l.kind, crate::nav::NavKind::Tag | crate::nav::NavKind::FrontmatterTag))
                .filter_map(|l| l.label.map(|label| Tag { name: label.text, range: l.range }))
                .collect()
        });
        match (&note.tags, &want) {
            (Some(got), Some(want)) if got == want => {}
            (None, None) => {}
            (got, want) => failed.push(format!("{name}: chunker {got:?}, navigation {want:?}")),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
