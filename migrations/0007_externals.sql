-- lode schema v7: externals (resources notes link to, http/https for now) and their snapshots.
--
-- A snapshot's readable text (markdown extracted from the page) is stored as a version of a
-- note row of kind 'snapshot' whose path is the external's URL, so the chunker, FTS5, vectors,
-- citations and drift checks treat it like a note: only its head (the latest snapshot) is
-- indexed, earlier snapshots stay in note_versions. A snapshot's id is that version's id (the
-- SHA-256 of the text): fetching an identical body again makes no new snapshot, only a new
-- `seen_at`. Snapshot notes have no stem, tags, aliases or headings: they are not notes a wiki
-- link, completion, a tag or `workspace/symbol` can name.

ALTER TABLE notes ADD COLUMN kind TEXT NOT NULL DEFAULT 'note';   -- 'note' | 'snapshot'

CREATE TABLE externals (
    id              INTEGER PRIMARY KEY,
    url             TEXT NOT NULL UNIQUE,       -- as linked, without #fragment
    note_id         INTEGER REFERENCES notes(id), -- the snapshot note; NULL until a fetch succeeds
    discovered_via  TEXT NOT NULL,              -- 'link' (mirrored from a note) | 'ask' (a tool call)
    last_attempt_at INTEGER,                    -- unix ms of the latest fetch, successful or not
    last_status     INTEGER,                    -- HTTP status of that fetch, NULL when none came
    last_error      TEXT,                       -- why that fetch failed; NULL when it succeeded
    created_at      INTEGER NOT NULL
);

CREATE TABLE snapshots (
    external_id  INTEGER NOT NULL REFERENCES externals(id),
    version_id   TEXT NOT NULL REFERENCES versions(id),
    fetched_at   INTEGER NOT NULL,               -- the first fetch that returned this text
    seen_at      INTEGER NOT NULL,               -- the latest fetch that returned it
    status       INTEGER NOT NULL,               -- HTTP status
    content_type TEXT NOT NULL,
    final_url    TEXT NOT NULL,                  -- after redirects
    PRIMARY KEY (external_id, version_id)
);
CREATE INDEX snapshots_version ON snapshots(version_id);

-- Links to a URL, for `linked_from` and the externals a scan discovers.
CREATE INDEX links_url ON links(target) WHERE target LIKE 'http%';
