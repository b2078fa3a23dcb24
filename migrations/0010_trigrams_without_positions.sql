-- lode schema v10: the trigram indexes of note titles and headings keep no positions
-- (detail=none) and no column sizes (columnsize=0). A substring lookup asks for trigrams joined
-- by AND and checks the substring on each candidate, so it never read the positions, which
-- were two thirds of the index: at a million notes the headings index is 85 MB instead of
-- 237 MB, and a lookup whose doclists are not cached reads 2.3 times fewer pages. Nothing ranks
-- symbols, so the column sizes were never read either. Both are rebuilt from their tables.
DROP TABLE titles_tri;
DROP TABLE headings_tri;
CREATE VIRTUAL TABLE titles_tri USING fts5(title, content = 'notes', content_rowid = 'id', tokenize = 'trigram', detail = none, columnsize = 0);
CREATE VIRTUAL TABLE headings_tri USING fts5(name, content = 'headings', content_rowid = 'id', tokenize = 'trigram', detail = none, columnsize = 0);
INSERT INTO titles_tri(titles_tri) VALUES ('rebuild');
INSERT INTO headings_tri(headings_tri) VALUES ('rebuild');
