//! HTML → markdown on data-driven fixtures (`fixtures/html/*.html` → `*.md`, update with
//! `UPDATE_EXPECT=1`): real pages, hidden and invisible text, malformed markup, prose that
//! looks like markdown syntax, entities. Each output must also chunk into the structure the
//! page had.

use expect_test::expect_file;
use lode_core::chunk::{chunk_note, ChunkConfig, PassageKind};
use std::time::Duration;

use lode_externals::html;

fn to_markdown(s: &str) -> html::Page {
    html::to_markdown(s, Duration::from_secs(60)).unwrap()
}

fn fixtures() -> std::path::PathBuf {
    lode_testing::repo().join("fixtures/html")
}

#[test]
fn every_fixture_matches_its_markdown() {
    let mut names: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .collect();
    names.sort();
    assert!(names.len() >= 7);
    for path in names {
        let html = std::fs::read_to_string(&path).unwrap();
        let page = to_markdown(&html);
        let shown = format!("title: {:?}\n---\n{}", page.title, page.markdown);
        expect_file![path.with_extension("md")].assert_eq(&shown);
    }
}

fn page(name: &str) -> String {
    to_markdown(&std::fs::read_to_string(fixtures().join(name)).unwrap()).markdown
}

#[test]
fn a_page_chunks_like_a_note() {
    let md = page("article.html");
    let note = chunk_note(md.as_bytes(), &ChunkConfig::default());
    assert_eq!(note.title.as_deref(), Some("Connection pooling"));
    let kinds: Vec<PassageKind> = note.passages.iter().map(|p| p.kind).collect();
    for k in [PassageKind::Paragraph, PassageKind::ListItem, PassageKind::Table, PassageKind::Code, PassageKind::Quote] {
        assert!(kinds.contains(&k), "{k:?} in {kinds:?}\n{md}");
    }
    let sizing = note.passages.iter().find(|p| md[p.range.clone()].contains("Measure peak")).unwrap();
    assert_eq!(sizing.heading_path, ["Connection pooling", "Sizing"]);
    for gone in ["track everything", "injected", "Home", "All rights reserved", "Related:", "version 3.2"] {
        assert!(!md.contains(gone), "{gone:?} is page chrome\n{md}");
    }
}

#[test]
fn what_a_reader_cannot_see_is_not_in_the_snapshot() {
    let md = page("hidden.html");
    for gone in ["10000", "Ignore previous", "Secret", "Invisible", "Enable JavaScript", "Template text"] {
        assert!(!md.contains(gone), "{gone:?}\n{md}");
    }
    assert!(md.contains("Burst connections are capped at fifty, with no exceptions."), "{md}");
    assert!(!md.chars().any(|c| matches!(c, '\u{200b}' | '\u{ad}' | '\u{a0}' | '\u{202e}' | '\u{2060}')), "{md:?}");
}

#[test]
fn prose_never_becomes_syntax() {
    let md = page("lookalike.html");
    let note = chunk_note(md.as_bytes(), &ChunkConfig::default());
    let headings: Vec<&str> = note.headings.iter().map(|h| h.text.as_str()).collect();
    assert_eq!(headings, ["Syntax in prose", "Heading ending in #"], "the # is text, not a closing sequence\n{md}");
    let kinds: Vec<PassageKind> = note.passages.iter().map(|p| p.kind).collect();
    assert!(
        !kinds.contains(&PassageKind::ListItem) && !kinds.contains(&PassageKind::Quote) && !kinds.contains(&PassageKind::Html),
        "{kinds:?}\n{md}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == PassageKind::Code).count(), 1, "one code block, whatever fences it holds\n{md}");
    assert_eq!(kinds.iter().filter(|k| **k == PassageKind::Table).count(), 1, "{md}");
}

#[test]
fn hostile_sizes_and_shapes_end() {
    // Deep nesting, many attributes, a huge single text node, unclosed everything.
    let deep = format!("<p>{}x", "<span>".repeat(50_000));
    assert!(to_markdown(&deep).markdown.contains('x'));
    let wide = format!("<p>{}</p>", "word ".repeat(500_000));
    assert_eq!(to_markdown(&wide).markdown.len(), "word ".len() * 500_000);
    let cells = format!("<table>{}</table>", "<tr><td>c</td></tr>".repeat(20_000));
    assert_eq!(to_markdown(&cells).markdown.lines().count(), 20_001);
    assert_eq!(to_markdown("").markdown, "");
    assert!(!to_markdown("\u{0}\u{0}<\u{0}p>").markdown.contains('\u{0}'));
}
