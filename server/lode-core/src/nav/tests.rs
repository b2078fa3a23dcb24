//! Navigation tests: snapshots over the fixtures in `fixtures/nav/`, resolution cases, huge and
//! random inputs.
//!
//! Fixture convention:
//! - every `fixtures/nav/*.md` is a note; each `‸` (U+2038) in it marks a cursor and is removed
//!   before analysis (offsets are in the text without markers);
//! - a file named `*.crlf.md` has its line endings turned into `\r\n` first (so the fixture
//!   stays LF in git whatever its settings);
//! - the snapshot `fixtures/nav/<file>.snap` holds the outline, every item of [`links`], the
//!   folds, and for each cursor what [`at`] and [`completion_context`] say there. Ranges are
//!   byte ranges followed by the text they cover.
//! - `fixtures/nav/resolve.txt` lists candidate notes (`note: path | title | alias, alias`) and
//!   queries (`wiki: target`, `md: source path | target`, `md+: …` to add `.md`); its snapshot
//!   is `resolve.txt.snap`.
//!
//! Update snapshots with `UPDATE_EXPECT=1`.

use std::fmt::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use expect_test::expect_file;

use super::*;

const CURSOR: char = '‸';

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nav")
}

/// The note text without cursor markers, and the cursor offsets.
fn load(raw: &str, crlf: bool) -> (String, Vec<usize>) {
    let raw = if crlf { raw.replace("\r\n", "\n").replace('\n', "\r\n") } else { raw.to_owned() };
    let mut text = String::with_capacity(raw.len());
    let mut cursors = Vec::new();
    for c in raw.chars() {
        if c == CURSOR {
            cursors.push(text.len());
        } else {
            text.push(c);
        }
    }
    (text, cursors)
}

fn show(text: &str, r: &Range<usize>) -> String {
    let s = &text[r.clone()];
    if s.chars().count() > 48 {
        let head: String = s.chars().take(40).collect();
        format!("{r:?} {head:?}…")
    } else {
        format!("{r:?} {s:?}")
    }
}

fn show_part(name: &str, p: &Option<Part>) -> String {
    match p {
        Some(p) => format!(" {name}={:?}@{:?}", p.text, p.range),
        None => String::new(),
    }
}

fn render_link(text: &str, l: &NavLink) -> String {
    let mut s = format!("{:?}{} {} edit={:?}", l.kind, if l.embed { "(embed)" } else { "" }, show(text, &l.range), &text[l.edit.clone()]);
    s += &show_part("note", &l.note);
    s += &show_part("heading", &l.heading);
    s += &show_part("label", &l.label);
    s += &show_part("text", &l.text);
    if let Some(t) = &l.title {
        write!(s, " title={t:?}").unwrap();
    }
    write!(s, " → {:?}", l.dest).unwrap();
    s
}

fn render(text: &str, cursors: &[usize]) -> String {
    let mut s = String::new();
    writeln!(s, "== outline").unwrap();
    for (i, sec) in outline(text).iter().enumerate() {
        writeln!(
            s,
            "{i}: h{} {:?} #{} line={} name={:?} section={:?} parent={:?}",
            sec.level,
            sec.text,
            sec.slug,
            show(text, &sec.heading),
            &text[sec.name.clone()],
            sec.range,
            sec.parent
        )
        .unwrap();
    }
    writeln!(s, "== links").unwrap();
    for l in links(text) {
        writeln!(s, "{}", render_link(text, &l)).unwrap();
    }
    writeln!(s, "== folds").unwrap();
    for f in folding_ranges(text) {
        let first = text[f.range.clone()].lines().next().unwrap_or("");
        let lines = text[f.range.clone()].matches('\n').count() + 1;
        writeln!(s, "{:?} {:?} {lines} lines from {:?}", f.kind, f.range, first).unwrap();
    }
    for (i, &c) in cursors.iter().enumerate() {
        let line = text[..c].matches('\n').count() + 1;
        let ls = super::line_start(text, c);
        let le = super::line_end(text, c);
        writeln!(s, "== cursor {i} @{c} line {line}: {:?}", format!("{}‸{}", &text[ls..c], &text[c..le])).unwrap();
        match at(text, c) {
            Some(NavItem::Link { link, focus }) => writeln!(s, "at: {focus:?} of {}", render_link(text, &link)).unwrap(),
            Some(NavItem::Heading { index, section }) => writeln!(s, "at: heading {index} {:?}", section.text).unwrap(),
            None => writeln!(s, "at: none").unwrap(),
        }
        match completion_context(text, c) {
            Some(cc) => writeln!(
                s,
                "complete: {:?}{} prefix={:?} replace={:?} rest={:?} closing={:?}",
                cc.kind,
                if cc.embed { " (embed)" } else { "" },
                cc.prefix,
                cc.replace,
                &text[cc.rest.clone()],
                cc.closing.map(|r| &text[r])
            )
            .unwrap(),
            None => writeln!(s, "complete: none").unwrap(),
        }
    }
    s
}

/// What every caller relies on, for any text.
fn check_invariants(text: &str) {
    let ok = |r: &Range<usize>, what: &str| {
        assert!(r.start <= r.end && r.end <= text.len(), "{what} {r:?} out of {}", text.len());
        assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end), "{what} {r:?} not on char boundaries");
    };
    let sections = outline(text);
    for (i, s) in sections.iter().enumerate() {
        ok(&s.heading, "heading");
        ok(&s.name, "name");
        ok(&s.range, "section");
        assert!(s.range.start <= s.heading.start && s.heading.end <= s.range.end, "section does not hold its heading");
        assert!(s.parent.is_none_or(|p| p < i && sections[p].level < s.level));
        let _ = find_section(&sections, &s.slug);
    }
    let all = links(text);
    for l in &all {
        ok(&l.range, "link");
        ok(&l.edit, "edit");
        assert!(l.range.start <= l.edit.start && l.edit.end <= l.range.end, "edit outside item");
        for p in [&l.note, &l.heading, &l.label, &l.text].into_iter().flatten() {
            ok(&p.range, "part");
            assert_eq!(text[p.range.clone()], p.text);
            assert!(l.range.start <= p.range.start && p.range.end <= l.range.end, "part outside item");
        }
        if let Some(n) = &l.note {
            let _ = resolve_markdown("a/b.md", &n.text, true);
        }
    }
    assert!(all.windows(2).all(|w| w[0].range.start <= w[1].range.start), "items out of order");
    for f in folding_ranges(text) {
        ok(&f.range, "fold");
        assert!(text[f.range.clone()].contains('\n'));
    }
    let n = text.len();
    for o in [0, n / 3, n / 2, n.saturating_sub(1), n, n + 5] {
        if let Some(NavItem::Link { link, .. }) = at(text, o) {
            ok(&link.range, "at");
        }
        if let Some(c) = completion_context(text, o) {
            ok(&c.replace, "replace");
            ok(&c.rest, "rest");
            assert_eq!(c.prefix, text[c.replace.clone()]);
            if let Some(r) = &c.closing {
                ok(r, "closing");
            }
        }
    }
}

#[test]
fn fixture_snapshots() {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(fixtures()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "md")).collect();
    files.sort();
    assert!(files.len() >= 10, "only {} fixtures", files.len());
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let raw = std::fs::read_to_string(&f).unwrap();
        let (text, cursors) = load(&raw, name.ends_with(".crlf.md"));
        check_invariants(&text);
        expect_file![fixtures().join(format!("{name}.snap"))].assert_eq(&render(&text, &cursors));
    }
}

#[test]
fn resolution_cases() {
    let raw = std::fs::read_to_string(fixtures().join("resolve.txt")).unwrap();
    let mut notes: Vec<NoteKey> = Vec::new();
    let mut out = String::new();
    for line in raw.lines() {
        let Some((cmd, arg)) = line.split_once(": ") else { continue };
        let fields: Vec<&str> = arg.split(" | ").collect();
        match cmd {
            "note" => notes.push(NoteKey {
                path: fields[0].to_owned(),
                title: fields.get(1).unwrap_or(&"").to_string(),
                aliases: fields.get(2).map(|a| a.split(", ").map(str::to_owned).collect()).unwrap_or_default(),
            }),
            "wiki" => {
                let r = resolve_wiki(arg, &notes);
                let name = |i: usize| notes[i].path.as_str();
                writeln!(
                    out,
                    "wiki {arg:?} → {:?} by {:?}{}",
                    r.note.map(name),
                    r.matched_by,
                    if r.is_ambiguous() {
                        format!(" ambiguous, also {:?}", r.others.iter().map(|&i| name(i)).collect::<Vec<_>>())
                    } else {
                        String::new()
                    }
                )
                .unwrap();
            }
            "md" | "md+" => {
                let got = resolve_markdown(fields[0], fields.get(1).unwrap_or(&""), cmd == "md+");
                writeln!(out, "{cmd} from {:?} {:?} → {got:?}", fields[0], fields.get(1).unwrap_or(&"")).unwrap();
            }
            _ => {}
        }
    }
    expect_file![fixtures().join("resolve.txt.snap")].assert_eq(&out);
}

#[test]
fn find_section_matches_slugs_text_and_fragments() {
    let text = "# Straße & Co. (2024)\n## Set-up *fast*\n## Set-up fast\n";
    let s = outline(text);
    let f = |q: &str| find_section(&s, q);
    assert_eq!(f("straße--co-2024"), Some(0));
    assert_eq!(f("stra%C3%9Fe--co-2024"), Some(0));
    assert_eq!(f("Straße & Co. (2024)"), Some(0));
    assert_eq!(f("set-up FAST"), Some(1));
    assert_eq!(f("set-up-fast-1"), Some(2));
    assert_eq!(f("Straße & Co. (2024)#Set-up fast"), Some(1));
    assert_eq!(f(""), None);
    assert_eq!(f("^block"), None);
}

/// Long lines of the shapes that make naive scanners quadratic: each shape alone (64 KiB,
/// where a square would not finish), and all of them mixed in one 256 KiB line. Every function
/// finishes and still finds what is real after the line. (Speed is measured by benchmarks, not
/// asserted here: a loaded CI machine is no clock.)
#[test]
fn huge_lines() {
    let shapes =
        ["[", "[[", "](", "[](", "`", "x<!--", "<a ", "#a ", "[^", "![[x]] ", "[x](y.md) ", "((((", "\\", "é日🎉 ", "[a](<", "[a](b \""];
    let mixed = shapes.concat().repeat((1 << 18) / shapes.concat().len());
    let mut lines: Vec<(String, String)> = shapes.iter().map(|s| (s.to_string(), s.repeat((1 << 16) / s.len()))).collect();
    lines.push(("mixed".into(), mixed));
    for (shape, line) in lines {
        let text = format!("# Title\n\n{line}\n\n[[after]] #end\n");
        let all = links(&text);
        let _ = outline(&text);
        let _ = folding_ranges(&text);
        let _ = at(&text, text.len() / 2);
        let _ = completion_context(&text, text.len() / 2);
        let _ = completion_context(&text, 9 + line.len());
        assert!(all.iter().any(|l| l.note.as_ref().is_some_and(|n| n.text == "after")), "{shape:?}: lost the link after");
        assert!(all.iter().any(|l| l.kind == NavKind::Tag && &text[l.edit.clone()] == "end"), "{shape:?}: lost the tag after");
    }
}

/// Deterministic xorshift, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_markdown_never_panics_and_keeps_ranges_valid() {
    let alphabet: Vec<&str> = vec![
        "[", "]", "[[", "]]", "(", ")", "![", "#", "# ", "## ", "`", "```", "~~~", "\n", "\r\n", "\n\n", " ", "  ", "    ", "|", "\\|",
        "\\", "^", "[^", "]:", ":", "<", ">", "<!--", "-->", "*", "_", "-", "- ", "1. ", "> ", "---", "---\n", "===", "%", "%2", "%20",
        "a", "b", "note", "Ω", "é", "日本", "🎉", "x.md", "http://", "mailto:", "/", "..", ".", "\"", "'", "=", "tags:", "\t", "\0",
        "\n> ", "\n    ", "\n- ", "\n```\n", "\n[x]: ", "\n[^1]: ", "](", "[x]", "<a ", "+++\n", "\u{301}",
    ];
    let mut rng = Rng(0x5eed_1e55_c0ff_ee00);
    for case in 0..3000 {
        let n = rng.below(80);
        let mut text = String::new();
        if case % 5 == 0 {
            text.push_str("---\ntags: [a, b]\n");
        }
        for _ in 0..n {
            text.push_str(alphabet[rng.below(alphabet.len())]);
        }
        check_invariants(&text);
        // The store skips the parse when this says no: it must never miss a tag.
        if links(&text).iter().any(|l| matches!(l.kind, NavKind::Tag | NavKind::FrontmatterTag)) {
            assert!(may_have_tags(&text), "tags missed by the prefilter in {text:?}");
        }
        let o = rng.below(text.len() + 3);
        let _ = at(&text, o);
        if let Some(c) = completion_context(&text, o) {
            assert!(c.replace.end <= text.len());
        }
        let mut sl = Slugger::new();
        for s in outline(&text) {
            let _ = sl.slug(&s.text);
        }
        let _ = resolve_wiki(&text, &[NoteKey { path: "a/b.md".into(), title: text.clone(), aliases: vec![text.clone()] }]);
        let _ = percent_decode(&text);
    }
}

#[test]
fn indexer_links_are_unchanged_by_nav() {
    // nav has its own scanner; the indexer's extractor must keep its own answers.
    let md = "See [[other note|the other]] and [ADR](decisions/adr%207.md#ctx).\n";
    let got = crate::chunk::chunk_note(md.as_bytes(), &crate::chunk::ChunkConfig::default()).links;
    assert_eq!(got.len(), 2);
    let nav: Vec<String> = links(md).iter().filter_map(|l| l.note.as_ref().map(|n| n.text.clone())).collect();
    assert_eq!(nav, ["other note", "decisions/adr%207.md"]);
}
