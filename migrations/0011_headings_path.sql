-- lode schema v11: a heading row carries its note's path (kept by renames), and the folded-name
-- index of headings carries what a symbol lookup returns (the name, its line and that path), so
-- a prefix lookup reads one range of the index and nothing else. Before, it read a heading row
-- and a note row per answer, which lie far apart: at a million notes, a lookup of a hundred
-- answers whose pages were not cached read two hundred scattered pages, most of its time.
DROP INDEX IF EXISTS headings_folded;
ALTER TABLE headings ADD COLUMN path TEXT NOT NULL DEFAULT '';
UPDATE headings SET path = coalesce((SELECT n.path FROM notes n WHERE n.id = headings.note_id), '');
CREATE INDEX headings_folded ON headings(lower(name), name, line, path);
