-- The approval each A2A task of a session last waited on (asked it, or
-- found it open), written in the wait's transaction: a task that waited is
-- found by its own id however its approval ended (used or decided by another
-- call of the session). Kept as long as approval rows are (always).

CREATE TABLE approval_waits (
    credential bytea NOT NULL,
    task_id text NOT NULL,
    approval text NOT NULL,
    PRIMARY KEY (credential, task_id)
);
