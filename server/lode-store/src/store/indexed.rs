//! Rows of the full-text-indexed tables in and out, with their full-text rows: passages
//! (`passages_fts`), note titles (`titles_tri`), headings (`headings_tri`) and sections
//! (`sections_fts`), plus the removal of a note's links.
//!
//! Invariants:
//! - every insert or delete of a `passages`, `headings` or `sections` row, and every change of
//!   a note's title, goes through here in the caller's transaction (the schema has no
//!   triggers for them since v9): `Store::verify` checks each index against its table;
//! - nothing here runs a statement that opens a statement journal — a trigger, a RETURNING
//!   clause, a DELETE of several rows of a table with an expression or partial index, or (with
//!   foreign keys enforced) an UPDATE or DELETE of a row with a foreign key. Opening one makes
//!   every FTS5 table already written in the transaction flush its pending terms into a new
//!   segment, so a batch must flush once, at its commit. Rows therefore leave one at a time, by
//!   rowid, new ids come from `last_insert_rowid`, and batches write with foreign keys off
//!   (`Store::begin_batch`);
//! - a row leaves before its full-text row: where foreign keys are enforced (a single save),
//!   the row's DELETE may still flush, and then finds nothing of the note's own pending.

use rusqlite::{params, Connection, OptionalExtension};

/// Inserts a passage row's full-text row (`id` just inserted into `passages`).
pub(super) fn passage_added(tx: &Connection, id: i64, heading: &str, body: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("INSERT INTO passages_fts (rowid, heading, body) VALUES (?1, ?2, ?3)")?.execute(params![id, heading, body])?;
    Ok(())
}

/// Removes a passage and its full-text row.
pub(super) fn remove_passage(tx: &Connection, id: i64) -> rusqlite::Result<()> {
    let row: Option<(String, String)> = tx
        .prepare_cached("SELECT heading, body FROM passages WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match row {
        Some((heading, body)) => drop_passage(tx, id, &heading, &body),
        None => Ok(()),
    }
}

/// Removes every passage of a note, with their full-text rows.
pub(super) fn remove_passages_of(tx: &Connection, note_id: i64) -> rusqlite::Result<()> {
    let rows: Vec<(i64, String, String)> = {
        let mut st = tx.prepare_cached("SELECT id, heading, body FROM passages WHERE note_id = ?1 ORDER BY id")?;
        let it = st.query_map([note_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        it.collect::<Result<_, _>>()?
    };
    for (id, heading, body) in rows {
        drop_passage(tx, id, &heading, &body)?;
    }
    Ok(())
}

/// Deletes passage `id`, then its full-text row (the values it was indexed with).
fn drop_passage(tx: &Connection, id: i64, heading: &str, body: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM passages WHERE id = ?1")?.execute([id])?;
    tx.prepare_cached("INSERT INTO passages_fts (passages_fts, rowid, heading, body) VALUES ('delete', ?1, ?2, ?3)")?
        .execute(params![id, heading, body])?;
    Ok(())
}

/// A new note's title (`id` just inserted into `notes`).
pub(super) fn title_added(tx: &Connection, id: i64, title: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("INSERT INTO titles_tri (rowid, title) VALUES (?1, ?2)")?.execute(params![id, title])?;
    Ok(())
}

/// A note's title changed from `old` (the row already holds `new`).
pub(super) fn title_changed(tx: &Connection, id: i64, old: &str, new: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("INSERT INTO titles_tri (titles_tri, rowid, title) VALUES ('delete', ?1, ?2)")?.execute(params![id, old])?;
    title_added(tx, id, new)
}

/// Inserts a heading row with its full-text row; `path` is its note's (a rename updates it).
pub(super) fn add_heading(tx: &Connection, note_id: i64, path: &str, name: &str, line: i64, level: i64) -> rusqlite::Result<()> {
    tx.prepare_cached("INSERT INTO headings (note_id, path, name, line, level) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![note_id, path, name, line, level])?;
    let id = tx.last_insert_rowid();
    tx.prepare_cached("INSERT INTO headings_tri (rowid, name) VALUES (?1, ?2)")?.execute(params![id, name])?;
    Ok(())
}

/// Sets a heading row's copy of its note's path. One row per statement: a statement that writes
/// several rows of a table with an expression index opens a statement journal, which makes
/// every full-text index flush its pending terms.
pub(super) fn set_heading_path(tx: &Connection, id: i64, path: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE headings SET path = ?2 WHERE id = ?1")?.execute(params![id, path])?;
    Ok(())
}

/// Removes every heading of a note, with their full-text rows.
pub(super) fn remove_headings_of(tx: &Connection, note_id: i64) -> rusqlite::Result<()> {
    let rows: Vec<(i64, String)> = {
        let mut st = tx.prepare_cached("SELECT id, name FROM headings WHERE note_id = ?1")?;
        let it = st.query_map([note_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        it.collect::<Result<_, _>>()?
    };
    for (id, _) in &rows {
        tx.prepare_cached("DELETE FROM headings WHERE id = ?1")?.execute([id])?;
    }
    for (id, name) in rows {
        tx.prepare_cached("INSERT INTO headings_tri (headings_tri, rowid, name) VALUES ('delete', ?1, ?2)")?.execute(params![id, name])?;
    }
    Ok(())
}

/// Inserts a section row with its full-text row; returns its id.
pub(super) fn add_section(
    tx: &Connection,
    note_id: i64,
    heading: &str,
    first: i64,
    last: i64,
    hash: i64,
    body: &str,
) -> rusqlite::Result<i64> {
    tx.prepare_cached("INSERT INTO sections (note_id, heading, first_ordinal, last_ordinal, hash) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![note_id, heading, first, last, hash])?;
    let id = tx.last_insert_rowid();
    tx.prepare_cached("INSERT INTO sections_fts (rowid, heading, body) VALUES (?1, ?2, ?3)")?.execute(params![id, heading, body])?;
    Ok(id)
}

/// Removes a section and its full-text row (the index is contentless: FTS5 deletes by rowid).
pub(super) fn remove_section(tx: &Connection, id: i64) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM sections WHERE id = ?1")?.execute([id])?;
    tx.prepare_cached("DELETE FROM sections_fts WHERE rowid = ?1")?.execute([id])?;
    Ok(())
}

/// Removes every section of a note, with their full-text rows.
pub(super) fn remove_sections_of(tx: &Connection, note_id: i64) -> rusqlite::Result<()> {
    for id in ids(tx, "SELECT id FROM sections WHERE note_id = ?1", note_id)? {
        remove_section(tx, id)?;
    }
    Ok(())
}

/// Removes a note's outgoing links (`links` has partial indexes: several rows deleted by one
/// statement would open a statement journal).
pub(super) fn remove_links_of(tx: &Connection, note_id: i64) -> rusqlite::Result<()> {
    for rowid in ids(tx, "SELECT rowid FROM links WHERE src_note = ?1", note_id)? {
        tx.prepare_cached("DELETE FROM links WHERE rowid = ?1")?.execute([rowid])?;
    }
    Ok(())
}

fn ids(tx: &Connection, sql: &str, note_id: i64) -> rusqlite::Result<Vec<i64>> {
    let mut st = tx.prepare_cached(sql)?;
    let it = st.query_map([note_id], |r| r.get(0))?;
    it.collect()
}
