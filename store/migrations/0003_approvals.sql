-- Approvals: a person's yes asked for an effect under a grant that asks.
-- One row per approval; an open one (pending, or approved and not used up)
-- is found again by its session's credential and the request's digest.

CREATE TABLE approvals (
    id text PRIMARY KEY,
    credential bytea NOT NULL,
    digest bytea NOT NULL,
    episode text NOT NULL,
    state text NOT NULL,
    closed boolean NOT NULL,
    requested_at bigint NOT NULL,
    approval bytea NOT NULL
);
CREATE UNIQUE INDEX open_approvals ON approvals (credential, digest) WHERE NOT closed;
CREATE INDEX approvals_by_time ON approvals (requested_at DESC, id COLLATE "C" DESC);

-- The store's secrets: the key that seals the questions asked of a client
-- (every node checks what another asked). Never exported.
CREATE TABLE secrets (
    name text PRIMARY KEY,
    value bytea NOT NULL
);
