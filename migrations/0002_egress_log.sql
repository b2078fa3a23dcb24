-- lode schema v2: a row for every call that sent note text off the machine.
CREATE TABLE egress_log (
    id          INTEGER PRIMARY KEY,
    at          INTEGER NOT NULL,   -- unix milliseconds
    destination TEXT NOT NULL,      -- host[:port] of the endpoint
    purpose     TEXT NOT NULL,      -- 'synthesis', ...
    passages    TEXT NOT NULL,      -- JSON array of passage ids whose text was sent
    bytes       INTEGER NOT NULL,   -- request body size
    redactions  INTEGER NOT NULL    -- secrets replaced before sending
);
