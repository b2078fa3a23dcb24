-- lode schema v8: dense vectors cover embedding windows. A window is a run of consecutive
-- passages of one section, embedded as one model input; its LanceDB row is keyed by the
-- window's first passage (its leader), and every member records the window it belongs to.
-- Citations stay at passage level: a dense hit on a window is resolved to one of its members.
ALTER TABLE passage_vectors ADD COLUMN window_id INTEGER;
-- Vectors made before v8 cover one passage each: each is a window of one.
UPDATE passage_vectors SET window_id = passage_id;
CREATE INDEX passage_vectors_window ON passage_vectors(window_id, model);

-- A passage that leaves takes its whole window's vector with it (the vector covers its text):
-- the leader is queued for deletion from LanceDB and the other members become pending again.
DROP TRIGGER passages_vec_ad;
CREATE TRIGGER passages_vec_ad AFTER DELETE ON passages
WHEN EXISTS (SELECT 1 FROM passage_vectors WHERE passage_id = old.id)
BEGIN
    INSERT OR IGNORE INTO vector_deletions (passage_id)
        SELECT window_id FROM passage_vectors WHERE passage_id = old.id;
    DELETE FROM passage_vectors WHERE (window_id, model) IN
        (SELECT window_id, model FROM passage_vectors WHERE passage_id = old.id);
END;
