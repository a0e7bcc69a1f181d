//! The statements the store runs, each written once with the schema filled in.
//!
//! Every id, text and number travels as a bound parameter; only the schema name (a checked
//! identifier) is part of the text. An append is one statement — one round trip and, as a
//! statement outside an explicit transaction, one transaction: the head's compare-and-set, the
//! events, and the shared-state merges either all commit or none does.

/// Parameters of both append statements:
/// `$1` user, `$2` session, `$3` base version, `$4` new version, `$5` updated_ms, `$6` record,
/// `$7` epoch, `$8` seqs, `$9` event bodies, `$10` user keys set (JSON object), `$11` user keys
/// removed, `$12` whether user state changes, `$13`–`$15` the same for app state.
/// Returns one row: 1 if the compare-and-set held (and everything was written), else 0.
fn append_tail(s: &str) -> String {
    format!(
        "ev AS (
            INSERT INTO {s}.events (user_id, session_id, seq, body)
            SELECT $1, $2, e.seq, e.body FROM unnest($8::bigint[], $9::text[]) AS e(seq, body)
            WHERE EXISTS (SELECT 1 FROM head)
        ), us AS (
            INSERT INTO {s}.user_state AS u (user_id, state)
            SELECT $1, $10::text::jsonb WHERE $12 AND EXISTS (SELECT 1 FROM head)
            ON CONFLICT (user_id) DO UPDATE SET state = (u.state || EXCLUDED.state) - $11::text[]
        ), ap AS (
            UPDATE {s}.app_state AS a SET state = (a.state || $13::text::jsonb) - $14::text[]
            WHERE $15 AND EXISTS (SELECT 1 FROM head)
        )
        SELECT count(*) FROM head"
    )
}

/// The statements of one schema.
#[derive(Debug)]
pub(super) struct Sql {
    /// Append to an existing session: `UPDATE … WHERE version = $3 AND epoch = $7`.
    pub append_existing: String,
    /// Create a session: `INSERT … ON CONFLICT DO NOTHING` (base version 0).
    pub append_new: String,
    /// `$1` user, `$2` session → version, epoch, record.
    pub head: String,
    /// `$1` user, `$2` session, `$3` window → the head (or nulls), the newest `$3` event bodies
    /// oldest first, user state, app state: one statement, so one consistent snapshot.
    pub load: String,
    /// `$1` user, `$2` session, `$3` from seq, `$4` limit → bodies.
    pub read_events: String,
    /// `$1` user, `$2` after this session id, `$3` limit → session_id, version, epoch, record.
    pub list: String,
    /// `$1` users, `$2` sessions, `$3` updated_ms (each an array; a null updated_ms deletes
    /// whatever the version) → the heads removed.
    pub delete_heads: String,
    /// `$1` users, `$2` sessions → removes their events.
    pub delete_events: String,
    /// `$1` user → number of sessions removed.
    pub delete_user_heads: String,
    /// `$1` user.
    pub delete_user_rest: String,
    /// `$1` cutoff ms, `$2` limit → user, session, updated_ms of sessions older than the cutoff.
    pub gc_old: String,
    /// Number of sessions.
    pub count: String,
    /// `$1` limit → the least recently updated sessions.
    pub gc_oldest: String,
}

impl Sql {
    /// The statements for `s`, a checked schema name.
    pub(super) fn new(s: &str) -> Self {
        let tail = append_tail(s);
        Self {
            append_existing: format!(
                "WITH head AS (
                    UPDATE {s}.heads SET version = $4, updated_ms = $5, record = $6
                    WHERE user_id = $1 AND session_id = $2 AND version = $3 AND epoch = $7
                    RETURNING 1
                ), {tail}"
            ),
            append_new: format!(
                "WITH head AS (
                    INSERT INTO {s}.heads (user_id, session_id, version, epoch, updated_ms, record)
                    SELECT $1, $2, $4, $7, $5, $6 WHERE $3::bigint = 0
                    ON CONFLICT DO NOTHING
                    RETURNING 1
                ), {tail}"
            ),
            head: format!(
                "SELECT version, epoch, record FROM {s}.heads WHERE user_id = $1 AND session_id = $2"
            ),
            load: format!(
                "SELECT h.version, h.epoch, h.record,
                    ARRAY(SELECT t.body FROM (
                        SELECT seq, body FROM {s}.events
                        WHERE user_id = $1 AND session_id = $2 ORDER BY seq DESC LIMIT $3
                    ) AS t ORDER BY t.seq),
                    (SELECT state::text FROM {s}.user_state WHERE user_id = $1),
                    (SELECT state::text FROM {s}.app_state)
                FROM (VALUES (1)) AS one(x)
                LEFT JOIN {s}.heads AS h ON h.user_id = $1 AND h.session_id = $2"
            ),
            read_events: format!(
                "SELECT body FROM {s}.events
                WHERE user_id = $1 AND session_id = $2 AND seq >= $3 ORDER BY seq LIMIT $4"
            ),
            list: format!(
                "SELECT session_id, version, epoch, record FROM {s}.heads
                WHERE user_id = $1 AND session_id > $2 ORDER BY session_id LIMIT $3"
            ),
            delete_heads: format!(
                "DELETE FROM {s}.heads AS h
                USING unnest($1::text[], $2::text[], $3::bigint[]) AS d(u, s, t)
                WHERE h.user_id = d.u AND h.session_id = d.s
                    AND (d.t IS NULL OR h.updated_ms = d.t)
                RETURNING h.user_id, h.session_id"
            ),
            delete_events: format!(
                "DELETE FROM {s}.events AS e USING unnest($1::text[], $2::text[]) AS d(u, s)
                WHERE e.user_id = d.u AND e.session_id = d.s"
            ),
            delete_user_heads: format!("DELETE FROM {s}.heads WHERE user_id = $1"),
            delete_user_rest: format!(
                "WITH e AS (DELETE FROM {s}.events WHERE user_id = $1)
                DELETE FROM {s}.user_state WHERE user_id = $1"
            ),
            gc_old: format!(
                "SELECT user_id, session_id, updated_ms FROM {s}.heads
                WHERE updated_ms < $1 ORDER BY updated_ms, user_id, session_id LIMIT $2"
            ),
            count: format!("SELECT count(*) FROM {s}.heads"),
            gc_oldest: format!(
                "SELECT user_id, session_id, updated_ms FROM {s}.heads
                ORDER BY updated_ms, user_id, session_id LIMIT $1"
            ),
        }
    }
}
