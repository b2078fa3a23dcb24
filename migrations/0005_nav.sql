-- lode schema v5: what note navigation needs beyond links — tags (inline `#tags` and frontmatter
-- `tags:`) and frontmatter aliases of head versions, kept with the note's passages and links in
-- one transaction. Existing notes are filled by the store right after this migration.

CREATE TABLE tags (
    note_id INTEGER NOT NULL REFERENCES notes(id),
    tag     TEXT NOT NULL,               -- as written, without '#'
    folded  TEXT NOT NULL,               -- Unicode-lowercased: tags match case-insensitively
    start   INTEGER NOT NULL,            -- byte range of the item in the head version
    end     INTEGER NOT NULL
);
CREATE INDEX tags_folded ON tags(folded);
CREATE INDEX tags_note ON tags(note_id);

CREATE TABLE aliases (
    note_id INTEGER NOT NULL REFERENCES notes(id),
    alias   TEXT NOT NULL,
    folded  TEXT NOT NULL
);
CREATE INDEX aliases_folded ON aliases(folded);
CREATE INDEX aliases_note ON aliases(note_id);
