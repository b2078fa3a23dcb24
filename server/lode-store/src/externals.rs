//! Externals and their snapshots: what a fetch recorded, and what the index, diagnostics and
//! `lode externals` read back. Fetching itself is not here (`lode-externals`); this module only
//! writes what a fetch returned, in one transaction with the snapshot's passages.

use std::collections::HashMap;

use lode_core::chunk::chunk_note;
use rusqlite::{params, OptionalExtension};

use crate::error::StoreError;
use crate::store::{now_ms, write_note, SaveStatus, Store};

/// How an external became known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// A note links to it (mirrored by a command or `lode externals refresh`).
    Link,
    /// A tool call during an answer fetched it; no note links to it.
    Ask,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Link => "link",
            Via::Ask => "ask",
        }
    }
}

/// A successful fetch, ready to store.
#[derive(Debug, Clone)]
pub struct NewSnapshot<'a> {
    /// The external's identity: the URL as linked, without `#fragment`.
    pub url: &'a str,
    /// Where the body came from after redirects.
    pub final_url: &'a str,
    pub status: u16,
    pub content_type: &'a str,
    /// The readable text (markdown) the page was turned into: what passages and citations use.
    pub text: &'a [u8],
    pub via: Via,
}

/// What storing a fetch did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SnapshotSaved {
    /// The snapshot's id: the version id (SHA-256) of its text.
    pub snapshot_id: String,
    /// The external's snapshot note (its passages' `note_id`).
    pub note_id: i64,
    /// False when the text equals the current snapshot's (only `seen_at` moved).
    pub changed: bool,
    pub passages: usize,
}

/// One external, as `lode externals list` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ExternalInfo {
    pub url: String,
    /// The current snapshot (head), if a fetch ever succeeded.
    pub snapshot_id: Option<String>,
    pub title: Option<String>,
    /// When the current snapshot's text was first fetched (unix ms).
    pub fetched_at: Option<i64>,
    /// The latest fetch that returned the current text (unix ms): age is counted from here.
    pub seen_at: Option<i64>,
    /// HTTP status and content type of the current snapshot.
    pub status: Option<u16>,
    pub content_type: Option<String>,
    pub final_url: Option<String>,
    pub discovered_via: Option<String>,
    /// The latest fetch, successful or not: when, its status, and why it failed.
    pub last_attempt_at: Option<i64>,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    /// Live notes linking to it, by path.
    pub linked_from: Vec<String>,
    /// Snapshots kept for this external (the current one included).
    pub snapshots: usize,
}

impl ExternalInfo {
    /// Days since the current snapshot was last confirmed by a fetch.
    pub fn age_days(&self, now_ms: i64) -> Option<f64> {
        self.seen_at.map(|s| (now_ms - s).max(0) as f64 / 86_400_000.0)
    }

    /// Whether the latest fetch failed (after the current snapshot, if any).
    pub fn failed(&self) -> bool {
        self.last_error.is_some()
    }
}

/// What a snapshot note's passages need for ranking and display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotOf {
    pub url: String,
    pub fetched_at: i64,
    pub seen_at: i64,
}

/// Whether `target` (a link target as written) names an external lode can mirror.
pub fn is_web_url(target: &str) -> bool {
    let t = target.trim();
    let lower = t.get(..8).unwrap_or(t).to_ascii_lowercase();
    (lower.starts_with("http://") && t.len() > 7) || (lower.starts_with("https://") && t.len() > 8)
}

impl Store {
    /// Stores a fetched page: the external row (created if new), the snapshot (a new version of
    /// the external's snapshot note when the text changed, else only a later `seen_at`), and its
    /// passages — one transaction.
    pub fn save_snapshot(&mut self, s: &NewSnapshot<'_>) -> Result<SnapshotSaved, StoreError> {
        let vid = crate::version_id(s.text);
        let chunked = chunk_note(s.text, &self.opts.chunk);
        let now = now_ms();
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        let ext_id = upsert_external(&tx, s.url, s.via, now).map_err(e)?;
        let existing: Option<(i64, Option<String>, String)> = tx
            .query_row("SELECT id, head_version, kind FROM notes WHERE path = ?1", [s.url], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
            .map_err(e)?;
        if let Some((_, _, kind)) = &existing {
            if kind != "snapshot" {
                // Only reachable through a vault path that is a URL, which `indexable` refuses.
                return Err(StoreError::PathTaken(s.url.to_owned()));
            }
        }
        let unchanged = matches!(&existing, Some((_, Some(head), _)) if *head == vid);
        let (note_id, passages) = if unchanged {
            let id = existing.as_ref().map(|x| x.0).unwrap_or_default();
            let n: i64 = tx.query_row("SELECT count(*) FROM passages WHERE note_id = ?1", [id], |r| r.get(0)).map_err(e)?;
            (id, n as usize)
        } else {
            let out = write_note(&tx, s.url, s.text, &vid, &chunked, true, true).map_err(e)?;
            debug_assert!(out.status != SaveStatus::Unchanged);
            (out.note_id, out.passages)
        };
        tx.execute(
            "INSERT INTO snapshots (external_id, version_id, fetched_at, seen_at, status, content_type, final_url)
             VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)
             ON CONFLICT (external_id, version_id) DO UPDATE SET
                seen_at = excluded.seen_at, status = excluded.status,
                content_type = excluded.content_type, final_url = excluded.final_url",
            params![ext_id, vid, now, s.status, s.content_type, s.final_url],
        )
        .map_err(e)?;
        tx.execute(
            "UPDATE externals SET note_id = ?2, last_attempt_at = ?3, last_status = ?4, last_error = NULL WHERE id = ?1",
            params![ext_id, note_id, now, s.status],
        )
        .map_err(e)?;
        // Where the text really came from, for egress rules by domain (a redirect may lead to
        // a no-egress host).
        tx.execute("UPDATE notes SET meta = json_object('final_url', ?2) WHERE id = ?1", params![note_id, s.final_url]).map_err(e)?;
        tx.commit().map_err(e)?;
        Ok(SnapshotSaved { snapshot_id: vid, note_id, changed: !unchanged, passages })
    }

    /// Records a fetch that returned nothing to store. The current snapshot, if any, stays.
    pub fn record_fetch_failure(&mut self, url: &str, via: Via, status: Option<u16>, error: &str) -> Result<(), StoreError> {
        let now = now_ms();
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        let id = upsert_external(&tx, url, via, now).map_err(e)?;
        tx.execute(
            "UPDATE externals SET last_attempt_at = ?2, last_status = ?3, last_error = ?4 WHERE id = ?1",
            params![id, now, status, error],
        )
        .map_err(e)?;
        tx.commit().map_err(e)
    }

    /// Distinct web URLs that live notes link to, in order.
    pub fn linked_urls(&self) -> Result<Vec<String>, StoreError> {
        self.rows(
            "SELECT DISTINCT l.target FROM links l JOIN notes n ON n.id = l.src_note
              WHERE l.target LIKE 'http%' AND n.kind = 'note' AND n.head_version IS NOT NULL
                AND (l.target LIKE 'http://_%' OR l.target LIKE 'https://_%')
              ORDER BY l.target",
            [],
            |r| r.get(0),
        )
    }

    /// Every external: the ones notes link to (mirrored or not) and the ones an answer fetched.
    pub fn externals(&self) -> Result<Vec<ExternalInfo>, StoreError> {
        let mut urls = self.linked_urls()?;
        urls.extend(self.rows("SELECT url FROM externals", [], |r| r.get::<_, String>(0))?);
        urls.sort();
        urls.dedup();
        self.externals_for(&urls)
    }

    /// What is known of each of `urls` (one entry per URL, in order; an unknown URL has every
    /// field empty but `url` and `linked_from`).
    pub fn externals_for(&self, urls: &[String]) -> Result<Vec<ExternalInfo>, StoreError> {
        let mut out = Vec::with_capacity(urls.len());
        for url in urls {
            out.push(self.external(url)?);
        }
        Ok(out)
    }

    /// What is known of one external.
    pub fn external(&self, url: &str) -> Result<ExternalInfo, StoreError> {
        let mut info = self.external_brief(url)?;
        if info.snapshot_id.is_some() || info.last_attempt_at.is_some() {
            info.snapshots = self
                .conn
                .prepare_cached("SELECT count(*) FROM snapshots s JOIN externals e ON e.id = s.external_id WHERE e.url = ?1")
                .and_then(|mut st| st.query_row([url], |r| r.get::<_, i64>(0)))
                .map_err(|e| self.err(e))? as usize;
        }
        info.linked_from = self.rows(
            "SELECT DISTINCT n.path FROM links l JOIN notes n ON n.id = l.src_note
              WHERE l.target LIKE 'http%' AND l.target = ?1 AND n.kind = 'note' AND n.head_version IS NOT NULL
              ORDER BY n.path",
            [url],
            |r| r.get(0),
        )?;
        Ok(info)
    }

    /// One external's current snapshot and latest fetch, in one lookup (`linked_from` and
    /// `snapshots` left empty): what a diagnostic or hover needs.
    pub fn external_brief(&self, url: &str) -> Result<ExternalInfo, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT e.id, n.head_version, n.title, s.fetched_at, s.seen_at, s.status, s.content_type, s.final_url,
                        e.discovered_via, e.last_attempt_at, e.last_status, e.last_error
                   FROM externals e LEFT JOIN notes n ON n.id = e.note_id AND n.head_version IS NOT NULL
                   LEFT JOIN snapshots s ON s.external_id = e.id AND s.version_id = n.head_version
                  WHERE e.url = ?1",
            )
            .and_then(|mut st| {
                st.query_row([url], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        ExternalInfo {
                            url: url.to_owned(),
                            snapshot_id: r.get(1)?,
                            title: r.get(2)?,
                            fetched_at: r.get(3)?,
                            seen_at: r.get(4)?,
                            status: r.get(5)?,
                            content_type: r.get(6)?,
                            final_url: r.get(7)?,
                            discovered_via: r.get(8)?,
                            last_attempt_at: r.get(9)?,
                            last_status: r.get(10)?,
                            last_error: r.get(11)?,
                            linked_from: Vec::new(),
                            snapshots: 0,
                        },
                    ))
                })
                .optional()
            })
            .map_err(|e| self.err(e))?;
        Ok(match row {
            Some((_, info)) => info,
            None => ExternalInfo {
                url: url.to_owned(),
                snapshot_id: None,
                title: None,
                fetched_at: None,
                seen_at: None,
                status: None,
                content_type: None,
                final_url: None,
                discovered_via: None,
                last_attempt_at: None,
                last_status: None,
                last_error: None,
                linked_from: Vec::new(),
                snapshots: 0,
            },
        })
    }

    /// For the snapshot notes among `note_ids`: their URL and the current snapshot's times.
    pub fn snapshots_of(&self, note_ids: &[i64]) -> Result<HashMap<i64, SnapshotOf>, StoreError> {
        let mut out = HashMap::new();
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT e.url, s.fetched_at, s.seen_at FROM notes n JOIN externals e ON e.note_id = n.id
                   JOIN snapshots s ON s.external_id = e.id AND s.version_id = n.head_version
                  WHERE n.id = ?1 AND n.kind = 'snapshot'",
            )
            .map_err(|e| self.err(e))?;
        for &id in note_ids {
            if out.contains_key(&id) {
                continue;
            }
            let row = st
                .query_row([id], |r| Ok(SnapshotOf { url: r.get(0)?, fetched_at: r.get(1)?, seen_at: r.get(2)? }))
                .optional()
                .map_err(|e| self.err(e))?;
            if let Some(s) = row {
                out.insert(id, s);
            }
        }
        Ok(out)
    }

    /// The external a snapshot version belongs to, with when that text was fetched and last seen.
    pub fn snapshot_version(&self, version_id: &str) -> Result<Option<SnapshotOf>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT e.url, s.fetched_at, s.seen_at FROM snapshots s JOIN externals e ON e.id = s.external_id
                  WHERE s.version_id = ?1 ORDER BY s.seen_at DESC LIMIT 1",
            )
            .and_then(|mut st| {
                st.query_row([version_id], |r| Ok(SnapshotOf { url: r.get(0)?, fetched_at: r.get(1)?, seen_at: r.get(2)? })).optional()
            })
            .map_err(|e| self.err(e))
    }
}

impl Store {
    /// Which of `note_ids` are annotations (frontmatter key `annotates`, any case): one query
    /// for a whole result list, not one per note.
    pub fn annotation_notes(&self, note_ids: &[i64]) -> Result<std::collections::HashSet<i64>, StoreError> {
        if note_ids.is_empty() {
            return Ok(Default::default());
        }
        let ids = serde_json::to_string(note_ids).unwrap_or_else(|_| "[]".into());
        let rows: Vec<(i64, String)> = self.rows(
            "SELECT id, meta FROM notes WHERE id IN (SELECT value FROM json_each(?1)) AND instr(lower(meta), 'annotates') > 0",
            [ids],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(rows
            .into_iter()
            .filter(|(_, m)| {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(m)
                    .is_ok_and(|m| m.keys().any(|k| k.trim().eq_ignore_ascii_case("annotates")))
            })
            .map(|(id, _)| id)
            .collect())
    }

    /// Live notes whose frontmatter mentions `url`: `(path, head version, metadata)`. Which of
    /// them annotate it is for the caller to decide from the metadata.
    pub fn notes_with_meta_mentioning(
        &self,
        url: &str,
    ) -> Result<Vec<(String, String, serde_json::Map<String, serde_json::Value>)>, StoreError> {
        let rows: Vec<(String, String, String)> = self.rows(
            "SELECT path, head_version, meta FROM notes
              WHERE kind = 'note' AND head_version IS NOT NULL AND instr(meta, ?1) > 0 ORDER BY path",
            [url.trim_end_matches('/')],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok(rows.into_iter().map(|(p, v, m)| (p, v, serde_json::from_str(&m).unwrap_or_default())).collect())
    }
}

fn upsert_external(tx: &rusqlite::Connection, url: &str, via: Via, now: i64) -> rusqlite::Result<i64> {
    // A linked URL that an answer fetched first becomes a linked one; never the other way.
    tx.query_row(
        "INSERT INTO externals (url, discovered_via, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (url) DO UPDATE SET discovered_via =
            CASE WHEN excluded.discovered_via = 'link' THEN 'link' ELSE externals.discovered_via END
         RETURNING id",
        params![url, via.as_str(), now],
        |r| r.get(0),
    )
}
