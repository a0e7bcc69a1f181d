//! Property: the PostgreSQL store honours libpq's `sslmode` and `sslrootcert`. Against a private
//! server with TLS on (a certificate for `localhost` from a CA made here), `verify-full` with
//! that CA connects over TLS — the server sees every store connection as SSL — and keeps every
//! store promise; a certificate from another CA, or not naming the host, is refused with an
//! error saying so; `require` refuses a server without TLS; `disable` connects in plaintext.
#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use turnstile::backend::{PostgresOptions, SslMode};
use turnstile::store::conformance::{self, turn_events};
use turnstile::{PostgresStore, SessionKey, Store, StoreError};

use support::postgres::TestDatabase;
use support::postgres_server::{PostgresServer, TestCa};

/// How many of the server's connections from `application` there are, and how many use SSL.
async fn connections(admin: &tokio_postgres::Client, application: &str) -> (i64, i64) {
    let row = admin
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl) \
             FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.application_name = $1",
            &[&application],
        )
        .await
        .expect("read pg_stat_ssl");
    (row.get(0), row.get(1))
}

/// Connects with `url`, expecting a refusal; returns its message.
async fn refused(url: &str) -> String {
    match PostgresStore::connect(url, PostgresOptions::default()).await {
        Ok(_) => panic!("{url} must be refused"),
        Err(e @ StoreError::Unavailable { .. }) => e.to_string(),
        Err(other) => panic!("{url}: expected Unavailable, got {other:?}"),
    }
}

/// A store on `url` in a schema of its own: an empty store.
async fn fresh(url: &str) -> PostgresStore {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    PostgresStore::connect(url, PostgresOptions::default().with_schema(schema))
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// A store on `url` in a schema of its own; appends and loads one turn.
async fn round_trip(url: &str) -> PostgresStore {
    let store = fresh(url).await;
    let key = SessionKey::new("alice", "s").expect("key");
    let version = store
        .append(&key, 0, &turn_events(1, "over TLS?", None))
        .await
        .expect("append");
    let loaded = store.load(&key, 10).await.expect("load");
    assert_eq!(loaded.record.expect("head").version, version);
    assert_eq!(loaded.events[0].text(), Some("over TLS?"));
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_servers_ca_connects_over_tls_and_keeps_every_promise() {
    let ca = TestCa::new("turnstile test CA");
    let server = PostgresServer::start(Some(&ca.server_cert(&["localhost"]))).await;
    let root = ca.write(server.dir(), "ca.pem");
    // `hostaddr` keeps the connection on 127.0.0.1 while the certificate is checked for
    // `localhost`, the name in the URL.
    let url = Arc::new(server.url(
        "localhost",
        &format!(
            "hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}&application_name=full",
            root.display()
        ),
    ));
    conformance::run_all(|| {
        let url = url.clone();
        async move { Arc::new(fresh(&url).await) as Arc<dyn Store> }
    })
    .await;

    let _store = round_trip(&url).await;
    let (total, ssl) = connections(&server.admin().await, "full").await;
    assert!(total >= 1, "the store's connections are open");
    assert_eq!(ssl, total, "the server sees every store connection as SSL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_the_roots_do_not_vouch_for_is_refused_by_the_modes_that_check() {
    let ca = TestCa::new("turnstile test CA");
    let server = PostgresServer::start(Some(&ca.server_cert(&["localhost"]))).await;
    let right = ca.write(server.dir(), "ca.pem");
    let wrong = TestCa::new("another CA").write(server.dir(), "other-ca.pem");
    let at = |host: &str, query: String| server.url(host, &format!("hostaddr=127.0.0.1&{query}"));

    // Signed by a CA the roots do not hold.
    let message = refused(&at(
        "localhost",
        format!("sslmode=verify-full&sslrootcert={}", wrong.display()),
    ))
    .await;
    assert!(message.contains("certificate"), "{message}");
    assert!(message.contains("sslrootcert"), "{message}");
    // The public roots do not hold it either.
    refused(&at("localhost", "sslrootcert=system".into())).await;
    // With a root given, `require` checks the chain too, as libpq does.
    refused(&at(
        "localhost",
        format!("sslmode=require&sslrootcert={}", wrong.display()),
    ))
    .await;
    // The right CA, but the certificate does not name 127.0.0.1: verify-full refuses,
    // verify-ca (which checks no name) connects.
    let message = refused(&at(
        "127.0.0.1",
        format!("sslmode=verify-full&sslrootcert={}", right.display()),
    ))
    .await;
    assert!(message.contains("does not name the host"), "{message}");
    let _ca = round_trip(&at(
        "127.0.0.1",
        format!(
            "sslmode=verify-ca&sslrootcert={}&application_name=ca",
            right.display()
        ),
    ))
    .await;
    // `require` without roots encrypts without checking.
    let _require = round_trip(&at(
        "127.0.0.1",
        "sslmode=require&application_name=req".into(),
    ))
    .await;
    let admin = server.admin().await;
    for application in ["ca", "req"] {
        let (total, ssl) = connections(&admin, application).await;
        assert!(
            total >= 1 && ssl == total,
            "{application}: {ssl} of {total}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_refuses_a_server_without_tls_and_prefer_falls_back_to_plaintext() {
    let ca = TestCa::new("turnstile test CA");
    let server = PostgresServer::start(Some(&ca.server_cert(&["localhost"]))).await;
    let admin = server.admin().await;
    for statement in ["ALTER SYSTEM SET ssl = off", "SELECT pg_reload_conf()"] {
        admin.batch_execute(statement).await.expect("turn TLS off");
    }
    // The postmaster applies the reload on its own time; new connections show when it has.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ssl: String = server
            .admin()
            .await
            .query_one("SHOW ssl", &[])
            .await
            .expect("SHOW ssl")
            .get(0);
        if ssl == "off" {
            break;
        }
        assert!(Instant::now() < deadline, "the server kept TLS on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let message = refused(&server.url("127.0.0.1", "sslmode=require")).await;
    assert!(message.contains("sslmode=require"), "{message}");
    assert!(message.contains("without TLS"), "{message}");
    refused(&server.url("localhost", "hostaddr=127.0.0.1&sslmode=verify-full")).await;

    let _store = round_trip(&server.url("127.0.0.1", "sslmode=prefer&application_name=pref")).await;
    let (total, ssl) = connections(&admin, "pref").await;
    assert!(
        total >= 1 && ssl == 0,
        "plaintext: {ssl} of {total} use SSL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_connects_in_plaintext_and_the_default_encrypts_when_the_server_offers_it() {
    let database = TestDatabase::create().await;
    let with = |query: &str| {
        let joint = if database.url().contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{joint}{query}", database.url())
    };
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let admin = database.admin().await;

    let plain = format!("plain_{tag}");
    let _disabled = round_trip(&with(&format!("sslmode=disable&application_name={plain}"))).await;
    let (total, ssl) = connections(&admin, &plain).await;
    assert!(total >= 1 && ssl == 0, "disable: {ssl} of {total} use SSL");

    // No sslmode is libpq's `prefer`: TLS exactly when the server has it on.
    let server_ssl: String = admin
        .query_one("SHOW ssl", &[])
        .await
        .expect("SHOW ssl")
        .get(0);
    let default = format!("default_{tag}");
    let _default = round_trip(&with(&format!("application_name={default}"))).await;
    let (total, ssl) = connections(&admin, &default).await;
    let expected = if server_ssl == "on" { total } else { 0 };
    assert!(
        total >= 1 && ssl == expected,
        "prefer: {ssl} of {total} use SSL"
    );
}

#[tokio::test]
async fn bad_tls_parameters_are_refused_before_connecting_naming_the_parameter() {
    // Nothing listens on port 1: every refusal below comes before a connection is tried.
    let base = "postgres://postgres@127.0.0.1:1/db";
    for (query, names) in [
        ("sslmode=verify_full", "sslmode"),
        ("sslmode=allow", "sslmode"),
        ("sslrootcert=system&sslmode=require", "sslrootcert=system"),
        ("sslcert=/tmp/client.pem", "sslcert"),
    ] {
        let err = PostgresStore::connect(&format!("{base}?{query}"), PostgresOptions::default())
            .await
            .expect_err(query);
        assert!(
            matches!(err, StoreError::InvalidRequest(ref m) if m.contains(names)),
            "{query}: {err}"
        );
    }
    let missing = "/nonexistent/turnstile-ca.pem";
    let err = PostgresStore::connect(
        &format!("{base}?sslmode=verify-full&sslrootcert={missing}"),
        PostgresOptions::default(),
    )
    .await
    .expect_err("a missing root file");
    assert!(
        matches!(err, StoreError::Io { ref path, .. } if path.to_str() == Some(missing)),
        "{err}"
    );
    assert!(err.to_string().contains("sslrootcert"), "{err}");
    // The builder says the same as the URL.
    let options = PostgresOptions::default()
        .with_ssl_mode(SslMode::VerifyCa)
        .with_ssl_root_cert(missing);
    assert!(matches!(
        PostgresStore::connect(base, options).await,
        Err(StoreError::Io { .. })
    ));
}
