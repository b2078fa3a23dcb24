//! Notes and their versions: saving bytes as a note's new head, deleting and renaming notes,
//! the live notes with their disk stats, a note's history, a version's bytes and provenance,
//! and re-chunking the heads when the chunker's settings change.
//!
//! Invariants:
//! - versions are immutable and content-addressed (`id` = SHA-256 of the bytes): saving the
//!   bytes of the current head writes nothing, and a stored version is never rewritten;
//! - a note keeps its id and its history (`note_versions`, numbered in save order) through
//!   renames and deletion: deleting only clears its head and what is derived from it, and
//!   links to it become unresolved;
//! - a path names at most one note row: a rename onto a deleted note's path moves that note's
//!   history to a tombstone path (`<path>#deleted-<id>`), and onto a live note's is refused;
//! - a save, delete or rename is one write (its own transaction, or a part of the open batch)
//!   together with everything derived from the head — passages, full-text rows, links,
//!   navigation — so no half-indexed version is ever visible;
//! - a recorded disk stat means "the head is exactly this file": it is recorded only for the
//!   current head and a settled mtime, and cleared by a new version or a deletion;
//! - re-chunking rewrites what is derived from each head without making versions, and records
//!   the chunker's settings only once every head is re-chunked.

use lode_core::chunk::chunk_note;
use lode_core::links::LinkKind;
use rusqlite::{params, OptionalExtension};

use super::navigation::{link_key, resolve_incoming, resolve_key};
use super::passages::write_note;
use super::{now_ms, stem_of, DiskStat, NoteInfo, SaveOutcome, SaveStatus, Store};
use crate::error::StoreError;

impl Store {
    /// Head version id of the note at `path`, if it exists and is not deleted.
    pub fn head_of(&self, path: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row("SELECT head_version FROM notes WHERE path = ?1", [path], |r| r.get::<_, Option<String>>(0))
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.err(e))
    }

    /// Saves `bytes` as the new head of the note at `path` (creating the note if needed), and
    /// replaces its passages, FTS5 rows and links — all in one transaction. Unchanged bytes
    /// make no new version.
    pub fn save_note(&mut self, path: &str, bytes: &[u8]) -> Result<SaveOutcome, StoreError> {
        let vid = crate::version_id(bytes);
        let existing: Option<(i64, Option<String>)> = self
            .conn
            .prepare_cached("SELECT id, head_version FROM notes WHERE path = ?1")
            .and_then(|mut st| st.query_row([path], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(|e| self.err(e))?;
        if let Some((id, Some(head))) = &existing {
            if *head == vid {
                let passages: i64 =
                    self.conn.query_row("SELECT count(*) FROM passages WHERE note_id = ?1", [id], |r| r.get(0)).map_err(|e| self.err(e))?;
                return Ok(SaveOutcome {
                    note_id: *id,
                    version_id: vid,
                    status: SaveStatus::Unchanged,
                    passages: passages as usize,
                    lossy: std::str::from_utf8(bytes).is_err(),
                });
            }
        }
        let chunked = match self.prechunked.as_ref().and_then(|p| p.take(&vid, &self.opts.chunk)) {
            Some(c) => c,
            None => std::sync::Arc::new(chunk_note(bytes, &self.opts.chunk)),
        };
        let path_buf = self.path.clone();
        let tx = self.write_tx().map_err(|e| StoreError::from_sqlite(&path_buf, e))?;
        let out = write_note(&tx, path, bytes, &vid, &chunked, true, false)
            .and_then(|o| tx.commit().map(|_| o))
            .map_err(|e| StoreError::from_sqlite(&path_buf, e))?;
        Ok(out)
    }

    /// Marks the note deleted: its passages and outgoing links leave the index, its versions stay.
    pub fn delete_note(&mut self, path: &str) -> Result<bool, StoreError> {
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        let id: Option<i64> = tx
            .query_row("SELECT id FROM notes WHERE path = ?1 AND head_version IS NOT NULL", [path], |r| r.get(0))
            .optional()
            .map_err(e)?;
        let Some(id) = id else {
            tx.commit().map_err(e)?;
            return Ok(false);
        };
        tx.execute(
            "UPDATE notes SET head_version = NULL, updated_at = ?2, disk_size = NULL, disk_mtime = NULL WHERE id = ?1",
            params![id, now_ms()],
        )
        .map_err(e)?;
        super::indexed::remove_passages_of(&tx, id).map_err(e)?;
        super::indexed::remove_sections_of(&tx, id).map_err(e)?;
        super::indexed::remove_links_of(&tx, id).map_err(e)?;
        tx.execute("DELETE FROM tags WHERE note_id = ?1", [id]).map_err(e)?;
        tx.execute("DELETE FROM aliases WHERE note_id = ?1", [id]).map_err(e)?;
        super::indexed::remove_headings_of(&tx, id).map_err(e)?;
        tx.execute("UPDATE links SET target_note = NULL WHERE target_note = ?1", [id]).map_err(e)?;
        tx.commit().map_err(e)?;
        Ok(true)
    }

    /// Moves a note to a new path, keeping its id, history and passages (a note titled by its
    /// file name is written again under its new name).
    pub fn rename_note(&mut self, from: &str, to: &str) -> Result<(), StoreError> {
        let cfg = self.opts.chunk;
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        // A refused rename has written nothing: it ends its transaction as a success, so a
        // batch it is part of goes on (an error would roll the whole batch back).
        let id: Option<i64> = tx.query_row("SELECT id FROM notes WHERE path = ?1", [from], |r| r.get(0)).optional().map_err(e)?;
        let Some(id) = id else {
            tx.commit().map_err(e)?;
            return Err(StoreError::UnknownNote(from.to_owned()));
        };
        let taken: Option<(i64, Option<String>)> = tx
            .query_row("SELECT id, head_version FROM notes WHERE path = ?1", [to], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(e)?;
        match taken {
            Some((_, Some(_))) => {
                tx.commit().map_err(e)?;
                return Err(StoreError::PathTaken(to.to_owned()));
            }
            // A deleted note's old path is reused: give that history row a tombstone path.
            Some((old, None)) => {
                tx.execute("UPDATE notes SET path = path || '#deleted-' || id WHERE id = ?1", [old]).map_err(e)?;
            }
            None => {}
        }
        tx.execute("UPDATE notes SET path = ?2, stem = ?3, updated_at = ?4 WHERE id = ?1", params![id, to, stem_of(to), now_ms()])
            .map_err(e)?;
        // Heading rows repeat the path (symbol lookups read no note row).
        let headings: Vec<i64> = {
            let mut st = tx.prepare_cached("SELECT id FROM headings WHERE note_id = ?1").map_err(e)?;
            let it = st.query_map([id], |r| r.get(0)).map_err(e)?;
            it.collect::<Result<_, _>>().map_err(e)?
        };
        for h in headings {
            super::indexed::set_heading_path(&tx, h, to).map_err(e)?;
        }
        // Links written against the old path no longer name this note; links naming the new one do.
        tx.execute("UPDATE links SET target_note = NULL WHERE target_note = ?1", [id]).map_err(e)?;
        resolve_incoming(&tx, id, to).map_err(e)?;
        // A note with no title of its own is titled by its file name (`write_note`): its title,
        // and the heading path of its passages and sections, follow the rename. Its head is
        // written again at its new path, with no new version, which re-keys its links too.
        let head: Option<(String, Vec<u8>)> = tx
            .query_row(
                "SELECT v.id, v.body FROM notes n JOIN versions v ON v.id = n.head_version WHERE n.id = ?1 AND n.kind = 'note'",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(e)?;
        let untitled = head.map(|(vid, body)| (chunk_note(&body, &cfg), vid, body)).filter(|(c, _, _)| c.title.is_none());
        if let Some((chunked, vid, body)) = untitled {
            write_note(&tx, to, &body, &vid, &chunked, false, false).map_err(e)?;
        } else {
            // Outgoing markdown links are relative to the note's folder: re-key them.
            let mut rows: Vec<(i64, String, String)> = Vec::new();
            {
                let mut st = tx.prepare("SELECT rowid, kind, target FROM links WHERE src_note = ?1").map_err(e)?;
                let it = st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(e)?;
                for row in it {
                    rows.push(row.map_err(e)?);
                }
            }
            for (rowid, kind, target) in rows {
                let kind = if kind == "wiki" { LinkKind::Wiki } else { LinkKind::Markdown };
                let key = link_key(to, kind, &target);
                let resolved = resolve_key(&tx, kind, &key).map_err(e)?;
                tx.execute("UPDATE links SET target_key = ?2, target_note = ?3 WHERE rowid = ?1", params![rowid, key, resolved])
                    .map_err(e)?;
            }
        }
        tx.commit().map_err(e)?;
        Ok(())
    }

    /// Live notes (with a head version), by path.
    pub fn notes(&self) -> Result<Vec<NoteInfo>, StoreError> {
        let rows = self.rows(
            "SELECT id, path, title, head_version FROM notes WHERE head_version IS NOT NULL AND kind = 'note' ORDER BY path",
            [],
            |r| Ok(NoteInfo { id: r.get(0)?, path: r.get(1)?, title: r.get(2)?, head_version: r.get(3)? }),
        )?;
        Ok(rows)
    }

    /// Live notes with their head version and the file's size and mtime when that head was read
    /// from disk (`None`: not known to match the file), by path.
    pub fn heads_with_stat(&self) -> Result<Vec<(String, String, Option<DiskStat>)>, StoreError> {
        self.heads_after("", i64::MAX)
    }

    /// [`Store::heads_with_stat`] a page at a time: at most `limit` notes whose path sorts
    /// after `after` (byte order; `""` for the first page), in path order: a range of the
    /// path index. Each page is its own short read, so a caller walking a million notes holds
    /// one page, and no snapshot, at a time.
    pub fn heads_after(&self, after: &str, limit: i64) -> Result<Vec<(String, String, Option<DiskStat>)>, StoreError> {
        self.rows(
            "SELECT path, head_version, disk_size, disk_mtime FROM notes
              WHERE path > ?1 AND head_version IS NOT NULL AND kind = 'note' ORDER BY path LIMIT ?2",
            params![after, limit],
            |r| {
                let stat = match (r.get::<_, Option<i64>>(2)?, r.get::<_, Option<i64>>(3)?) {
                    (Some(size), Some(mtime_ns)) => Some(DiskStat { size: size as u64, mtime_ns }),
                    _ => None,
                };
                Ok((r.get(0)?, r.get(1)?, stat))
            },
        )
    }

    /// Records that the head `version_id` of the note at `path` is exactly the file with `stat`
    /// (taken at `read_at`, before its bytes were read). A no-op when the head has changed
    /// meanwhile, or when the mtime is too close to the read to tell a later write in the same
    /// clock tick apart (the file is then re-read on the next scan).
    pub fn record_stat(&self, path: &str, version_id: &str, stat: DiskStat, read_at: std::time::SystemTime) -> Result<bool, StoreError> {
        if !stat.settled(read_at) {
            return Ok(false);
        }
        let n = self
            .conn
            .prepare_cached("UPDATE notes SET disk_size = ?3, disk_mtime = ?4 WHERE path = ?1 AND head_version = ?2")
            .and_then(|mut st| st.execute(params![path, version_id, stat.size as i64, stat.mtime_ns]))
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    /// Whether a live note exists at `path`.
    pub fn note_exists(&self, path: &str) -> Result<bool, StoreError> {
        Ok(self.head_of(path)?.is_some())
    }

    /// Full ids of the versions whose id starts with `prefix` (hex, any case), at most `limit`.
    pub fn versions_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let p = prefix.to_ascii_lowercase();
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(Vec::new());
        }
        // Ids are lowercase hex: every id with the prefix sorts in [p, p + "g").
        let mut ids: Vec<String> = self.rows(
            "SELECT id FROM versions WHERE id >= ?1 AND id < ?1 || 'g' ORDER BY id LIMIT ?2",
            rusqlite::params![p, limit as i64],
            |r| r.get(0),
        )?;
        // Versions of the shared tier cited before (kept beside the database, not in it).
        if let Some(dir) = self.shared_cache_dir() {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    // A damaged file is no version: it names nothing, so the tier is asked
                    // again and the file is written anew.
                    if name.len() == 64
                        && name.starts_with(&p)
                        && name.bytes().all(|b| b.is_ascii_hexdigit())
                        && !ids.contains(&name)
                        && self.shared_body(&name).is_some()
                    {
                        ids.push(name);
                    }
                }
            }
            ids.sort();
            ids.truncate(limit);
        }
        Ok(ids)
    }

    /// Where the bytes of shared-tier versions that answers cited are kept:
    /// [`StoreOptions::shared_cache`](crate::StoreOptions::shared_cache), else
    /// `<database folder>/shared-versions/<id>`. Files, not rows, so a reader can keep them
    /// without going through the writer; content-addressed, so each is checked on every read.
    pub fn shared_cache_dir(&self) -> Option<std::path::PathBuf> {
        if let Some(dir) = &self.opts.shared_cache {
            return Some(dir.clone());
        }
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty())?;
        Some(dir.join("shared-versions"))
    }

    /// Keeps `body` as the shared version `id`, if it is the SHA-256 of `body` (anything else is
    /// refused: a citation must never resolve to other bytes than it pinned). Written whole
    /// (a temporary file of this writer's own, synced, then renamed over the name), so a reader
    /// sees the old file or the new one; a kept file that no longer holds its version (a crash
    /// before its bytes reached the disk, a damaged disk) is written again.
    pub fn cache_shared_body(&self, id: &str, body: &[u8]) -> Result<(), String> {
        use std::io::Write;
        if crate::version_id(body) != id {
            return Err(format!("the shared tier's bytes for version {} do not hash to that id", &id[..id.len().min(12)]));
        }
        let dir = self.shared_cache_dir().ok_or("this store has no folder for shared versions")?;
        let file = dir.join(id);
        if self.shared_body(id).is_some() {
            return Ok(());
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{id}.{}.{n}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(body)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &file)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("keeping a shared version in {}: {e}", dir.display())
        })
    }

    fn shared_body(&self, version_id: &str) -> Option<Vec<u8>> {
        if version_id.len() != 64 || !version_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let body = std::fs::read(self.shared_cache_dir()?.join(version_id)).ok()?;
        // A damaged file is no version.
        (crate::version_id(&body) == version_id).then_some(body)
    }

    /// The id to write in a citation: the first [`SHORT_ID`] hex digits, longer (4 at a time)
    /// while another version shares them. Resolved back with [`Store::versions_with_prefix`].
    pub fn short_version_id(&self, id: &str) -> Result<String, StoreError> {
        let mut len = SHORT_ID.min(id.len());
        while len < id.len() && self.versions_with_prefix(&id[..len], 2)?.len() > 1 {
            len = (len + 4).min(id.len());
        }
        Ok(id[..len].to_owned())
    }

    /// The stored bytes of a version.
    pub fn version_body(&self, version_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = self
            .conn
            .query_row("SELECT body FROM versions WHERE id = ?1", [version_id], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(row.or_else(|| self.shared_body(version_id)))
    }

    /// Version ids of a note, oldest first.
    pub fn history(&self, path: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.rows(
            "SELECT v.version_id FROM note_versions v JOIN notes n ON n.id = v.note_id WHERE n.path = ?1 ORDER BY v.seq",
            [path],
            |r| r.get(0),
        )?;
        Ok(rows)
    }

    /// Remembers the shared tier's current version of some of its notes (`None`: the note is no
    /// longer published), as seen at publish `seq`: what a citation into the tier is checked
    /// against without asking the tier again. An entry seen at a later publish is kept over an
    /// earlier one. Kept beside the shared versions, one file per tier, written whole.
    pub fn remember_shared_heads(&self, tier: &str, seq: i64, heads: &[(String, Option<String>)]) -> Result<(), String> {
        use std::io::Write;
        if heads.is_empty() {
            return Ok(());
        }
        let dir = self.shared_cache_dir().ok_or("this store has no folder for shared versions")?;
        let file = dir.join(shared_heads_file(tier));
        let mut map: serde_json::Map<String, serde_json::Value> = read_shared_heads(&file);
        for (rel, head) in heads {
            let newer = map.get(rel).and_then(|e| e["seq"].as_i64()).is_none_or(|old| seq >= old);
            let valid = head.as_ref().is_none_or(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
            if newer && valid {
                map.insert(rel.clone(), serde_json::json!({"head": head, "seq": seq}));
            }
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".heads.{}.{n}.tmp", std::process::id()));
        let body = serde_json::to_vec(&serde_json::json!({"tier": tier, "heads": map})).map_err(|e| e.to_string())?;
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &file)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("keeping the shared tier's heads in {}: {e}", dir.display())
        })
    }

    /// The shared tier's current version of note `rel` as last seen ([`Store::remember_shared_heads`]):
    /// `Some((None, seq))` when it was no longer published; `None` when never seen.
    pub fn shared_head(&self, tier: &str, rel: &str) -> Option<(Option<String>, i64)> {
        let file = self.shared_cache_dir()?.join(shared_heads_file(tier));
        let map = read_shared_heads(&file);
        let e = map.get(rel)?;
        let seq = e["seq"].as_i64()?;
        // A value that is neither null nor a version id was not written by lode: nothing learned.
        let head = match &e["head"] {
            serde_json::Value::Null => None,
            v => Some(v.as_str().filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))?.to_owned()),
        };
        Some((head, seq))
    }

    /// The note a version belongs to (its current path) and that note's head version, if the
    /// note still exists.
    pub fn head_for_version(&self, version_id: &str) -> Result<Option<(String, String)>, StoreError> {
        self.conn
            .query_row(
                "SELECT n.path, n.head_version FROM note_versions v JOIN notes n ON n.id = v.note_id
                 WHERE v.version_id = ?1 AND n.head_version IS NOT NULL ORDER BY v.seq DESC LIMIT 1",
                [version_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Path (when saved), note title and save time (UTC, `YYYY-MM-DD HH:MM`) of a version.
    pub fn version_info(&self, version_id: &str) -> Result<Option<(String, String, String)>, StoreError> {
        let row: Option<(String, String, i64)> = self
            .conn
            .query_row(
                "SELECT v.path, n.title, v.created_at FROM note_versions v JOIN notes n ON n.id = v.note_id
                 WHERE v.version_id = ?1 ORDER BY v.seq LIMIT 1",
                [version_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(row.map(|(p, t, ms)| (p, t, format_utc(ms))))
    }

    fn chunk_fingerprint(&self) -> String {
        serde_json::to_string(&self.opts.chunk).unwrap_or_default()
    }

    /// Whether passages were made with other chunker settings than this store's.
    pub fn chunking_changed(&self) -> Result<bool, StoreError> {
        let stored: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'chunk_config'", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(stored.is_some_and(|s| s != self.chunk_fingerprint()))
    }

    /// Records the chunker settings the passages were made with.
    pub fn record_chunking(&self) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES ('chunk_config', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [self.chunk_fingerprint()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Re-chunks the head version of every live note (after a change of chunker settings),
    /// without making new versions. Committed in batches.
    pub fn rechunk_heads(&mut self, mut progress: impl FnMut(usize, usize)) -> Result<usize, StoreError> {
        // Snapshots too: their passages come from the same chunker.
        let notes = self.rows("SELECT id, path, title, head_version FROM notes WHERE head_version IS NOT NULL ORDER BY path", [], |r| {
            Ok(NoteInfo { id: r.get(0)?, path: r.get(1)?, title: r.get(2)?, head_version: r.get(3)? })
        })?;
        let total = notes.len();
        let result = self.rechunk_notes(&notes, &mut progress);
        // Never leave a batch open: what was re-chunked before a failure stays.
        let ended = self.end_batch();
        result?;
        ended?;
        self.record_chunking()?;
        Ok(total)
    }

    fn rechunk_notes(&mut self, notes: &[NoteInfo], progress: &mut impl FnMut(usize, usize)) -> Result<(), StoreError> {
        for (i, n) in notes.iter().enumerate() {
            if i % crate::vault::BATCH == 0 {
                self.end_batch()?;
                self.begin_batch()?;
            }
            let Some(vid) = &n.head_version else { continue };
            let Some(body) = self.version_body(vid)? else { continue };
            let chunked = chunk_note(&body, &self.opts.chunk);
            let path_buf = self.path.clone();
            let e = |e| StoreError::from_sqlite(&path_buf, e);
            let tx = self.write_tx().map_err(e)?;
            write_note(&tx, &n.path, &body, vid, &chunked, false, false).map_err(e)?;
            tx.commit().map_err(e)?;
            progress(i + 1, notes.len());
        }
        Ok(())
    }
}

/// `YYYY-MM-DD HH:MM UTC` of unix milliseconds.
fn format_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// Hex digits of a version id written in citations (and printed by the CLI): 48 bits, so a
/// vault needs ~16 million versions before two are likely to share them; longer when they do.
pub const SHORT_ID: usize = 12;

/// The file naming one tier's heads: not 64 hex digits, so never taken for a version.
fn shared_heads_file(tier: &str) -> String {
    format!("heads-{}.json", &crate::version_id(tier.as_bytes())[..16])
}

/// A tier's heads file read as a map (empty when missing, unreadable, over 16 MB or not JSON:
/// the heads are then learned again).
fn read_shared_heads(file: &std::path::Path) -> serde_json::Map<String, serde_json::Value> {
    let Ok(meta) = std::fs::symlink_metadata(file) else { return Default::default() };
    if !meta.is_file() || meta.len() > 16 << 20 {
        return Default::default();
    }
    std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("heads").and_then(|h| h.as_object()).cloned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formatting() {
        assert_eq!(super::format_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(super::format_utc(1_796_000_000_000), "2026-11-30 00:53 UTC");
    }
}
