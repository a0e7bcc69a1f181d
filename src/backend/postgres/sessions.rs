//! The PostgreSQL store, for teams that already run PostgreSQL.
//!
//! The fold happens here in Rust; one statement checks the head's version and writes the turn
//! (head, events, shared state) in one transaction. See `docs/stores.md` for the tables.

mod append;
mod codec;
mod leases;
mod removal;
mod sql;

use std::future::Future;
use std::num::NonZeroUsize;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Client, Hook, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use lru::LruCache;
use parking_lot::Mutex;
use tokio_postgres::types::ToSql;

use self::codec::{bigint, corrupt, decode_events, decode_head, decode_state, StoredHead};
use self::sql::Sql;
use super::errors::{self, connection_lost, pg_error, pool_error, unavailable};
use super::options::PostgresOptions;
use super::tls::{SslMode, Tls};
use super::{options, schema, tls};
use crate::key::SessionKey;
use crate::state::{Event, Seq, StateMap};
use crate::store::{
    check_page, GcPolicy, GcReport, Lease, Leases, LoadedSession, Page, PageRequest, SessionMeta,
    Store, StoreError,
};

/// How many sessions `gc` removes per transaction, so that none holds an unbounded batch.
const BATCH: i64 = 500;
/// Stores sessions in PostgreSQL, shared by every process that connects to the same schema.
///
/// An append is one statement — one round trip and one transaction — that compare-and-sets the
/// head's version, inserts the events and merges the shared state, so concurrent writers from
/// several processes never lose an update and a connection lost mid-way leaves nothing behind.
/// Connections come from a pool that replaces closed ones by itself; a server that is down or
/// slow answers [`StoreError::Unavailable`] within the configured timeouts. Cloning is cheap and
/// shares the pool.
#[derive(Clone)]
pub struct PostgresStore {
    /// Shared by clones; hands out connections with their prepared statements.
    pool: Pool,
    /// The statements, with the schema filled in.
    sql: Arc<Sql>,
    /// Bound on one call as a whole: waiting for a connection plus the statements.
    deadline: Duration,
    /// The TLS mode in effect, to explain a refused connection.
    ssl_mode: SslMode,
    /// The schema the tables live in (a checked identifier), for what lives beside the
    /// sessions (the channel pairings).
    schema: Arc<str>,
    /// Heads this process wrote or read last, so that an append based on one needs no read
    /// first (one round trip instead of two). Only a shortcut: the statement still checks the
    /// version and epoch, and a stale entry ends in `Conflict`, never in a wrong write.
    heads: Arc<Mutex<LruCache<SessionKey, StoredHead>>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("pool", &self.pool.status())
            .field("deadline", &self.deadline)
            .field("ssl_mode", &self.ssl_mode)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// Asks each new connection for generic plans of its prepared statements (see
/// [`options::wants_generic_plans`]). A server that refuses (PostgreSQL 11 or older, a pooler)
/// leaves the store working as before, only with more server CPU per append.
fn ask_for_generic_plans() -> Hook {
    Hook::async_fn(|client, _| {
        Box::pin(async move {
            if let Err(e) = client
                .batch_execute("SET plan_cache_mode = force_generic_plan")
                .await
            {
                tracing::warn!(error = %e, "postgres: generic plans not set; appends cost the server more CPU");
            }
            Ok(())
        })
    })
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`, or `postgresql://`),
    /// creating or migrating the store's tables. The URL may carry `schema=NAME`,
    /// `pool_size=N`, `head_cache=N`, `sslmode=MODE` and `sslrootcert=PATH` (see
    /// [`SslMode`]), which override `options`.
    ///
    /// Fails with [`StoreError::Unavailable`] if no connection is made within the connect
    /// timeout (a refused TLS handshake says why), [`StoreError::NewerLayout`] if a newer
    /// turnstile migrated the schema, [`StoreError::InvalidRequest`] for a bad URL or option
    /// (naming it), and [`StoreError::Io`] for an `sslrootcert` file that cannot be read.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let (url, options) = options::split_url(url, options)?;
        options.check()?;
        let mut config = tokio_postgres::Config::from_str(&url)
            .map_err(|e| StoreError::InvalidRequest(format!("postgres url: {e}")))?;
        // A URL's `sslmode` was taken off by `split_url`; a key=value string keeps its own.
        let mode = options.ssl_mode.or_else(|| SslMode::chosen_in(&config));
        let tls = Tls::configure(mode, &options.root_cert).await?;
        config.ssl_mode(tls.driver_mode(config.get_hosts()));
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("turnstile");
        }
        let generic_plans = options::wants_generic_plans(config.get_options());
        let remote = !config.get_hosts().iter().all(tls::is_local);
        let manager = Manager::from_config(
            config,
            tls.connector,
            ManagerConfig {
                // A connection the server closed is noticed by the driver and replaced; no extra
                // round trip per checkout.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let mut pool = Pool::builder(manager);
        if generic_plans {
            pool = pool.post_create(ask_for_generic_plans());
        }
        let pool = pool
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.response_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::InvalidRequest(format!("postgres pool: {e}")))?;
        let store = Self {
            pool,
            sql: Arc::new(Sql::new(&options.schema)),
            deadline: options.connect_timeout + options.response_timeout,
            ssl_mode: tls.mode,
            schema: Arc::from(options.schema.as_str()),
            heads: Arc::new(Mutex::new(crate::store::heads_cache(
                NonZeroUsize::new(options.head_cache).expect("checked: at least 1"),
            ))),
        };
        let schema = options.schema.clone();
        store
            .run(|mut client| async move { schema::migrate(&mut client, &schema).await })
            .await?;
        if tls.mode == SslMode::Prefer && remote {
            store.warn_if_plaintext().await;
        }
        Ok(store)
    }

    /// The schema the store's tables live in: a plain identifier (the options refuse any other),
    /// so a family of your own may name its tables `<schema>.<table>` in its statements.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs `work` on a pooled connection within the store's deadline.
    async fn run<T, F, Fut>(&self, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let exchange = async {
            let client = self
                .pool
                .get()
                .await
                .map_err(|e| pool_error(e, self.ssl_mode))?;
            work(client).await
        };
        tokio::time::timeout(self.deadline, exchange)
            .await
            .unwrap_or_else(|_| Err(unavailable(format!("no answer within {:?}", self.deadline))))
    }

    /// Runs one statement (prepared once per connection) on a pooled connection. The outer
    /// error is the pool's or the deadline's, the inner one the driver's.
    async fn attempt(
        &self,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>, StoreError> {
        self.run(|client| async move {
            Ok(match client.prepare_cached(statement).await {
                Ok(prepared) => client.query(&prepared, params).await,
                Err(e) => Err(e),
            })
        })
        .await
    }

    /// Runs one statement on a pooled connection, within the store's deadline, and returns its
    /// rows: for a family of your own kept in the store's database (see [`super::kit`]). The
    /// statement is prepared once per connection; pass every value as a parameter. Errors are
    /// mapped as the store's own (`about` names what the statement was about in them): the
    /// server or the pool unreachable is `Unavailable`. A write is never run twice.
    pub async fn query(
        &self,
        about: &str,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        self.attempt(statement, params)
            .await?
            .map_err(|e| pg_error(about, e))
    }

    /// Runs one read-only statement (or one that may safely run twice), like
    /// [`PostgresStore::query`]. One that met a lost connection (a pooled connection the server
    /// dropped while it sat idle, noticed only on use) runs once more on another: a read changes
    /// nothing, so running it again is safe. Writes are never retried here.
    pub async fn read(
        &self,
        about: &str,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        match self.attempt(statement, params).await? {
            Err(e) if connection_lost(&e) => self.query(about, statement, params).await,
            rows => rows.map_err(|e| pg_error(about, e)),
        }
    }

    /// The stored head of `key`, if any.
    async fn head(&self, key: &SessionKey) -> Result<Option<StoredHead>, StoreError> {
        let rows = self
            .read(
                &key.to_string(),
                &self.sql.head,
                &[&key.user_id(), &key.session_id()],
            )
            .await?;
        rows.first()
            .map(|row| decode_head(key, row.get(0), row.get(1), row.get(2)))
            .transpose()
    }

    /// Remembers (or, with `None`, forgets) the stored head of `key`.
    fn remember(&self, key: &SessionKey, head: Option<StoredHead>) {
        let mut heads = self.heads.lock();
        match head {
            Some(head) => {
                heads.put(key.clone(), head);
            }
            None => {
                heads.pop(key);
            }
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.read("a readiness probe", "SELECT 1", &[])
            .await
            .map(drop)
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        let window = bigint(window as u64);
        let rows = self
            .read(
                &key.to_string(),
                &self.sql.load,
                &[&key.user_id(), &key.session_id(), &window],
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| corrupt(key, "the load statement returned no row"))?;
        let head = match (row.get(0), row.get(1), row.get::<_, Option<&str>>(2)) {
            (Some(version), Some(epoch), Some(record)) => {
                Some(decode_head(key, version, epoch, record)?)
            }
            _ => None,
        };
        self.remember(key, head.clone());
        let record = head.map(|h| h.record);
        let events = decode_events(key, &row.get::<_, Vec<String>>(3))?;
        let next_seq = record.as_ref().map_or(1, |r| r.next_seq);
        let expected =
            usize::try_from(next_seq.saturating_sub(1).min(window as u64)).unwrap_or(usize::MAX);
        let dense = events.windows(2).all(|w| w[1].seq == w[0].seq + 1);
        let ends = events.last().is_none_or(|e| e.seq + 1 == next_seq);
        if !dense || !ends || events.len() != expected {
            return Err(corrupt(
                key,
                "the log's newest events do not match the head",
            ));
        }
        Ok(LoadedSession {
            record,
            events,
            user_state: if key.is_anonymous() {
                StateMap::new()
            } else {
                decode_state(key, row.get(4))?
            },
            app_state: decode_state(key, row.get(5))?,
        })
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        self.write(key, base_version, events, None).await
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows = self
            .read(
                &key.to_string(),
                &self.sql.read_events,
                &[
                    &key.user_id(),
                    &key.session_id(),
                    &bigint(from),
                    &bigint(limit as u64),
                ],
            )
            .await?;
        let bodies: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        decode_events(key, &bodies)
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        self.remember(key, None);
        let removed = self
            .remove(
                vec![key.user_id().to_owned()],
                vec![key.session_id().to_owned()],
                vec![None],
            )
            .await?;
        Ok(!removed.is_empty())
    }

    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        check_page(page)?;
        // Session ids are never empty, so "after the empty string" is "from the start".
        let after = page.cursor.as_deref().unwrap_or("");
        let limit = bigint(page.limit as u64 + 1);
        let about = format!("user {user_id}");
        let rows = self
            .read(&about, &self.sql.list, &[&user_id, &after, &limit])
            .await?;
        let more = rows.len() > page.limit;
        let mut sessions = Vec::with_capacity(page.limit);
        for row in rows.iter().take(page.limit) {
            let session: &str = row.get(0);
            let key = if user_id.is_empty() {
                SessionKey::anonymous(session)
            } else {
                SessionKey::new(user_id, session)
            }
            .map_err(|e| StoreError::Corrupt {
                key: about.clone(),
                detail: format!("postgres: stored session id {session:?}: {e}"),
            })?;
            let head = decode_head(&key, row.get(1), row.get(2), row.get(3))?;
            sessions.push(SessionMeta::of(&head.record));
        }
        let next_cursor = more
            .then(|| sessions.last().map(|m| m.key.session_id().to_owned()))
            .flatten();
        Ok(Page {
            sessions,
            next_cursor,
        })
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        self.remove_user(user_id).await
    }

    fn leases(&self) -> Option<Arc<dyn Leases>> {
        Some(Arc::new(self.clone()))
    }

    async fn append_fenced(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: &Lease,
    ) -> Result<u64, StoreError> {
        self.write(key, base_version, events, Some(lease)).await
    }

    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        self.collect(policy, now_ms).await
    }
}
