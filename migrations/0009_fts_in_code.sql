-- lode schema v9: the full-text rows (passages_fts, titles_tri, headings_tri, sections_fts)
-- are written by the store's write path, no longer by triggers. A statement that runs a
-- trigger opens a statement journal, and opening one makes every FTS5 table already written in
-- the transaction flush its pending terms into a new segment: a batch of notes wrote one
-- segment per passage, and FTS5 then spent most of a cold index merging them. The indexes'
-- contents do not change.
DROP TRIGGER passages_ai;
DROP TRIGGER passages_ad;
DROP TRIGGER notes_tri_ai;
DROP TRIGGER notes_tri_au;
DROP TRIGGER notes_tri_ad;
DROP TRIGGER headings_tri_ai;
DROP TRIGGER headings_tri_ad;
DROP TRIGGER sections_ad;
