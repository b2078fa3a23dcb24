-- lode schema v11: a heading row carries its note's path (kept by renames), and the folded-name
-- index of headings carries what a symbol lookup returns (the name, its line and that path), so
-- a prefix lookup reads one range of the index and nothing else. Before, it read a heading row
-- and a note row per answer, which lie far apart: at a million notes, a lookup of a hundred
-- answers whose pages were not cached read two hundred scattered pages, most of its time.
DROP INDEX IF EXISTS headings_folded;
ALTER TABLE headings ADD COLUMN path TEXT NOT NULL DEFAULT '';
UPDATE headings SET path = coalesce((SELECT n.path FROM notes n WHERE n.id = headings.note_id), '');
CREATE INDEX headings_folded ON headings(lower(name), name, line, path);
-- The versions whose bytes were not UTF-8, for the count `lode stats`, `lode index` and the
-- server's status give: it joined every head to its version's row, which holds the note's
-- bytes (at a million notes, a few gigabytes read when they are not cached).
CREATE INDEX versions_lossy ON versions(id) WHERE lossy = 1;
