//! How a PostgreSQL store connects: the pool, the timeouts, TLS and the schema its tables live
//! in. Pure: parsing and checking only.

use std::path::PathBuf;
use std::time::Duration;

use super::tls::{RootCert, SslMode};
use crate::store::StoreError;

/// How a [`PostgresStore`](super::PostgresStore) connects and where its tables live.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// The PostgreSQL schema (namespace) holding the store's tables, so that deployments (or
    /// tests) sharing a database stay apart.
    pub(super) schema: String,
    /// Connections in the pool: about the number of appends that should commit together.
    pub(super) pool_size: usize,
    /// Bound on opening one connection.
    pub(super) connect_timeout: Duration,
    /// Bound on one call as a whole: waiting for a connection plus the statements.
    pub(super) response_timeout: Duration,
    /// libpq's `sslmode`; `None` takes the default (`prefer`, or `verify-full` with
    /// `sslrootcert=system`), decided in `tls.rs` with the roots.
    pub(super) ssl_mode: Option<SslMode>,
    /// libpq's `sslrootcert`: the roots that vouch for the server's certificate.
    pub(super) root_cert: RootCert,
    /// Sessions whose head the store keeps between appends.
    pub(super) head_cache: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: Self::DEFAULT_SCHEMA.to_owned(),
            pool_size: Self::DEFAULT_POOL_SIZE,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            response_timeout: Self::DEFAULT_RESPONSE_TIMEOUT,
            ssl_mode: None,
            root_cert: RootCert::default(),
            head_cache: Self::DEFAULT_HEAD_CACHE,
        }
    }
}

/// Longest schema name PostgreSQL keeps whole (`NAMEDATALEN - 1`).
const MAX_SCHEMA_BYTES: usize = 63;

/// Most heads kept: far past what one process holds live, low enough that a typo is refused.
const MAX_HEAD_CACHE: usize = 100_000_000;

impl PostgresOptions {
    /// The default schema.
    pub const DEFAULT_SCHEMA: &'static str = "turnstile";
    /// Default pool size: with `synchronous_commit = on` each commit waits for a WAL flush, and
    /// commits that wait together share one flush, so throughput grows with the appends in
    /// flight; 32 keeps a busy runtime's turns committing together while staying well under
    /// PostgreSQL's default `max_connections` of 100.
    pub const DEFAULT_POOL_SIZE: usize = 32;
    /// Default bound on opening a connection: long enough for a distant server, short enough
    /// that a caller learns quickly that PostgreSQL is down.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
    /// Default bound on one call; a turn's append is one statement.
    pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default number of session heads kept between appends: as many as a runtime keeps live
    /// by default ([`crate::config::DEFAULT_CAPACITY`]; a test in `config` keeps the two equal). An append whose head was dropped reads
    /// it back first, one more statement.
    pub const DEFAULT_HEAD_CACHE: usize = 100_000;

    /// Keeps the tables in `schema` (default `turnstile`): a lowercase ASCII letter or `_`, then
    /// up to 62 of `a-z 0-9 _`. It is created on connect if missing.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Keeps at most `size` connections open (default [`Self::DEFAULT_POOL_SIZE`]).
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// Keeps the heads of up to `sessions` sessions between their appends (default
    /// [`Self::DEFAULT_HEAD_CACHE`]); set it to at least the runtime's capacity when that is
    /// larger. Each costs about the size of the session's record and key. 1 ..= 100,000,000.
    /// URL: `head_cache=N`.
    pub fn with_head_cache(mut self, sessions: usize) -> Self {
        self.head_cache = sessions;
        self
    }

    /// Bounds each connection attempt (default [`Self::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Bounds each call (default [`Self::DEFAULT_RESPONSE_TIMEOUT`]).
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Uses TLS as `mode` says (default [`SslMode::Prefer`], as libpq: TLS when the server
    /// offers it, its certificate unchecked). The URL's `sslmode` overrides it.
    pub fn with_ssl_mode(mut self, mode: SslMode) -> Self {
        self.ssl_mode = Some(mode);
        self
    }

    /// Trusts the certificate authorities in the PEM file at `path` (libpq's `sslrootcert`)
    /// instead of the built-in public roots; `system` (exactly) names the built-in roots and
    /// makes `verify-full` the default mode. The URL's `sslrootcert` overrides it.
    pub fn with_ssl_root_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.root_cert = RootCert::parse(path);
        self
    }

    /// Checks the schema name, the pool size and the head cache.
    pub(super) fn check(&self) -> Result<(), StoreError> {
        let bytes = self.schema.as_bytes();
        let ok = bytes
            .first()
            .is_some_and(|b| b.is_ascii_lowercase() || *b == b'_')
            && bytes.len() <= MAX_SCHEMA_BYTES
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
        if !ok {
            return Err(StoreError::InvalidRequest(format!(
                "postgres schema {:?} must be a-z or _, then up to 62 of a-z 0-9 _",
                self.schema
            )));
        }
        if self.pool_size == 0 {
            return Err(StoreError::InvalidRequest(
                "postgres pool_size must be at least 1".into(),
            ));
        }
        if !(1..=MAX_HEAD_CACHE).contains(&self.head_cache) {
            return Err(StoreError::InvalidRequest(format!(
                "postgres head_cache={} is outside 1..={MAX_HEAD_CACHE}; it is the number of \
                 sessions whose head the store keeps between appends",
                self.head_cache
            )));
        }
        Ok(())
    }
}

/// libpq's client-certificate parameters, which this store does not take (yet).
const CLIENT_CERT_PARAMETERS: &[&str] = &["sslcert", "sslkey", "sslpassword"];

/// Splits the query parameters this store handles itself (`schema`, `pool_size`,
/// `head_cache`, `sslmode`, `sslrootcert`) off a `postgres://` URL, applying them to
/// `options`, and returns the URL the driver understands.
pub(super) fn split_url(
    url: &str,
    mut options: PostgresOptions,
) -> Result<(String, PostgresOptions), StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), options));
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let Some((name, raw)) = pair.split_once('=') else {
            kept.push(pair);
            continue;
        };
        let value = || {
            percent_encoding::percent_decode_str(raw)
                .decode_utf8()
                .map(|v| v.into_owned())
                .map_err(|_| {
                    StoreError::InvalidRequest(format!(
                        "postgres {name}: {raw:?} is not UTF-8 once percent-decoded"
                    ))
                })
        };
        match name {
            "schema" => options.schema = value()?,
            "pool_size" | "head_cache" => {
                let value = value()?;
                let number = value.parse().map_err(|_| {
                    StoreError::InvalidRequest(format!("postgres {name} {value:?} is not a number"))
                })?;
                if name == "pool_size" {
                    options.pool_size = number;
                } else {
                    options.head_cache = number;
                }
            }
            "sslmode" => options.ssl_mode = Some(value()?.parse()?),
            "sslrootcert" => {
                let value = value()?;
                if value.is_empty() {
                    return Err(StoreError::InvalidRequest(
                        "postgres sslrootcert is empty: name a PEM file, or system".into(),
                    ));
                }
                options.root_cert = RootCert::parse(value);
            }
            _ if CLIENT_CERT_PARAMETERS.contains(&name) => {
                return Err(StoreError::InvalidRequest(format!(
                    "postgres {name}: client certificates are not supported; authenticate \
                     with a password (over sslmode=verify-full) instead"
                )))
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, options))
}

/// Whether the store's connections ask for generic plans of their prepared statements: yes,
/// unless the URL's own `options` choose a plan cache mode.
///
/// The append is one statement of seventeen parameters over several CTEs. With the server's
/// default (`auto`) each execution plans it afresh for its parameter values, which cost the
/// server more CPU than the write itself; every statement of the store looks rows up by key,
/// where the generic plan is the custom one. Measured in `docs/BENCHMARKS.md` (PostgreSQL store).
/// It is a `SET` after connecting, not a startup option, because poolers such as PgBouncer
/// refuse startup options they do not know.
pub(super) fn wants_generic_plans(url_options: Option<&str>) -> bool {
    !url_options.is_some_and(|own| own.contains("plan_cache_mode"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turnstile_parameters_are_taken_and_the_drivers_kept() {
        let (url, options) = split_url(
            "postgres://u@h/db?schema=s1&application_name=x&pool_size=7",
            PostgresOptions::default(),
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h/db?application_name=x");
        assert_eq!((options.schema.as_str(), options.pool_size), ("s1", 7));
        let (url, _) = split_url("postgres://h/db?schema=s", PostgresOptions::default()).unwrap();
        assert_eq!(url, "postgres://h/db");
        assert!(split_url("postgres://h/db?pool_size=x", PostgresOptions::default()).is_err());
        let (_, options) = split_url(
            "postgres://h/db?head_cache=250000",
            PostgresOptions::default(),
        )
        .expect("valid");
        assert_eq!(options.head_cache, 250_000);
        assert_eq!(
            PostgresOptions::default().head_cache,
            PostgresOptions::DEFAULT_HEAD_CACHE
        );
        for bad in ["head_cache=0", "head_cache=100000001"] {
            let (_, options) = split_url(
                &format!("postgres://h/db?{bad}"),
                PostgresOptions::default(),
            )
            .expect("a number");
            let err = options.check().expect_err(bad).to_string();
            assert!(err.contains("head_cache="), "{bad}: {err}");
        }
    }

    #[test]
    fn tls_parameters_are_taken_decoded_and_checked() {
        let (url, options) = split_url(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20x.pem&connect_timeout=3",
            PostgresOptions::default(),
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h/db?connect_timeout=3");
        assert_eq!(options.ssl_mode, Some(SslMode::VerifyFull));
        assert_eq!(options.root_cert, RootCert::File("/etc/ca x.pem".into()));
        let (_, options) = split_url(
            "postgres://h/db?sslrootcert=system",
            PostgresOptions::default(),
        )
        .unwrap();
        assert_eq!(
            (options.ssl_mode, options.root_cert),
            (None, RootCert::System)
        );
        for (bad, names) in [
            ("sslmode=verify_full", "sslmode"),
            ("sslmode=", "sslmode"),
            ("sslrootcert=", "sslrootcert"),
            ("sslcert=/c.pem", "sslcert"),
            ("sslkey=/k.pem", "sslkey"),
            ("sslrootcert=%FF", "sslrootcert"),
        ] {
            let err = split_url(
                &format!("postgres://h/db?{bad}"),
                PostgresOptions::default(),
            )
            .unwrap_err();
            assert!(
                matches!(err, StoreError::InvalidRequest(ref m) if m.contains(names)),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn schema_names_that_could_leave_an_identifier_are_refused() {
        for bad in [
            "",
            "A",
            "1a",
            "a-b",
            "a\"b",
            "a;drop",
            "a b",
            &"x".repeat(64),
        ] {
            let options = PostgresOptions::default().with_schema(bad);
            assert!(options.check().is_err(), "{bad}");
        }
        assert!(PostgresOptions::default()
            .with_schema("t_1")
            .check()
            .is_ok());
        assert!(PostgresOptions::default()
            .with_pool_size(0)
            .check()
            .is_err());
    }

    #[test]
    fn connections_plan_statements_generically_unless_the_url_says_otherwise() {
        assert!(wants_generic_plans(None));
        assert!(wants_generic_plans(Some("-c work_mem=8MB")));
        assert!(!wants_generic_plans(Some("-c plan_cache_mode=auto")));
    }
}
