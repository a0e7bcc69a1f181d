-- Tables shaped as the store's (src/backend/postgres/schema.rs), one head per pgbench client.
DROP SCHEMA IF EXISTS ceiling CASCADE;
CREATE SCHEMA ceiling;
CREATE TABLE ceiling.heads (
    user_id    text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    version    bigint NOT NULL,
    epoch      bigint NOT NULL,
    updated_ms bigint NOT NULL,
    record     text NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
CREATE INDEX heads_by_update ON ceiling.heads (updated_ms, user_id, session_id);
CREATE TABLE ceiling.events (
    user_id    text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    body       text NOT NULL,
    PRIMARY KEY (user_id, session_id, seq)
);
CREATE TABLE ceiling.user_state (user_id text COLLATE "C" PRIMARY KEY, state jsonb NOT NULL);
CREATE TABLE ceiling.app_state (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    state jsonb NOT NULL
);
INSERT INTO ceiling.app_state (state) VALUES ('{}');
INSERT INTO ceiling.heads
SELECT 'user' || c, 's' || c, 1, 0, c, repeat('r', 372) FROM generate_series(0, 199) AS c;
INSERT INTO ceiling.events
SELECT 'user' || c, 's' || c, 1, repeat('e', 188) FROM generate_series(0, 199) AS c;
