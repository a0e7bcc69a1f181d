//! How a Redis store connects, names its keys and how many replicas confirm each append.
//! Pure: settings, URL parameters and their checks only.

use std::time::Duration;

use crate::store::StoreError;

/// How a [`RedisStore`](super::RedisStore) connects and names its keys.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Starts every key, so that deployments (or tests) sharing a Redis stay apart.
    pub(super) prefix: String,
    /// Expiry of a session's head and log after its last write; `None` keeps them forever.
    pub(super) session_ttl: Option<Duration>,
    /// Bound on one connection attempt.
    pub(super) connect_timeout: Duration,
    /// Bound on one command's answer.
    pub(super) response_timeout: Duration,
    /// Replicas that must confirm an append (`WAIT`) before it is acknowledged; 0 = none, the
    /// primary's word is enough (Redis replicates asynchronously).
    pub(super) replicas: u32,
    /// How long an append waits for those replicas before it answers `NotReplicated`.
    pub(super) replica_timeout: Duration,
    /// What an append short of replicas answers when its master has no replica at all.
    pub(super) replica_policy: ReplicaPolicy,
    /// Dedicated connections for appends that wait for replicas: at most this many such
    /// appends are in flight at once (each `WAIT` blocks its connection).
    pub(super) replica_connections: usize,
    /// Connections to a single server that the store's commands take in turn (a Cluster keeps
    /// its own connection per node and ignores this).
    pub(super) lanes: usize,
    /// Sessions whose head the store keeps between appends.
    pub(super) head_cache: usize,
    /// The older layout the operator confirms may be taken over (no build of it still runs).
    pub(super) upgrade_from: Option<u32>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "turnstile".to_owned(),
            session_ttl: None,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            response_timeout: Self::DEFAULT_RESPONSE_TIMEOUT,
            replicas: 0,
            replica_timeout: Self::DEFAULT_REPLICA_TIMEOUT,
            replica_policy: ReplicaPolicy::Strict,
            replica_connections: Self::DEFAULT_REPLICA_CONNECTIONS,
            lanes: Self::DEFAULT_LANES,
            head_cache: Self::DEFAULT_HEAD_CACHE,
            upgrade_from: None,
        }
    }
}

/// What an append confirmed by fewer replicas than `replicas=N` answers when its master has no
/// replica online at all — after a failover promoted the only replica, say, until the failed
/// node rejoins. URL: `replica_policy=strict|degrade`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReplicaPolicy {
    /// [`StoreError::NotReplicated`], as for any append short of replicas: the shard takes no
    /// acknowledged turn until a replica holds its writes again. The default.
    #[default]
    Strict,
    /// Acknowledged on the master alone, counted in `turnstile_redis_degraded_appends_total`
    /// and logged when the master loses its last replica (and when one is back): the shard
    /// goes on with the durability of `replicas=0` until a replica is online again. A master
    /// whose replicas are there but slow (stalled, catching up) still answers `NotReplicated`.
    Degrade,
}

/// Most replicas an append may wait for: far beyond any real deployment, low enough that a
/// typo (`replicas=100`) is refused instead of failing every append.
pub(super) const MAX_REPLICAS: u32 = 16;

/// Longest replica timeout: a turn is answered within seconds, never minutes.
const MAX_REPLICA_TIMEOUT: Duration = Duration::from_secs(60);

/// Most dedicated connections for replicated appends; the Redis default `maxclients` is
/// 10,000, shared by every process.
const MAX_REPLICA_CONNECTIONS: usize = 1_024;

/// Most lanes: past a few, more connections only split the batches that make a lane cheap.
const MAX_LANES: usize = 16;

/// Most heads kept: far past what one process holds live, low enough that a typo is refused
/// instead of reserving memory it never needs.
const MAX_HEAD_CACHE: usize = 100_000_000;

impl RedisOptions {
    /// Default bound on connecting: long enough for a distant server, short enough that a
    /// caller learns quickly that Redis is down.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
    /// Default bound on one command's answer; a turn's write is one command.
    pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
    /// Default wait for replicas: a replica on the same network confirms within a millisecond
    /// or two, so one second rides out a replica's short stalls (a fork, a busy moment) while a
    /// caller still learns quickly that one is gone.
    pub const DEFAULT_REPLICA_TIMEOUT: Duration = Duration::from_secs(1);
    /// Default number of dedicated connections for replicated appends: each holds one append
    /// for a round trip to the primary plus one to its replicas (about 0.2 ms on one host), so
    /// 32 carry well over 50,000 appends/s while staying far from Redis's client limit.
    pub const DEFAULT_REPLICA_CONNECTIONS: usize = 32;
    /// Default number of lanes to a single server. With one multiplexed connection, the
    /// server answers a batch of many sessions' commands and then waits while the client handles
    /// every answer; with two, one batch is served while the other's answers are handled.
    /// Measured: 0.42× → 0.52× of the `EVALSHA` ceiling on 2 cores; four were no better than
    /// two (`docs/BENCHMARKS.md`).
    pub const DEFAULT_LANES: usize = 2;
    /// Default number of session heads kept between appends: as many as a runtime keeps live
    /// by default ([`crate::config::DEFAULT_CAPACITY`]; a test in `config` keeps the two equal). An append whose session's head is kept
    /// is one script; one whose head was dropped first reads the head and the events past its
    /// checkpoint back, so the cache should hold every live session (`docs/BENCHMARKS.md`:
    /// with 5,000 live sessions and room for 4,096, every append read first).
    pub const DEFAULT_HEAD_CACHE: usize = 100_000;

    /// Keeps the heads of up to `sessions` sessions between their appends (default
    /// [`Self::DEFAULT_HEAD_CACHE`]); set it to at least the runtime's capacity when that is
    /// larger. Each costs about the size of the session's record and key. 1 ..= 100,000,000.
    /// URL: `head_cache=N`.
    pub fn with_head_cache(mut self, sessions: usize) -> Self {
        self.head_cache = sessions;
        self
    }

    /// Starts every key with `prefix` (default `turnstile`): ASCII letters, digits, `_ - . :`.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The key prefix (default `turnstile`); other data kept beside the sessions, such as the
    /// Redis pairing store's, goes under the same one.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Expires a session's head and log `ttl` after its last write (default: never).
    pub fn with_session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = Some(ttl);
        self
    }

    /// Bounds each connection attempt (default [`Self::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Bounds each command's answer (default [`Self::DEFAULT_RESPONSE_TIMEOUT`]).
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Acknowledges an append (plain or fenced) only once `replicas` replicas of the primary
    /// have confirmed it (`WAIT`), within [`Self::with_replica_timeout`]; fewer in time is
    /// [`StoreError::NotReplicated`], with the append kept on the primary. 0 (the default)
    /// waits for none. 1 ..= 16; on a Redis Cluster, the replicas of the session's master. URL:
    /// `replicas=N`.
    pub fn with_replicas(mut self, replicas: u32) -> Self {
        self.replicas = replicas;
        self
    }

    /// The number of replicas that must confirm each append (0: none).
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// What an append short of replicas answers when its master has none online (default
    /// [`ReplicaPolicy::Strict`]). Needs `replicas` ≥ 1. URL: `replica_policy=strict|degrade`.
    pub fn with_replica_policy(mut self, policy: ReplicaPolicy) -> Self {
        self.replica_policy = policy;
        self
    }

    /// How long an append waits for its replicas (default [`Self::DEFAULT_REPLICA_TIMEOUT`];
    /// 1 ms ..= 60 s). URL: `replica_timeout_ms=MS`.
    pub fn with_replica_timeout(mut self, timeout: Duration) -> Self {
        self.replica_timeout = timeout;
        self
    }

    /// Dedicated connections for appends that wait for replicas (default
    /// [`Self::DEFAULT_REPLICA_CONNECTIONS`]; 1 ..= 1,024): the most such appends in flight at
    /// once. URL: `replica_connections=N`.
    pub fn with_replica_connections(mut self, connections: usize) -> Self {
        self.replica_connections = connections;
        self
    }

    /// Spreads the store's commands to a single server over `lanes` connections (default
    /// [`Self::DEFAULT_LANES`], at most 16); each exchange takes the next. A session's commands
    /// are awaited one after another, so they keep their order. A Redis Cluster keeps one
    /// connection per node and ignores this. URL: `lanes=N`.
    pub fn with_lanes(mut self, lanes: usize) -> Self {
        self.lanes = lanes;
        self
    }

    /// Takes over a prefix of key layout `layout` (only 2 is accepted) by marking it with this
    /// build's layout on connect; its data is used as it is. Without it a layout-2 prefix is
    /// refused, nothing changed. Give it only once no process of a layout-2 build runs on the
    /// prefix: those do not keep the fence's mirror (`docs/stores.md`, "Layout version").
    /// URL: `upgrade_from=2`.
    pub fn with_upgrade_from(mut self, layout: u32) -> Self {
        self.upgrade_from = Some(layout);
        self
    }

    /// The wait for replicas in whole milliseconds, as `WAIT` takes it.
    pub(super) fn replica_timeout_ms(&self) -> u64 {
        u64::try_from(self.replica_timeout.as_millis()).unwrap_or(u64::MAX)
    }

    /// Checks the settings: replicas, lanes, head cache and the layout to take over.
    pub(super) fn check(&self) -> Result<(), StoreError> {
        let invalid = |detail: String| Err(StoreError::InvalidRequest(detail));
        if let Some(layout) = self
            .upgrade_from
            .filter(|&l| l != super::sessions::keys::UPGRADES_FROM)
        {
            return invalid(format!(
                "redis upgrade_from={layout}: this build (key layout {}) takes over layout {} \
                 only",
                super::sessions::keys::LAYOUT_VERSION,
                super::sessions::keys::UPGRADES_FROM
            ));
        }
        if self.replicas > MAX_REPLICAS {
            return invalid(format!(
                "redis replicas={} is more than {MAX_REPLICAS}; give the number of replicas \
                 that must confirm each append",
                self.replicas
            ));
        }
        // `WAIT n 0` would block forever: a turn must be answered.
        if self.replica_timeout < Duration::from_millis(1)
            || self.replica_timeout > MAX_REPLICA_TIMEOUT
        {
            return invalid(format!(
                "redis replica_timeout_ms={} is outside 1..={}; it bounds how long an append \
                 waits for its replicas",
                self.replica_timeout.as_millis(),
                MAX_REPLICA_TIMEOUT.as_millis()
            ));
        }
        if self.replica_policy == ReplicaPolicy::Degrade && self.replicas == 0 {
            return invalid(
                "redis replica_policy=degrade needs replicas=N (1 or more): it says what an \
                 append short of replicas answers"
                    .into(),
            );
        }
        if !(1..=MAX_REPLICA_CONNECTIONS).contains(&self.replica_connections) {
            return invalid(format!(
                "redis replica_connections={} is outside 1..={MAX_REPLICA_CONNECTIONS}",
                self.replica_connections
            ));
        }
        if !(1..=MAX_HEAD_CACHE).contains(&self.head_cache) {
            return invalid(format!(
                "redis head_cache={} is outside 1..={MAX_HEAD_CACHE}; it is the number of \
                 sessions whose head the store keeps between appends",
                self.head_cache
            ));
        }
        if !(1..=MAX_LANES).contains(&self.lanes) {
            return invalid(format!(
                "redis lanes={} is outside 1..={MAX_LANES}; it is the number of connections \
                 the store spreads its commands over",
                self.lanes
            ));
        }
        Ok(())
    }
}

/// Turnstile's own query parameters of a Redis URL.
const PARAMETERS: [&str; 7] = [
    "replicas",
    "replica_timeout_ms",
    "replica_policy",
    "replica_connections",
    "lanes",
    "head_cache",
    "upgrade_from",
];

/// Whether `url`'s query names the parameter `name`.
pub(super) fn has_parameter(url: &str, name: &str) -> bool {
    url.split_once('?').is_some_and(|(_, query)| {
        query
            .split('&')
            .any(|pair| pair.split_once('=').map_or(pair, |(n, _)| n) == name)
    })
}

/// Splits turnstile's own query parameters (`replicas`, `replica_timeout_ms`, `replica_policy`,
/// `replica_connections`, `lanes`, `head_cache`, `upgrade_from`) off a Redis URL, applying them to `options`,
/// and returns the URL the driver understands (its own parameters, such as `db` or
/// `protocol`, kept).
pub(super) fn split_url(
    url: &str,
    mut options: RedisOptions,
) -> Result<(String, RedisOptions), StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), options));
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !PARAMETERS.contains(&name) {
            kept.push(pair);
            continue;
        }
        if name == "replica_policy" {
            options.replica_policy = match value {
                "strict" => ReplicaPolicy::Strict,
                "degrade" => ReplicaPolicy::Degrade,
                _ => {
                    return Err(StoreError::InvalidRequest(format!(
                        "redis url: replica_policy={value:?} is not strict or degrade"
                    )))
                }
            };
            continue;
        }
        let number = value.parse::<u64>().map_err(|_| {
            StoreError::InvalidRequest(format!("redis url: {name}={value:?} is not a whole number"))
        })?;
        match name {
            "replicas" => options.replicas = u32::try_from(number).unwrap_or(u32::MAX),
            "replica_timeout_ms" => options.replica_timeout = Duration::from_millis(number),
            "lanes" => options.lanes = usize::try_from(number).unwrap_or(usize::MAX),
            "head_cache" => options.head_cache = usize::try_from(number).unwrap_or(usize::MAX),
            "upgrade_from" => {
                options.upgrade_from = Some(u32::try_from(number).unwrap_or(u32::MAX));
            }
            _ => options.replica_connections = usize::try_from(number).unwrap_or(usize::MAX),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Result<(String, RedisOptions), StoreError> {
        split_url(url, RedisOptions::default())
    }

    #[test]
    fn upgrade_from_is_taken_and_only_layout_2_is_accepted() {
        let (url, options) = split("redis://h:1/?upgrade_from=2&db=1").unwrap();
        assert_eq!(url, "redis://h:1/?db=1");
        assert_eq!(options.upgrade_from, Some(2));
        assert!(options.check().is_ok());
        assert_eq!(split("redis://h:1/").unwrap().1.upgrade_from, None);
        for layout in [1, 3] {
            let (_, options) = split(&format!("redis://h:1/?upgrade_from={layout}")).unwrap();
            match options.check() {
                Err(StoreError::InvalidRequest(message)) => {
                    assert!(
                        message.contains(&format!("upgrade_from={layout}")),
                        "{message}"
                    );
                }
                other => panic!("upgrade_from={layout} must be refused, got {other:?}"),
            }
        }
        assert!(split("redis://h:1/?upgrade_from=two").is_err());
    }

    #[test]
    fn replica_parameters_are_taken_and_the_drivers_kept() {
        let (url, options) = split(
            "redis://h:1/2?replicas=2&protocol=resp3&replica_timeout_ms=250&replica_connections=4",
        )
        .unwrap();
        assert_eq!(url, "redis://h:1/2?protocol=resp3");
        assert_eq!(options.replicas, 2);
        assert_eq!(options.replica_timeout, Duration::from_millis(250));
        assert_eq!(options.replica_connections, 4);
        assert!(options.check().is_ok());
        let (url, options) = split("redis://h:1/?replicas=1").unwrap();
        assert_eq!((url.as_str(), options.replicas), ("redis://h:1/", 1));
        let (url, options) = split("redis+unix:///tmp/r.sock?db=3").unwrap();
        assert_eq!(
            (url.as_str(), options.replicas),
            ("redis+unix:///tmp/r.sock?db=3", 0)
        );
        assert_eq!(split("redis://h:1").unwrap().0, "redis://h:1");
    }

    #[test]
    fn bad_replica_values_are_refused_naming_the_parameter() {
        for bad in [
            "redis://h:1/?replicas=x",
            "redis://h:1/?replicas=-1",
            "redis://h:1/?replicas",
            "redis://h:1/?replica_timeout_ms=1.5",
            "redis://h:1/?replica_connections=",
        ] {
            let err = split(bad).unwrap_err().to_string();
            let name = bad.split('?').nth(1).unwrap().split('=').next().unwrap();
            assert!(
                err.contains(name) && err.contains("whole number"),
                "{bad}: {err}"
            );
        }
        for (bad, says) in [
            ("redis://h:1/?replicas=17", "more than 16"),
            ("redis://h:1/?replicas=99999999999", "more than 16"),
            ("redis://h:1/?replica_timeout_ms=0", "outside 1..=60000"),
            ("redis://h:1/?replica_timeout_ms=60001", "outside 1..=60000"),
            ("redis://h:1/?replica_connections=0", "outside 1..=1024"),
        ] {
            let (_, options) = split(bad).unwrap();
            let err = options.check().unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn the_replica_policy_is_a_word_and_needs_replicas() {
        let (url, options) = split("redis://h:1/?replicas=1&replica_policy=degrade&db=2").unwrap();
        assert_eq!(url, "redis://h:1/?db=2", "taken off the driver's URL");
        assert_eq!(options.replica_policy, ReplicaPolicy::Degrade);
        assert!(options.check().is_ok());
        let (_, options) = split("redis://h:1/?replicas=1&replica_policy=strict").unwrap();
        assert_eq!(options.replica_policy, ReplicaPolicy::Strict);
        let err = split("redis://h:1/?replica_policy=lenient").unwrap_err();
        assert!(err
            .to_string()
            .contains("replica_policy=\"lenient\" is not strict or degrade"));
        let (_, options) = split("redis://h:1/?replica_policy=degrade").unwrap();
        let err = options.check().unwrap_err().to_string();
        assert!(
            err.contains("replica_policy=degrade needs replicas=N"),
            "{err}"
        );
    }

    #[test]
    fn the_defaults_wait_for_no_replica_and_pass_the_checks() {
        let options = RedisOptions::default();
        assert_eq!(options.replicas(), 0);
        assert_eq!(options.replica_timeout_ms(), 1_000);
        assert!(options.check().is_ok());
    }

    #[test]
    fn head_cache_is_taken_from_the_url_and_checked() {
        let (url, options) = split("redis://h:1/?head_cache=250000&db=2").expect("valid");
        assert_eq!(
            (url.as_str(), options.head_cache),
            ("redis://h:1/?db=2", 250_000)
        );
        assert_eq!(
            RedisOptions::default().head_cache,
            RedisOptions::DEFAULT_HEAD_CACHE
        );
        for bad in [
            "redis://h:1/?head_cache=0",
            "redis://h:1/?head_cache=100000001",
        ] {
            let (_, options) = split(bad).expect("a whole number");
            let err = options.check().expect_err(bad).to_string();
            assert!(err.contains("head_cache="), "{bad}: {err}");
        }
    }

    #[test]
    fn lanes_are_taken_from_the_url_and_checked() {
        let (url, options) = split("redis://h:1/?lanes=3&db=2").expect("valid");
        assert_eq!((url.as_str(), options.lanes), ("redis://h:1/?db=2", 3));
        assert_eq!(RedisOptions::default().lanes, RedisOptions::DEFAULT_LANES);
        for bad in ["redis://h:1/?lanes=0", "redis://h:1/?lanes=17"] {
            let (_, options) = split(bad).expect("a number");
            let err = options.check().expect_err(bad).to_string();
            assert!(err.contains("lanes="), "{bad}: {err}");
        }
        assert!(split("redis://h:1/?lanes=two").is_err());
        assert!(has_parameter("redis+cluster://h:1,h:2/?lanes=2", "lanes"));
        assert!(!has_parameter("redis://h:1/?replica_lanes=2", "lanes"));
    }
}
