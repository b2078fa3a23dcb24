//! Navigation tables: links (their keys, their resolution, the notes linking to a note), tags,
//! aliases and headings, and the lookups over them (wiki-link candidates, link completion,
//! tagged notes, notes under a folder).
//!
//! Invariants:
//! - navigation tables are derived from the head version and rebuilt with it, in the write
//!   that moves the head; a deleted note has none; a file made before a table existed gets it
//!   filled from its heads when opened (`backfill_from_heads`);
//! - a link's `target_key` follows the rule goto navigates by (`link_key`), so the index and
//!   navigation agree; a markdown link's key depends on its note's folder, so a rename re-keys
//!   the note's links;
//! - a link's `target_note` is a live note (kind `note`, never a snapshot) matching its key, or
//!   NULL: set when the link is written, when a matching note appears (`resolve_incoming`) or
//!   by `resolve_links`, and cleared when its target is deleted or renamed away;
//! - an external link (a URL, `mailto:`) is keyed by its target as written and has no target
//!   note;
//! - tags come from a note's own text, so a note that is not valid UTF-8 has none; tags,
//!   aliases and names are matched case-insensitively;
//! - the lookups return live notes only.

use lode_core::chunk::{chunk_note, ChunkedNote};
use lode_core::links::LinkKind;
use lode_core::text::line_of;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{stem_of, Store};
use crate::error::StoreError;

impl Store {
    /// Whether any live note's path lies under the folder `prefix` (vault-relative, no slash at
    /// either end).
    pub fn any_note_under(&self, prefix: &str) -> Result<bool, StoreError> {
        // Paths under `p/` sort between `p/` and `p0` ('0' follows '/').
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND path >= ?1 || '/' AND path < ?1 || '0')",
                [prefix],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Live notes carrying a tag (case-insensitive): `(path, head version, start, end)` of every
    /// occurrence, by path.
    pub fn tagged(&self, tag: &str, limit: usize) -> Result<Vec<(String, String, usize, usize)>, StoreError> {
        self.rows(
            "SELECT n.path, n.head_version, t.start, t.end FROM tags t JOIN notes n ON n.id = t.note_id
              WHERE t.folded = ?1 AND n.head_version IS NOT NULL ORDER BY n.path, t.start LIMIT ?2",
            params![tag.to_lowercase(), limit as i64],
            |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as usize, r.get::<_, i64>(3)? as usize)),
        )
    }

    /// Occurrences of `tag` and of tags nested under it (`#project` → `#project/alpha`), as
    /// Obsidian and markdown-oxide read nested tags: by path, then position.
    pub fn tagged_under(&self, tag: &str, limit: usize) -> Result<Vec<(String, String, usize, usize)>, StoreError> {
        self.rows(
            "SELECT n.path, n.head_version, t.start, t.end FROM tags t JOIN notes n ON n.id = t.note_id
              WHERE (t.folded = ?1 OR (t.folded >= ?1 || '/' AND t.folded < ?1 || '0')) AND n.head_version IS NOT NULL
              ORDER BY n.path, t.start LIMIT ?2",
            params![tag.to_lowercase(), limit as i64],
            |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as usize, r.get::<_, i64>(3)? as usize)),
        )
    }

    /// Live notes carrying `tag` or a tag nested under it (`tag/…`), case-insensitive, by path.
    pub fn notes_tagged_under(&self, tag: &str) -> Result<Vec<String>, StoreError> {
        self.rows(
            "SELECT DISTINCT n.path FROM tags t JOIN notes n ON n.id = t.note_id
              WHERE (t.folded = ?1 OR (t.folded >= ?1 || '/' AND t.folded < ?1 || '0')) AND n.head_version IS NOT NULL
              ORDER BY n.path",
            [tag.to_lowercase()],
            |r| r.get(0),
        )
    }

    /// Tags in use whose letters include `typed`'s in order (a subsequence, as marksman
    /// matches: `ta` → `task`, `anotherTag`), case-insensitive: those starting with it first,
    /// then the most used: `(tag, notes)`.
    pub fn tags_matching(&self, typed: &str, limit: usize) -> Result<Vec<(String, usize)>, StoreError> {
        let folded = typed.to_lowercase();
        let mut pattern = String::from("%");
        for c in folded.chars() {
            if matches!(c, '%' | '_' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
            pattern.push('%');
        }
        self.rows(
            "SELECT min(tag), count(DISTINCT note_id) AS n, (folded >= ?1 AND folded < ?1 || char(1114111)) AS starts FROM tags
              WHERE folded LIKE ?2 ESCAPE '\\' GROUP BY folded ORDER BY starts DESC, n DESC, folded LIMIT ?3",
            params![folded, pattern, limit as i64],
            |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)),
        )
    }

    /// Candidates for a wiki-link target: live notes whose file stem, title or an alias equals
    /// `name` (case-insensitive): `(path, title, aliases)`.
    pub fn wiki_candidates(&self, name: &str) -> Result<Vec<(String, String, Vec<String>)>, StoreError> {
        let folded = name.trim().to_lowercase();
        let stem = folded.rsplit('/').next().unwrap_or(&folded).trim_end_matches(".md").to_owned();
        let rows: Vec<(i64, String, String)> = self.rows(
            "SELECT id, path, title FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND (stem = ?1 OR lower(title) = ?2
                 OR id IN (SELECT note_id FROM aliases WHERE folded = ?2)) ORDER BY length(path), path LIMIT 200",
            params![stem, folded],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, path, title) in rows {
            let aliases = self.rows("SELECT alias FROM aliases WHERE note_id = ?1", [id], |r| r.get(0))?;
            out.push((path, title, aliases));
        }
        Ok(out)
    }

    /// Notes for link completion: whose stem, title or an alias starts with `prefix`, or (three
    /// characters or more) whose title contains it; `(path, title, matched alias)`, best first.
    pub fn complete_notes(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let folded = prefix.trim().to_lowercase();
        let mut out: Vec<(String, String, Option<String>)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let cap = limit as i64;
        let mut push = |out: &mut Vec<_>, path: String, title: String, alias: Option<String>| {
            if seen.insert(path.clone()) {
                out.push((path, title, alias));
            }
        };
        for (p, t) in self.rows(
            "SELECT path, title FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND stem >= ?1 AND stem < ?1 || char(1114111)
              ORDER BY stem, length(path) LIMIT ?2",
            params![folded, cap],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )? {
            push(&mut out, p, t, None);
        }
        for (p, t) in self.rows(
            "SELECT path, title FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND lower(title) >= ?1
                AND lower(title) < ?1 || char(1114111) ORDER BY lower(title) LIMIT ?2",
            params![folded, cap],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )? {
            push(&mut out, p, t, None);
        }
        for (p, t, a) in self.rows(
            "SELECT n.path, n.title, a.alias FROM aliases a JOIN notes n ON n.id = a.note_id
              WHERE a.folded >= ?1 AND a.folded < ?1 || char(1114111) AND n.head_version IS NOT NULL LIMIT ?2",
            params![folded, cap],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)),
        )? {
            push(&mut out, p, t, Some(a));
        }
        if prefix.trim().chars().count() >= 3 && out.len() < limit {
            for (p, t) in self.titles_containing(prefix.trim(), cap)? {
                push(&mut out, p, t, None);
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    /// Live notes with a link to the note at `path` (resolved by the store): `(path, head version)`.
    pub fn linking_notes(&self, path: &str) -> Result<Vec<(String, String)>, StoreError> {
        self.rows(
            "SELECT DISTINCT s.path, s.head_version FROM notes t JOIN links l ON l.target_note = t.id
               JOIN notes s ON s.id = l.src_note
              WHERE t.path = ?1 AND s.head_version IS NOT NULL ORDER BY s.path",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// Outgoing links of the note at `path`: `(kind, target, resolved target path)`.
    pub fn links_of(&self, path: &str) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let rows = self.rows(
            "SELECT l.kind, l.target, t.path FROM links l JOIN notes n ON n.id = l.src_note
                 LEFT JOIN notes t ON t.id = l.target_note WHERE n.path = ?1 ORDER BY l.start",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok(rows)
    }

    /// Resolves links whose target did not exist when they were written.
    pub fn resolve_links(&mut self) -> Result<usize, StoreError> {
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        let mut pending: Vec<(i64, String, String)> = Vec::new();
        {
            let mut st = tx.prepare("SELECT rowid, kind, target_key FROM links WHERE target_note IS NULL").map_err(e)?;
            let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(e)?;
            for row in it {
                pending.push(row.map_err(e)?);
            }
        }
        let mut n = 0;
        for (rowid, kind, key) in pending {
            let kind = if kind == "wiki" { LinkKind::Wiki } else { LinkKind::Markdown };
            if let Some(id) = resolve_key(&tx, kind, &key).map_err(e)? {
                tx.execute("UPDATE links SET target_note = ?2 WHERE rowid = ?1", params![rowid, id]).map_err(e)?;
                n += 1;
            }
        }
        tx.commit().map_err(e)?;
        Ok(n)
    }
}

/// The key a link is resolved by: see `links.target_key` in the schema.
pub(super) fn link_key(src_path: &str, kind: LinkKind, target: &str) -> String {
    if target.contains("://") || target.starts_with("mailto:") {
        return target.to_owned();
    }
    match kind {
        // The navigation rule, so the index and goto agree (percent escapes decoded too).
        LinkKind::Markdown => lode_core::nav::resolve_markdown(src_path, target, false),
        LinkKind::Wiki => target.trim().trim_end_matches(".md").to_lowercase(),
    }
}

pub(super) fn resolve_key(conn: &Connection, kind: LinkKind, key: &str) -> rusqlite::Result<Option<i64>> {
    match kind {
        LinkKind::Markdown => conn
            .query_row(
                "SELECT id FROM notes WHERE path IN (?1, ?1 || '.md') AND head_version IS NOT NULL AND kind = 'note' LIMIT 1",
                [key],
                |r| r.get(0),
            )
            .optional(),
        LinkKind::Wiki => {
            let stem = key.rsplit('/').next().unwrap_or(key);
            conn.query_row(
                "SELECT id FROM notes WHERE stem = ?2 AND head_version IS NOT NULL AND kind = 'note'
                   AND (lower(path) IN (?1, ?1 || '.md') OR instr(?1, '/') = 0)
                 ORDER BY lower(path) IN (?1, ?1 || '.md') DESC, length(path), path LIMIT 1",
                params![key, stem],
                |r| r.get(0),
            )
            .optional()
        }
    }
}

/// Points unresolved links that name the note now at `path` to it.
pub(super) fn resolve_incoming(conn: &Connection, id: i64, path: &str) -> rusqlite::Result<()> {
    let no_ext = path.strip_suffix(".md").unwrap_or(path);
    let lower = path.to_lowercase();
    let lower_no_ext = no_ext.to_lowercase();
    // Through the partial index on unresolved keys: left to itself the planner picks
    // `links_target` for `target_note IS NULL` and walks every unresolved link in the vault for
    // each new note (quadratic on a cold scan: 100k notes slowed to ~50 notes/s).
    conn.execute(
        "UPDATE links INDEXED BY links_key SET target_note = ?1
         WHERE target_note IS NULL AND target_key IN (?2, ?3, ?4, ?5, ?6) AND (
            (kind = 'markdown' AND target_key IN (?2, ?3)) OR
            (kind = 'wiki' AND target_key IN (?4, ?5, ?6)))",
        params![id, path, no_ext, stem_of(path), lower, lower_no_ext],
    )?;
    Ok(())
}

/// Tags and aliases of a note's head (replacing what it had). Tags need the text's own byte
/// ranges, so a note that is not valid UTF-8 has none.
pub(super) fn write_nav(tx: &Connection, id: i64, bytes: &[u8], note: &ChunkedNote) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM tags WHERE note_id = ?1")?.execute([id])?;
    tx.prepare_cached("DELETE FROM aliases WHERE note_id = ?1")?.execute([id])?;
    let mut ins = tx.prepare_cached("INSERT INTO tags (note_id, tag, folded, start, end) VALUES (?1, ?2, ?3, ?4, ?5)")?;
    let mut put = |name: &str, range: &std::ops::Range<usize>| {
        ins.execute(params![id, name, name.to_lowercase(), range.start as i64, range.end as i64])
    };
    match &note.tags {
        // Read from the chunker's parse of these bytes.
        Some(tags) => {
            for t in tags {
                put(&t.name, &t.range)?;
            }
        }
        None => {
            if let Ok(text) = std::str::from_utf8(bytes) {
                // The full parse only where a tag may be: most notes' only `#` starts a heading.
                if lode_core::nav::may_have_tags(text) {
                    for l in lode_core::nav::links(text) {
                        if !matches!(l.kind, lode_core::nav::NavKind::Tag | lode_core::nav::NavKind::FrontmatterTag) {
                            continue;
                        }
                        let Some(label) = &l.label else { continue };
                        put(&label.text, &l.range)?;
                    }
                }
            }
        }
    }
    let mut ins = tx.prepare_cached("INSERT INTO aliases (note_id, alias, folded) VALUES (?1, ?2, ?3)")?;
    for (k, v) in &note.meta {
        if k == "aliases" || k == "alias" {
            for a in meta_list(v) {
                ins.execute(params![id, a, a.to_lowercase()])?;
            }
        }
    }
    Ok(())
}

/// The items of a frontmatter value: `[a, "b c"]` or a single scalar.
fn meta_list(v: &str) -> Vec<String> {
    let v = v.trim();
    let inner = v.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(v);
    inner.split(',').map(|a| a.trim().trim_matches(|c| c == '"' || c == '\'').trim().to_owned()).filter(|a| !a.is_empty()).collect()
}

/// Fills what is derived from each head by the chunker for heads written before it existed:
/// headings (schema v6) and, when `nav`, tags and aliases (schema v5). One transaction.
pub(super) fn backfill_from_heads(conn: &mut Connection, chunk: &lode_core::chunk::ChunkConfig, nav: bool) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let heads: Vec<(i64, Vec<u8>, String)> = {
        let mut st = tx.prepare("SELECT n.id, v.body, n.path FROM notes n JOIN versions v ON v.id = n.head_version")?;
        let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        it.collect::<Result<_, _>>()?
    };
    for (id, body, path) in heads {
        let note = chunk_note(&body, chunk);
        if nav {
            write_nav(&tx, id, &body, &note)?;
        }
        write_headings(&tx, id, &path, &body, &note)?;
    }
    tx.commit()
}

/// The headings of a note's head (replacing what it had): `workspace/symbol`'s section names.
pub(super) fn write_headings(tx: &Connection, id: i64, path: &str, bytes: &[u8], note: &ChunkedNote) -> rusqlite::Result<()> {
    super::indexed::remove_headings_of(tx, id)?;
    for h in note.headings.iter().filter(|h| !h.text.is_empty()) {
        // Heading ranges are in the decoded text: the same bytes unless the note is lossy, where
        // the line is the nearest the raw bytes give.
        let at = h.range.start.min(bytes.len());
        super::indexed::add_heading(tx, id, path, &h.text, line_of(bytes, at) as i64, h.level as i64)?;
    }
    Ok(())
}
