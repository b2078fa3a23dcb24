-- lode schema v3: which head passages have a vector in the LanceDB index, per model.
-- The vectors themselves live in LanceDB (<vault>/.lode/vectors/); this is the bookkeeping that
-- says what is missing, so the embedding worker can resume after a crash or restart.
CREATE TABLE passage_vectors (
    passage_id INTEGER NOT NULL,
    model      TEXT NOT NULL,
    PRIMARY KEY (passage_id, model)
) WITHOUT ROWID;

-- Passages that left the index while they had a vector: the worker deletes those vectors.
CREATE TABLE vector_deletions (
    passage_id INTEGER PRIMARY KEY
);

CREATE TRIGGER passages_vec_ad AFTER DELETE ON passages
WHEN EXISTS (SELECT 1 FROM passage_vectors WHERE passage_id = old.id)
BEGIN
    INSERT OR IGNORE INTO vector_deletions (passage_id) VALUES (old.id);
    DELETE FROM passage_vectors WHERE passage_id = old.id;
END;
