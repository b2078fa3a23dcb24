//! Passages and the full-text tables: the write path of a note's head (`write_note`: its
//! version and note rows, its passages and sections with their FTS5 rows, then its links and
//! navigation), passages read back, and the store's counts.
//!
//! Invariants:
//! - only head versions have passages: `write_note` replaces a note's passages, sections,
//!   links, tags, aliases and headings inside the caller's transaction, the one that moves its
//!   head, so a note's passages, FTS rows and links change together or not at all;
//! - full-text rows follow their rows, written beside them through `indexed` (no triggers: a
//!   batch flushes each full-text index once, at its commit);
//! - a passage (or section) whose heading and text are unchanged keeps its row, its id and its
//!   FTS5 entry, and only moves: an edit re-tokenizes just what it touched, and what is keyed
//!   by passage id (vectors) survives for the rest;
//! - a section's hash is stored, so `fnv1a` must not change between builds;
//! - whether a note exists is decided inside the write transaction, never by an earlier read;
//! - a snapshot's head gets passages and sections only: no links, tags, aliases or headings;
//! - a passage's heading path starts with its note's title; its `section` is the path's last
//!   segment.

use lode_core::chunk::ChunkedNote;
use lode_core::text::line_of;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::indexed;
use super::navigation::{link_key, resolve_incoming, resolve_key, write_headings, write_nav};
use super::{now_ms, stem_of, PassageRow, SaveOutcome, SaveStatus, Stats, Store};
use crate::error::StoreError;

impl Store {
    /// Passages of the head version of the note at `path`, in order.
    pub fn passages_of(&self, path: &str) -> Result<Vec<PassageRow>, StoreError> {
        let rows = self.rows(
            "SELECT p.id, p.note_id, p.version_id, p.ordinal, p.start, p.end, p.line, p.kind, p.heading,
                        p.parent_start, p.parent_end, p.text
                 FROM passages p JOIN notes n ON n.id = p.note_id WHERE n.path = ?1 ORDER BY p.ordinal",
            [path],
            |r| {
                Ok(PassageRow {
                    id: r.get(0)?,
                    note_id: r.get(1)?,
                    version_id: r.get(2)?,
                    ordinal: r.get(3)?,
                    start: r.get::<_, i64>(4)? as usize,
                    end: r.get::<_, i64>(5)? as usize,
                    line: r.get::<_, i64>(6)? as usize,
                    kind: r.get(7)?,
                    heading: r.get(8)?,
                    parent_start: r.get::<_, i64>(9)? as usize,
                    parent_end: r.get::<_, i64>(10)? as usize,
                    text: r.get(11)?,
                })
            },
        )?;
        Ok(rows)
    }

    pub fn stats(&self) -> Result<Stats, StoreError> {
        let q = |sql: &str| self.conn.query_row(sql, [], |r| r.get::<_, i64>(0)).map_err(|e| self.err(e));
        let page_count = q("PRAGMA page_count")?;
        let page_size = q("PRAGMA page_size")?;
        let wal = std::fs::metadata(self.path.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);
        Ok(Stats {
            notes: q("SELECT count(*) FROM notes WHERE head_version IS NOT NULL AND kind = 'note'")?,
            snapshots: q("SELECT count(*) FROM notes WHERE head_version IS NOT NULL AND kind = 'snapshot'")?,
            deleted_notes: q("SELECT count(*) FROM notes WHERE head_version IS NULL")?,
            versions: q("SELECT count(*) FROM versions")?,
            passages: q("SELECT count(*) FROM passages")?,
            links: q("SELECT count(*) FROM links")?,
            unresolved_links: q(
                "SELECT count(*) FROM links WHERE target_note IS NULL AND target_key NOT LIKE '%://%' AND target NOT LIKE 'mailto:%'",
            )?,
            // Few versions are lossy: those are read from their own index first, and the heads
            // only looked through when there are any.
            lossy_notes: if q("SELECT EXISTS (SELECT 1 FROM versions INDEXED BY versions_lossy WHERE lossy = 1)")? == 0 {
                0
            } else {
                q("SELECT count(*) FROM notes WHERE head_version IN (SELECT id FROM versions INDEXED BY versions_lossy WHERE lossy = 1)")?
            },
            db_bytes: (page_count * page_size) as u64 + wal,
            schema_version: q("PRAGMA user_version")?,
        })
    }
}

/// `snapshot`: a new note row is a snapshot note (an external's URL as path, no stem), whose
/// head gets passages only. An existing row keeps its kind.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_note(
    tx: &Connection,
    path: &str,
    bytes: &[u8],
    vid: &str,
    note: &ChunkedNote,
    new_version: bool,
    snapshot: bool,
) -> rusqlite::Result<SaveOutcome> {
    let now = now_ms();
    tx.prepare_cached("INSERT OR IGNORE INTO versions (id, body, size, lossy, created_at) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![vid, bytes, bytes.len() as i64, note.lossy, now])?;

    let title = note.title.clone().unwrap_or_else(|| {
        let name = path.rsplit('/').next().unwrap_or(path);
        name.rsplit_once('.').map_or(name, |(s, _)| s).to_owned()
    });
    let meta =
        serde_json::Value::Object(note.meta.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect()).to_string();
    // Whether the note exists is decided here, inside the write transaction: what the caller
    // read before taking the write lock may be stale (another process — `lode index` beside
    // `lode serve` — created or removed the row meanwhile).
    let found: Option<(i64, String, String)> = tx
        .prepare_cached("SELECT id, kind, title FROM notes WHERE path = ?1")?
        .query_row([path], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let existed = found.is_some();
    let (id, created, snapshot) = if let Some((id, kind, old_title)) = found {
        tx.prepare_cached(
            "UPDATE notes SET head_version = ?2, title = ?3, meta = ?4, updated_at = ?5,
                    disk_size = CASE WHEN ?6 THEN NULL ELSE disk_size END,
                    disk_mtime = CASE WHEN ?6 THEN NULL ELSE disk_mtime END
             WHERE id = ?1",
        )?
        .execute(params![id, vid, title, meta, now, new_version])?;
        if old_title != title {
            indexed::title_changed(tx, id, &old_title, &title)?;
        }
        let was_deleted: bool = tx
            .prepare_cached(
                "SELECT NOT EXISTS (SELECT 1 FROM passages WHERE note_id = ?1) AND NOT EXISTS (SELECT 1 FROM links WHERE src_note = ?1)",
            )?
            .query_row([id], |r| r.get(0))?;
        (id, was_deleted, kind == "snapshot")
    } else {
        let (stem, kind) = if snapshot { (String::new(), "snapshot") } else { (stem_of(path), "note") };
        tx.prepare_cached(
            "INSERT INTO notes (path, stem, title, head_version, meta, created_at, updated_at, kind)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
        )?
        .execute(params![path, stem, title, vid, meta, now, kind])?;
        let id = tx.last_insert_rowid();
        indexed::title_added(tx, id, &title)?;
        (id, true, snapshot)
    };
    if new_version {
        tx.prepare_cached(
            "INSERT INTO note_versions (note_id, seq, version_id, path, created_at)
             VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM note_versions WHERE note_id = ?1), ?2, ?3, ?4)",
        )?
        .execute(params![id, vid, path, now])?;
    }

    // Passages whose heading and text are unchanged keep their row (and so their FTS5 entry) and
    // only move: an edit re-tokenizes just the passages it touched.
    let mut old: std::collections::HashMap<(String, String), Vec<i64>> = std::collections::HashMap::new();
    {
        let mut st = tx.prepare_cached("SELECT id, heading, text FROM passages WHERE note_id = ?1 ORDER BY id DESC")?;
        let rows = st.query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
        for row in rows {
            let (pid, heading, text) = row?;
            old.entry((heading, text)).or_default().push(pid);
        }
    }
    let mut ins = tx.prepare_cached(
        "INSERT INTO passages (note_id, version_id, ordinal, start, end, line, kind, heading, parent_id,
                               parent_start, parent_end, text, body, section)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    let mut mv = tx.prepare_cached(
        "UPDATE passages SET version_id = ?2, ordinal = ?3, start = ?4, end = ?5, line = ?6, kind = ?7,
                             parent_id = ?8, parent_start = ?9, parent_end = ?10
         WHERE id = ?1",
    )?;
    // Which old passage each new one keeps is decided first, so the old ones that go leave
    // before any passage is written: FTS5 flushes its pending rows when a write's rowid is
    // lower than the last one's (see `indexed`). Line numbers are computed incrementally:
    // passages are in document order.
    let (mut line, mut at) = (1usize, 0usize);
    let mut plan = Vec::with_capacity(note.passages.len());
    for p in &note.passages {
        line += line_of(&bytes[at..p.range.start], p.range.start - at) - 1;
        at = p.range.start;
        let mut heading_parts: Vec<&str> = Vec::with_capacity(p.heading_path.len() + 1);
        if p.heading_path.first().map(String::as_str) != Some(title.as_str()) {
            heading_parts.push(&title);
        }
        heading_parts.extend(p.heading_path.iter().map(String::as_str));
        let key = (heading_parts.join(" › "), String::from_utf8_lossy(&bytes[p.range.clone()]).into_owned());
        let kept = old.get_mut(&key).and_then(Vec::pop);
        plan.push((p, line, key, kept));
    }
    let mut gone: Vec<i64> = old.into_values().flatten().collect();
    gone.sort_unstable();
    for pid in gone {
        indexed::remove_passage(tx, pid)?;
    }
    for (ordinal, (p, line, (heading, text), kept)) in plan.into_iter().enumerate() {
        let parent_id = format!("{vid}:{}-{}", p.parent.start, p.parent.end);
        if let Some(pid) = kept {
            mv.execute(params![
                pid,
                vid,
                ordinal as i64,
                p.range.start as i64,
                p.range.end as i64,
                line as i64,
                p.kind.as_str(),
                parent_id,
                p.parent.start as i64,
                p.parent.end as i64,
            ])?;
            continue;
        }
        let body = lode_core::text::index_text(&text);
        let section = section_of(&heading);
        ins.execute(params![
            id,
            vid,
            ordinal as i64,
            p.range.start as i64,
            p.range.end as i64,
            line as i64,
            p.kind.as_str(),
            heading,
            parent_id,
            p.parent.start as i64,
            p.parent.end as i64,
            text,
            body,
            section,
        ])?;
        indexed::passage_added(tx, tx.last_insert_rowid(), &heading, &body)?;
    }
    write_sections(tx, id)?;

    indexed::remove_links_of(tx, id)?;
    if snapshot {
        // A page's own links, tags and headings are not the user's: nothing links, completes
        // or navigates through a snapshot.
        return Ok(SaveOutcome {
            note_id: id,
            version_id: vid.to_owned(),
            status: if existed { SaveStatus::Updated } else { SaveStatus::Created },
            passages: note.passages.len(),
            lossy: note.lossy,
        });
    }
    let mut ins = tx.prepare_cached(
        "INSERT INTO links (src_note, kind, target, target_key, target_note, start, end) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for l in &note.links {
        let key = link_key(path, l.kind, &l.target);
        let target = if l.is_external() { None } else { resolve_key(tx, l.kind, &key)? };
        ins.execute(params![id, l.kind.as_str(), l.target, key, target, l.range.start as i64, l.range.end as i64])?;
    }
    write_nav(tx, id, bytes, note)?;
    write_headings(tx, id, path, bytes, note)?;
    if created {
        resolve_incoming(tx, id, path)?;
    }
    Ok(SaveOutcome {
        note_id: id,
        version_id: vid.to_owned(),
        status: if existed { SaveStatus::Updated } else { SaveStatus::Created },
        passages: note.passages.len(),
        lossy: note.lossy,
    })
}

/// FNV-1a: a stable 64-bit hash (stored, so it must not change between builds).
fn fnv1a(parts: &[&str]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0xff)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h as i64
}

/// Brings a note's sections (runs of consecutive passages under one heading path) in line with
/// its head passages: sections whose heading and text are unchanged keep their row (and their
/// full-text entry); the rest are replaced.
fn write_sections(tx: &Connection, note_id: i64) -> rusqlite::Result<()> {
    struct Run {
        heading: String,
        first: i64,
        last: i64,
        body: String,
    }
    let mut runs: Vec<Run> = Vec::new();
    {
        let mut st = tx.prepare_cached("SELECT heading, body, ordinal FROM passages WHERE note_id = ?1 ORDER BY ordinal")?;
        let mut rows = st.query([note_id])?;
        while let Some(r) = rows.next()? {
            let heading: String = r.get(0)?;
            let body = r.get_ref(1)?.as_str().unwrap_or_default();
            let ordinal: i64 = r.get(2)?;
            match runs.last_mut() {
                Some(run) if run.heading == heading && run.last + 1 == ordinal => {
                    run.body.push('\n');
                    run.body.push_str(body);
                    run.last = ordinal;
                }
                _ => runs.push(Run { heading, first: ordinal, last: ordinal, body: body.to_owned() }),
            }
        }
    }
    let mut old: std::collections::HashMap<i64, Vec<i64>> = std::collections::HashMap::new();
    {
        let mut st = tx.prepare_cached("SELECT id, hash FROM sections WHERE note_id = ?1")?;
        let rows = st.query_map([note_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (sid, hash) = row?;
            old.entry(hash).or_default().push(sid);
        }
    }
    // As with passages, the sections that go leave first.
    let plan: Vec<(&Run, i64, Option<i64>)> = runs
        .iter()
        .map(|run| {
            let hash = fnv1a(&[&run.heading, &run.body]);
            (run, hash, old.get_mut(&hash).and_then(Vec::pop))
        })
        .collect();
    let mut gone: Vec<i64> = old.into_values().flatten().collect();
    gone.sort_unstable();
    for sid in gone {
        indexed::remove_section(tx, sid)?;
    }
    let mut mv = tx.prepare_cached("UPDATE sections SET first_ordinal = ?2, last_ordinal = ?3 WHERE id = ?1")?;
    for (run, hash, kept) in plan {
        match kept {
            Some(sid) => {
                mv.execute(params![sid, run.first, run.last])?;
            }
            None => {
                indexed::add_section(tx, note_id, &run.heading, run.first, run.last, hash, &run.body)?;
            }
        }
    }
    Ok(())
}

/// The last segment of a heading path (`Title › Section › Subsection`): a symbol's name.
fn section_of(heading: &str) -> &str {
    heading.rsplit(" › ").next().unwrap_or(heading)
}

/// Fills `passages.section` for rows written before schema v4, in one transaction (the v6
/// sections backfill, `backfill_from_heads`, then makes the symbol rows from them).
pub(super) fn backfill_sections(conn: &mut Connection) -> rusqlite::Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let rows: Vec<(i64, String)> = {
        let mut st = tx.prepare("SELECT id, heading FROM passages WHERE section IS NULL")?;
        let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        it.collect::<Result<_, _>>()?
    };
    {
        let mut up = tx.prepare("UPDATE passages SET section = ?2 WHERE id = ?1")?;
        for (id, heading) in &rows {
            up.execute(params![id, section_of(heading)])?;
        }
    }
    tx.commit()?;
    Ok(rows.len())
}
