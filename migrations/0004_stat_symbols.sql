-- lode schema v4: what a note's file looked like on disk when its head was read (so a restart
-- skips unchanged files by size + mtime without re-reading them), and trigram indexes over note
-- titles and section headings for `workspace/symbol` (substring search without a table scan).

-- NULL when the head did not come from disk as-is (an editor buffer), or the file was too new
-- to trust its mtime (written within the clock's granularity of being read).
ALTER TABLE notes ADD COLUMN disk_size INTEGER;
ALTER TABLE notes ADD COLUMN disk_mtime INTEGER;  -- nanoseconds since the Unix epoch

-- The last segment of a passage's heading path: the section it is in (its symbol name). Filled
-- for existing rows by the store right after this migration (it is computed in Rust).
ALTER TABLE passages ADD COLUMN section TEXT;

-- Queries of one or two characters match names by prefix (ASCII case-folded), through these.
CREATE INDEX notes_title_folded ON notes(lower(title));
CREATE INDEX passages_section_folded ON passages(lower(section));

CREATE VIRTUAL TABLE titles_tri USING fts5(title, content = 'notes', content_rowid = 'id', tokenize = 'trigram');
CREATE VIRTUAL TABLE headings_tri USING fts5(section, content = 'passages', content_rowid = 'id', tokenize = 'trigram');
INSERT INTO titles_tri(titles_tri) VALUES ('rebuild');

CREATE TRIGGER notes_tri_ai AFTER INSERT ON notes BEGIN
    INSERT INTO titles_tri(rowid, title) VALUES (new.id, new.title);
END;
CREATE TRIGGER notes_tri_au AFTER UPDATE OF title ON notes BEGIN
    INSERT INTO titles_tri(titles_tri, rowid, title) VALUES ('delete', old.id, old.title);
    INSERT INTO titles_tri(rowid, title) VALUES (new.id, new.title);
END;
CREATE TRIGGER notes_tri_ad AFTER DELETE ON notes BEGIN
    INSERT INTO titles_tri(titles_tri, rowid, title) VALUES ('delete', old.id, old.title);
END;
-- A passage's heading never changes in place (an edit that moves a passage keeps its heading);
-- rows are indexed once their section is set (new rows: at insert; old ones: by the backfill).
CREATE TRIGGER passages_tri_ai AFTER INSERT ON passages WHEN new.section IS NOT NULL BEGIN
    INSERT INTO headings_tri(rowid, section) VALUES (new.id, new.section);
END;
CREATE TRIGGER passages_tri_au AFTER UPDATE OF section ON passages BEGIN
    INSERT INTO headings_tri(headings_tri, rowid, section) SELECT 'delete', old.id, old.section WHERE old.section IS NOT NULL;
    INSERT INTO headings_tri(rowid, section) SELECT new.id, new.section WHERE new.section IS NOT NULL;
END;
CREATE TRIGGER passages_tri_ad AFTER DELETE ON passages WHEN old.section IS NOT NULL BEGIN
    INSERT INTO headings_tri(headings_tri, rowid, section) VALUES ('delete', old.id, old.section);
END;
