-- lode schema v11: the folded-name index of headings carries what a symbol lookup returns (the
-- name, its line and its note), so a prefix lookup reads one range of the index instead of one
-- heading row per answer. Those rows lie far apart: at a million notes a lookup of a hundred
-- answers whose pages are not cached read a hundred scattered heading pages, about half of its
-- time. Rebuilt by one sort from the table.
DROP INDEX IF EXISTS headings_folded;
CREATE INDEX headings_folded ON headings(lower(name), name, line, note_id);
