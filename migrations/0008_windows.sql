-- lode schema v8: dense vectors cover embedding windows. A window is a run of consecutive
-- passages of one section, embedded as one model input; its LanceDB row is keyed by the
-- window's first passage (its leader), and every member records the window it belongs to.
-- Citations stay at passage level: a dense hit on a window is resolved to one of its members.
ALTER TABLE passage_vectors ADD COLUMN window_id INTEGER;
-- Vectors made before v8 cover one passage each: each is a window of one.
UPDATE passage_vectors SET window_id = passage_id;
CREATE INDEX passage_vectors_window ON passage_vectors(window_id, model);

-- Deletions are per model: a leader survives its window (it becomes pending again), so the
-- same id can be queued by one model's table and still be a live row of another's. Entries
-- from before v8 name passages that are gone for good: they apply to every model.
CREATE TABLE vector_deletions_v8 (
    passage_id INTEGER NOT NULL,
    model      TEXT NOT NULL,
    PRIMARY KEY (passage_id, model)
) WITHOUT ROWID;
INSERT OR IGNORE INTO vector_deletions_v8 (passage_id, model)
    SELECT d.passage_id, m.model FROM vector_deletions d, (SELECT DISTINCT model FROM passage_vectors) m;
DROP TRIGGER passages_vec_ad;
DROP TABLE vector_deletions;
ALTER TABLE vector_deletions_v8 RENAME TO vector_deletions;

-- A passage that leaves takes its whole window's vector with it (the vector covers its text):
-- the leader is queued for deletion from that model's LanceDB table and the other members
-- become pending again.
CREATE TRIGGER passages_vec_ad AFTER DELETE ON passages
WHEN EXISTS (SELECT 1 FROM passage_vectors WHERE passage_id = old.id)
BEGIN
    INSERT OR IGNORE INTO vector_deletions (passage_id, model)
        SELECT window_id, model FROM passage_vectors WHERE passage_id = old.id;
    DELETE FROM passage_vectors WHERE (window_id, model) IN
        (SELECT window_id, model FROM passage_vectors WHERE passage_id = old.id);
END;

-- Sections for ranking: a section is a run of consecutive passages of a note under one heading
-- path. Its whole text is indexed once more, contentless (the text lives in `passages`), so
-- lexical search can rank a note written as forty one-line paragraphs by all forty of them.
-- `hash` lets a save rewrite only the sections whose text changed.
CREATE TABLE sections (
    id            INTEGER PRIMARY KEY,
    note_id       INTEGER NOT NULL,
    heading       TEXT NOT NULL,
    first_ordinal INTEGER NOT NULL,
    last_ordinal  INTEGER NOT NULL,
    hash          INTEGER NOT NULL
);
CREATE INDEX sections_note ON sections(note_id, first_ordinal);
CREATE VIRTUAL TABLE sections_fts USING fts5(
    heading, body,
    content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER sections_ad AFTER DELETE ON sections BEGIN
    DELETE FROM sections_fts WHERE rowid = old.id;
END;
-- Existing notes: each run of consecutive passages under one heading path (a run's ordinals
-- minus their rank within the heading is constant) is a section; hash 0, so the next save of a
-- note that changes it rewrites its sections exactly.
INSERT INTO sections (note_id, heading, first_ordinal, last_ordinal, hash)
    SELECT note_id, heading, min(ordinal), max(ordinal), 0 FROM
        (SELECT note_id, heading, ordinal,
                ordinal - row_number() OVER (PARTITION BY note_id, heading ORDER BY ordinal) AS run
         FROM passages)
    GROUP BY note_id, heading, run;
INSERT INTO sections_fts (rowid, heading, body)
    SELECT s.id, s.heading,
           (SELECT group_concat(body, char(10)) FROM
               (SELECT p.body FROM passages p
                WHERE p.note_id = s.note_id AND p.ordinal BETWEEN s.first_ordinal AND s.last_ordinal
                ORDER BY p.ordinal))
    FROM sections s;
