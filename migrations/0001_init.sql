-- lode schema v1: versioned notes, head-only passages, FTS5 lexical index, link edges.
-- Applied by server/lode-store/src/migrate.rs inside one transaction; forward only.

-- Store-wide settings that data depends on (e.g. the chunker settings passages were made with).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Content-addressed bodies: id is the SHA-256 of the bytes, so identical bytes are stored once
-- and a version id pins exact text forever.
CREATE TABLE versions (
    id         TEXT PRIMARY KEY,
    body       BLOB NOT NULL,
    size       INTEGER NOT NULL,
    lossy      INTEGER NOT NULL DEFAULT 0,   -- 1 when the bytes are not valid UTF-8
    created_at INTEGER NOT NULL               -- unix milliseconds
);

-- A note is a logical document with a stable id; its path changes on rename.
-- head_version is NULL while the note is deleted (its history is kept).
CREATE TABLE notes (
    id           INTEGER PRIMARY KEY,
    path         TEXT NOT NULL UNIQUE,        -- workspace-relative, '/'-separated
    stem         TEXT NOT NULL,               -- lower-cased file name without extension (wiki links)
    title        TEXT NOT NULL DEFAULT '',
    head_version TEXT REFERENCES versions(id),
    meta         TEXT NOT NULL DEFAULT '{}',  -- frontmatter scalars as a JSON object
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

-- Every version a note has had, in order (history for audit; never indexed).
CREATE TABLE note_versions (
    note_id    INTEGER NOT NULL REFERENCES notes(id),
    seq        INTEGER NOT NULL,
    version_id TEXT NOT NULL REFERENCES versions(id),
    path       TEXT NOT NULL,                 -- the note's path when this version was saved
    created_at INTEGER NOT NULL,
    PRIMARY KEY (note_id, seq)
);
CREATE INDEX note_versions_version ON note_versions(version_id);

-- Passages of head versions only. Byte ranges are into versions.body.
CREATE TABLE passages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: vectors are keyed by it
    note_id      INTEGER NOT NULL REFERENCES notes(id),
    version_id   TEXT NOT NULL REFERENCES versions(id),
    ordinal      INTEGER NOT NULL,
    start        INTEGER NOT NULL,
    end          INTEGER NOT NULL,
    line         INTEGER NOT NULL,            -- 1-based line of start
    kind         TEXT NOT NULL,
    heading      TEXT NOT NULL,               -- note title and heading path, ' › '-joined
    parent_id    TEXT NOT NULL,               -- '<version>:<start>-<end>' of the parent block
    parent_start INTEGER NOT NULL,
    parent_end   INTEGER NOT NULL,
    text         TEXT NOT NULL,               -- exactly the version's bytes in [start, end)
    body         TEXT NOT NULL                -- text as indexed: link destinations and URLs blanked
);
CREATE INDEX passages_note ON passages(note_id, ordinal);

-- External-content FTS5 index over passages, kept in step by triggers.
CREATE VIRTUAL TABLE passages_fts USING fts5(
    heading, body,
    content = 'passages', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, heading, body) VALUES (new.id, new.heading, new.body);
END;
CREATE TRIGGER passages_ad AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, heading, body)
        VALUES ('delete', old.id, old.heading, old.body);
END;

-- Link edges from the head version of a note. target_note is resolved when the target exists.
CREATE TABLE links (
    src_note    INTEGER NOT NULL REFERENCES notes(id),
    kind        TEXT NOT NULL,                -- 'wiki' | 'markdown'
    target      TEXT NOT NULL,                -- as written
    target_key  TEXT NOT NULL,                -- markdown: vault-relative path; wiki: lower-cased name
    target_note INTEGER REFERENCES notes(id),
    start       INTEGER NOT NULL,
    end         INTEGER NOT NULL
);
CREATE INDEX links_src ON links(src_note);
CREATE INDEX links_target ON links(target_note);
CREATE INDEX links_key ON links(target_key) WHERE target_note IS NULL;
CREATE INDEX notes_stem ON notes(stem);
