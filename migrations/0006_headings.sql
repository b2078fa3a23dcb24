-- lode schema v6: every heading of a note's head, for `workspace/symbol`. Symbols were the
-- sections of passages, so a heading with no text under it (before the next heading) was never
-- found, and every passage of a section carried its own trigram rows. Filled for existing heads
-- by the store right after this migration (headings come from the chunker, in Rust).

CREATE TABLE headings (
    id      INTEGER PRIMARY KEY,
    note_id INTEGER NOT NULL REFERENCES notes(id),
    name    TEXT NOT NULL,               -- the heading's text, without `#` markers
    line    INTEGER NOT NULL,            -- 1-based line of the heading in the head version
    level   INTEGER NOT NULL
);
CREATE INDEX headings_note ON headings(note_id);
-- Queries of one or two characters (and every query first) match names by prefix, through this.
CREATE INDEX headings_folded ON headings(lower(name));

DROP TRIGGER passages_tri_ai;
DROP TRIGGER passages_tri_au;
DROP TRIGGER passages_tri_ad;
DROP TABLE headings_tri;
DROP INDEX passages_section_folded;

CREATE VIRTUAL TABLE headings_tri USING fts5(name, content = 'headings', content_rowid = 'id', tokenize = 'trigram');
CREATE TRIGGER headings_tri_ai AFTER INSERT ON headings BEGIN
    INSERT INTO headings_tri(rowid, name) VALUES (new.id, new.name);
END;
CREATE TRIGGER headings_tri_ad AFTER DELETE ON headings BEGIN
    INSERT INTO headings_tri(headings_tri, rowid, name) VALUES ('delete', old.id, old.name);
END;
