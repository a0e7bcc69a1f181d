//! The statements the store runs, each written once with the schema filled in.
//!
//! Every id, text and number travels as a bound parameter; only the schema name (a checked
//! identifier) is part of the text. An append is one statement — one round trip and, as a
//! statement outside an explicit transaction, one transaction: the head's compare-and-set, the
//! events, and the shared-state merges either all commit or none does.

/// Parameters of both append statements:
/// `$1` user, `$2` session, `$3` base version, `$4` new version, `$5` updated_ms, `$6` record,
/// `$7` epoch, `$8` seqs, `$9` event bodies, `$10` user keys set (JSON object), `$11` user keys
/// removed, `$12` whether user state changes, `$13`–`$15` the same for app state, `$16` the
/// lease token and `$17` the lease epoch of a fenced write (both null for an unfenced one).
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

/// The `fenced` CTE of a writer without a lease: nothing to check, so the leases table is not
/// read at all (the statement keeps all seventeen parameters, so both kinds bind alike).
const PLAIN: &str = "fenced AS (SELECT $16::text IS NULL AND $17::bigint IS NULL AS ok)";

/// The `lease` and `fenced` CTEs of a lease holder's write. It holds its lease row (FOR SHARE)
/// until it commits, so no grant can interleave: an acquire that committed first makes the row
/// fail the re-checked condition, and one that comes later waits for this write.
fn fencing(s: &str) -> String {
    format!(
        "lease AS (
            SELECT 1 FROM {s}.leases
            WHERE user_id = $1 AND session_id = $2 AND token = $16::text
                AND epoch = $17::bigint AND expires_at > clock_timestamp()
            FOR SHARE
        ), fenced AS (
            SELECT EXISTS (SELECT 1 FROM lease) AS ok
        )"
    )
}

/// The two appends of one kind of writer (see [`append_tail`] for their parameters).
#[derive(Debug)]
pub(super) struct Appends {
    /// Append to an existing session: `UPDATE … WHERE version = $3 AND epoch = $7`.
    pub existing: String,
    /// Create a session: `INSERT … ON CONFLICT DO NOTHING` (base version 0).
    pub new: String,
}

impl Appends {
    /// The appends of schema `s` whose writer is checked by the CTEs `fencing`, which end in
    /// one named `fenced` with a boolean column `ok`.
    fn new(s: &str, fencing: &str) -> Self {
        let tail = append_tail(s);
        Self {
            existing: format!(
                "WITH {fencing}, head AS (
                    UPDATE {s}.heads SET version = $4, updated_ms = $5, record = $6,
                        fence = greatest(fence, coalesce($17::bigint, 0))
                    WHERE user_id = $1 AND session_id = $2 AND version = $3 AND epoch = $7
                        AND (SELECT ok FROM fenced)
                        AND ($17::bigint IS NULL OR fence <= $17::bigint)
                    RETURNING 1
                ), {tail}"
            ),
            new: format!(
                "WITH {fencing}, head AS (
                    INSERT INTO {s}.heads
                        (user_id, session_id, version, epoch, updated_ms, record, fence)
                    SELECT $1, $2, $4, $7, $5, $6, coalesce($17::bigint, 0)
                    WHERE $3::bigint = 0 AND (SELECT ok FROM fenced)
                    ON CONFLICT DO NOTHING
                    RETURNING 1
                ), {tail}"
            ),
        }
    }
}

/// The statements of one schema.
#[derive(Debug)]
pub(super) struct Sql {
    /// The appends of a writer without a lease (`$16` and `$17` null).
    pub plain: Appends,
    /// The appends of a lease holder.
    pub fenced: Appends,
    /// `$1` user, `$2` session, `$3` token, `$4` address, `$5` instance, `$6` ttl ms → the new
    /// epoch, or no row when another instance holds an unexpired lease.
    pub acquire: String,
    /// `$1` user, `$2` session → address, instance, epoch, token of the unexpired lease.
    pub holder: String,
    /// `$1` users, `$2` sessions, `$3` tokens, `$4` ttl ms → the keys renewed.
    pub renew: String,
    /// `$1` user, `$2` session, `$3` token: compare-and-delete.
    pub release: String,
    /// `$1` user, `$2` session → the newest epoch that wrote the head.
    pub fence_of: String,
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
        Self {
            plain: Appends::new(s, PLAIN),
            fenced: Appends::new(s, &fencing(s)),
            acquire: format!(
                "WITH next AS (
                    INSERT INTO {s}.lease_epochs AS c (user_id, session_id, epoch)
                    VALUES ($1, $2, 1)
                    ON CONFLICT (user_id, session_id) DO UPDATE SET epoch = c.epoch + 1
                    RETURNING epoch
                )
                INSERT INTO {s}.leases AS l
                    (user_id, session_id, token, address, instance, epoch, expires_at)
                SELECT $1, $2, $3, $4, $5, next.epoch,
                    clock_timestamp() + $6::bigint * interval '1 millisecond'
                FROM next
                ON CONFLICT (user_id, session_id) DO UPDATE
                SET token = EXCLUDED.token, address = EXCLUDED.address,
                    instance = EXCLUDED.instance, epoch = EXCLUDED.epoch,
                    expires_at = EXCLUDED.expires_at
                WHERE l.expires_at <= clock_timestamp() OR l.instance = EXCLUDED.instance
                RETURNING epoch"
            ),
            holder: format!(
                "SELECT address, instance, epoch, token FROM {s}.leases
                WHERE user_id = $1 AND session_id = $2 AND expires_at > clock_timestamp()"
            ),
            renew: format!(
                "UPDATE {s}.leases AS l
                SET expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond'
                FROM unnest($1::text[], $2::text[], $3::text[]) AS r(u, s, t)
                WHERE l.user_id = r.u AND l.session_id = r.s AND l.token = r.t
                    AND l.expires_at > clock_timestamp()
                RETURNING l.user_id, l.session_id"
            ),
            release: format!(
                "DELETE FROM {s}.leases WHERE user_id = $1 AND session_id = $2 AND token = $3
                RETURNING 1"
            ),
            fence_of: format!(
                "SELECT fence FROM {s}.heads WHERE user_id = $1 AND session_id = $2"
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
