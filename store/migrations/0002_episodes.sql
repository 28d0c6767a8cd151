-- The episode index: what each episode did, kept by the transactions that
-- start and end its calls (so a summary is one row, a page of calls one
-- index range), and each call's position among its episode's calls.

CREATE TABLE episodes (
    episode text PRIMARY KEY,
    last_at bigint NOT NULL,
    summary bytea NOT NULL
);
CREATE INDEX episodes_by_activity ON episodes (last_at DESC, episode COLLATE "C" DESC);

-- A task's position among its episode's calls, in the order they were
-- created (filled for earlier rows by `worldd store init`).
ALTER TABLE tasks ADD COLUMN seq bigint;
CREATE UNIQUE INDEX tasks_by_episode ON tasks (episode, seq);

ALTER TABLE sessions ADD COLUMN episode text;
CREATE INDEX sessions_by_episode ON sessions (episode);
