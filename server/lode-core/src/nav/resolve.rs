//! Link target resolution, pure over what the caller supplies: Obsidian-like wiki-link
//! resolution over candidate notes, and markdown-link path joining with the same semantics as
//! the store's `join_relative`/`link_key` (lode-store), so both agree on where a link points.

use super::items::{extension, is_external};

/// A candidate note. `path` is vault-relative and `/`-separated (`a/b/Note.md`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoteKey {
    pub path: String,
    pub title: String,
    pub aliases: Vec<String>,
}

/// How a wiki target matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// A target with `/` matched the end of the path (or, with a leading `/`, all of it).
    Path,
    /// The target matched the file name without its `.md` extension.
    Stem,
    Title,
    Alias,
}

/// The outcome of [`resolve_wiki`]: indices into the candidate slice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resolution {
    /// The chosen note, if any matched.
    pub note: Option<usize>,
    pub matched_by: Option<MatchKind>,
    /// Other notes that matched equally well (by the same rule), best first. Non-empty means
    /// the target is ambiguous; `note` is still the preferred one.
    pub others: Vec<usize>,
}

impl Resolution {
    pub fn is_ambiguous(&self) -> bool {
        !self.others.is_empty()
    }
}

/// A path's match key: Unicode-lowercased, without a trailing `.md`.
fn key(path: &str) -> String {
    let lower = path.trim().to_lowercase();
    match lower.strip_suffix(".md") {
        Some(k) => k.to_owned(),
        None => lower,
    }
}

/// Resolves the note part of a wiki link (`Note`, `folder/Note`, `/root/Note`, `Note.md`)
/// against candidates:
/// 1. a target with `/` matches notes whose path (without `.md`) ends with `/target` or is
///    `target`; a leading `/` demands the whole path;
/// 2. otherwise, notes whose file name (without `.md`) is the target;
/// 3. failing both, notes whose title is the target, then notes with the target as an alias.
///
/// Matching ignores case (Unicode lowercase). Among several matches of one rule the shortest
/// path wins, then the lexicographically smallest; the rest are reported in `others`.
pub fn resolve_wiki(target: &str, notes: &[NoteKey]) -> Resolution {
    let none = Resolution { note: None, matched_by: None, others: Vec::new() };
    let t = key(target);
    if t.is_empty() || t == "/" {
        return none;
    }
    let keys: Vec<String> = notes.iter().map(|n| key(&n.path)).collect();
    let by_path: Vec<usize> = if let Some(root) = t.strip_prefix('/') {
        (0..notes.len()).filter(|&i| keys[i] == root).collect()
    } else if t.contains('/') {
        let suffix = format!("/{t}");
        (0..notes.len()).filter(|&i| keys[i] == t || keys[i].ends_with(&suffix)).collect()
    } else {
        Vec::new()
    };
    let plain = target.trim().to_lowercase();
    let matches = |kind: MatchKind, i: usize| match kind {
        MatchKind::Path => by_path.contains(&i),
        MatchKind::Stem => !t.contains('/') && keys[i].rsplit('/').next() == Some(t.as_str()),
        MatchKind::Title => notes[i].title.trim().to_lowercase() == plain,
        MatchKind::Alias => notes[i].aliases.iter().any(|a| a.trim().to_lowercase() == plain),
    };
    for kind in [MatchKind::Path, MatchKind::Stem, MatchKind::Title, MatchKind::Alias] {
        let mut hits: Vec<usize> = (0..notes.len()).filter(|&i| matches(kind, i)).collect();
        if hits.is_empty() {
            continue;
        }
        hits.sort_by(|&a, &b| notes[a].path.len().cmp(&notes[b].path.len()).then_with(|| notes[a].path.cmp(&notes[b].path)));
        let best = hits.remove(0);
        return Resolution { note: Some(best), matched_by: Some(kind), others: hits };
    }
    none
}

/// Decodes `%XX` escapes (two hex digits); anything else, including a malformed escape, is
/// kept as written. Bytes that do not form UTF-8 after decoding become U+FFFD.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() && bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit() {
            let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hex(bytes[i + 1]) * 16 + hex(bytes[i + 2]));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The vault-relative path a markdown link target names, seen from the note at `src_path`:
/// the `#fragment` dropped, percent escapes decoded, resolved against the source note's folder
/// (or the vault root for a target starting with `/`), `.` and `..` segments normalised (`..`
/// never climbs above the root). With `add_md`, `.md` is appended to a file name with no
/// extension. External targets (URLs) are returned unchanged; a target with no path (`#slug`)
/// names the source note itself.
pub fn resolve_markdown(src_path: &str, target: &str, add_md: bool) -> String {
    let t = target.trim();
    let t = t.strip_prefix('<').and_then(|x| x.strip_suffix('>')).unwrap_or(t);
    if is_external(t) {
        return t.to_owned();
    }
    let path = t.split('#').next().unwrap_or("");
    if path.is_empty() {
        return src_path.to_owned();
    }
    let decoded = percent_decode(path);
    let mut joined = join_relative(src_path, &decoded);
    if add_md && !joined.is_empty() && !decoded.ends_with('/') && extension(&joined).is_none() {
        joined.push_str(".md");
    }
    joined
}

/// `target` joined to the folder of `src` (or the root for `/…`), `.` and `..` normalised.
fn join_relative(src: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') { Vec::new() } else { src.split('/').collect() };
    parts.pop();
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}
