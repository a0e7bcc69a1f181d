//! The fenced append on Redis reads the lease's token from the session's head (field `t`, which
//! each grant writes while the head exists) instead of from the lease itself, and falls back to
//! the lease where the head does not name the writer's token. These tests pin what that may and
//! may not let through:
//! - a grant made before the session was first stored: the first append checks the lease;
//!   a former owner's first write after a takeover of such a session is refused;
//! - a released lease takes its mirror back: nothing is written under it any more;
//! - a head without a mirror (layout 2 wrote none) is fenced by the lease and gets the mirror;
//! - an owner whose lease lapsed with nobody taking the session again still writes (nobody
//!   else can), and is refused from the moment anyone else is granted the session;
//! - a head key holding foreign data fails no grant (an activation's claim leaves the read to
//!   its caller) and keeps no lease from its release.
//!
//! Breakage caught (verified by hand): `claim.lua` not writing the mirror lets a former owner
//! commit after a takeover; `release.lua` not removing it lets a released lease write.
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::store::conformance::turn_events;
use turnstile::store::{Claim, Claimant, Lease, Leases};
use turnstile::{SessionKey, Store, StoreError};

use support::redis_server::{dump, fresh_prefix, RedisServer};

const TTL: Duration = Duration::from_secs(60);

async fn grant(store: &RedisStore, key: &SessionKey, me: &Claimant) -> Lease {
    match store.acquire(key, me, TTL).await.expect("acquire") {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("held by {owner:?}"),
    }
}

/// The one key under `prefix` whose name ends with `suffix` (a session's `:h` or `:lease`).
async fn only_key(conn: &mut MultiplexedConnection, prefix: &str, suffix: &str) -> String {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:s:*{suffix}"))
        .query_async(conn)
        .await
        .expect("KEYS");
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys.into_iter().next().expect("one key")
}

/// Deletes the session's lease as its expiry would.
async fn lapse(conn: &mut MultiplexedConnection, prefix: &str) {
    let lease = only_key(conn, prefix, ":lease").await;
    let deleted: i64 = redis::cmd("DEL")
        .arg(&lease)
        .query_async(conn)
        .await
        .expect("DEL");
    assert_eq!(deleted, 1);
}

async fn mirror(conn: &mut MultiplexedConnection, prefix: &str) -> Option<String> {
    let head = only_key(conn, prefix, ":h").await;
    redis::cmd("HGET")
        .arg(&head)
        .arg("t")
        .query_async(conn)
        .await
        .expect("HGET")
}

/// Removes a head's mirror, as layout 2 left heads.
async fn drop_mirror(conn: &mut MultiplexedConnection, head: &str) {
    let _: i64 = redis::cmd("HDEL")
        .arg(head)
        .arg("t")
        .query_async(conn)
        .await
        .expect("HDEL");
}

/// Runs `write`, which must be refused with `NotOwner`, and checks that nothing under
/// `prefix` changed.
async fn refused_storing_nothing(
    conn: &mut MultiplexedConnection,
    prefix: &str,
    write: impl std::future::Future<Output = Result<u64, StoreError>>,
    what: &str,
) {
    let before = dump(conn, prefix).await;
    refused(write.await, what);
    assert_eq!(dump(conn, prefix).await, before, "nothing was stored");
}

fn refused(outcome: Result<u64, StoreError>, what: &str) {
    match outcome {
        Err(StoreError::NotOwner { .. }) => {}
        other => panic!("{what} must be refused with NotOwner, got {other:?}"),
    }
}

struct Setup {
    server: RedisServer,
    prefix: String,
    a: RedisStore,
    b: RedisStore,
    conn: MultiplexedConnection,
    key: SessionKey,
}

async fn setup() -> Setup {
    let server = RedisServer::start();
    let prefix = fresh_prefix();
    let options = RedisOptions::default().with_prefix(prefix.clone());
    let a = server.store_with(options.clone()).await;
    let b = server.store_with(options).await;
    let conn = server.connection().await;
    Setup {
        server,
        prefix,
        a,
        b,
        conn,
        key: SessionKey::new("ann", "s").expect("key"),
    }
}

#[tokio::test]
async fn a_takeover_before_the_first_write_refuses_the_former_owners_first_write() {
    let Setup {
        server: _server,
        prefix,
        a,
        b,
        mut conn,
        key,
    } = setup().await;
    let old = grant(&a, &key, &Claimant::new("http://a")).await;
    lapse(&mut conn, &prefix).await;
    let new = grant(&b, &key, &Claimant::new("http://b")).await;

    refused_storing_nothing(
        &mut conn,
        &prefix,
        a.append_fenced(&key, 0, &turn_events(1, "by a", None), &old),
        "the former owner's first write",
    )
    .await;

    let v1 = b
        .append_fenced(&key, 0, &turn_events(1, "by b", None), &new)
        .await
        .expect("the owner creates the session");
    assert_eq!(mirror(&mut conn, &prefix).await, Some(new.token.clone()));
    refused(
        a.append_fenced(&key, v1, &turn_events(3, "late a", None), &old)
            .await,
        "the former owner's write on the current version",
    );
}

#[tokio::test]
async fn a_released_lease_writes_nothing_more() {
    let Setup {
        server: _server,
        prefix,
        a,
        b: _b,
        mut conn,
        key,
    } = setup().await;
    let lease = grant(&a, &key, &Claimant::new("http://a")).await;
    let v1 = a
        .append_fenced(&key, 0, &turn_events(1, "first", None), &lease)
        .await
        .expect("the owner writes");
    assert_eq!(mirror(&mut conn, &prefix).await, Some(lease.token.clone()));
    assert!(a.release(&key, &lease).await.expect("release"));
    assert_eq!(mirror(&mut conn, &prefix).await, None, "the mirror is gone");

    refused_storing_nothing(
        &mut conn,
        &prefix,
        a.append_fenced(&key, v1, &turn_events(3, "after release", None), &lease),
        "a write under a released lease",
    )
    .await;
}

#[tokio::test]
async fn a_head_without_a_mirror_is_fenced_by_the_lease_and_gets_one() {
    let Setup {
        server: _server,
        prefix,
        a,
        b,
        mut conn,
        key,
    } = setup().await;
    let lease = grant(&a, &key, &Claimant::new("http://a")).await;
    let v1 = a
        .append_fenced(&key, 0, &turn_events(1, "first", None), &lease)
        .await
        .expect("the owner writes");
    // As layout 2 left heads: no `t`.
    let head = only_key(&mut conn, &prefix, ":h").await;
    drop_mirror(&mut conn, &head).await;

    let v2 = a
        .append_fenced(&key, v1, &turn_events(3, "second", None), &lease)
        .await
        .expect("the lease still names the owner");
    assert_eq!(mirror(&mut conn, &prefix).await, Some(lease.token.clone()));

    // Without a mirror, a write whose lease is gone is refused.
    drop_mirror(&mut conn, &head).await;
    lapse(&mut conn, &prefix).await;
    refused_storing_nothing(
        &mut conn,
        &prefix,
        a.append_fenced(&key, v2, &turn_events(5, "lapsed", None), &lease),
        "a write with neither a mirror nor a lease",
    )
    .await;
    let new = grant(&b, &key, &Claimant::new("http://b")).await;
    assert_eq!(mirror(&mut conn, &prefix).await, Some(new.token));
}

#[tokio::test]
async fn a_lapsed_lease_writes_until_anyone_else_is_granted_the_session() {
    let Setup {
        server: _server,
        prefix,
        a,
        b,
        mut conn,
        key,
    } = setup().await;
    let old = grant(&a, &key, &Claimant::new("http://a")).await;
    let v1 = a
        .append_fenced(&key, 0, &turn_events(1, "first", None), &old)
        .await
        .expect("the owner writes");
    lapse(&mut conn, &prefix).await;
    // Nobody else holds the session: the write already on its way when the lease lapsed
    // commits, and the next owner will load it.
    let v2 = a
        .append_fenced(&key, v1, &turn_events(3, "on its way", None), &old)
        .await
        .expect("the head still names a's grant as the newest");

    let new = grant(&b, &key, &Claimant::new("http://b")).await;
    refused_storing_nothing(
        &mut conn,
        &prefix,
        a.append_fenced(&key, v2, &turn_events(5, "after the takeover", None), &old),
        "the former owner's write after a takeover",
    )
    .await;
    b.append_fenced(&key, v2, &turn_events(5, "by b", None), &new)
        .await
        .expect("the new owner writes");
    let loaded = b.load(&key, 10).await.expect("load");
    let texts: Vec<_> = loaded.events.iter().filter_map(|e| e.text()).collect();
    assert_eq!(
        texts,
        [
            "first",
            "re: first",
            "on its way",
            "re: on its way",
            "by b",
            "re: by b"
        ]
    );
}

#[tokio::test]
async fn a_head_key_of_another_type_never_keeps_a_lease_from_being_given_back() {
    let Setup {
        server: _server,
        prefix,
        a,
        b,
        mut conn,
        key,
    } = setup().await;
    let lease = grant(&a, &key, &Claimant::new("http://a")).await;
    let lease_key = only_key(&mut conn, &prefix, ":lease").await;
    let head = lease_key.replace(":lease", ":h");
    let _: () = redis::cmd("SET")
        .arg(&head)
        .arg("foreign")
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert!(a.release(&key, &lease).await.expect("release"));
    // A grant leaves the foreign key alone too.
    let lease = grant(&a, &key, &Claimant::new("http://a")).await;
    let foreign: String = redis::cmd("GET")
        .arg(&head)
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(foreign, "foreign");
    assert!(a.release(&key, &lease).await.expect("release"));
    // An activation's claim leaves the read to the caller: the grant stands (a failed read
    // never undoes it), and the caller's own load meets the foreign data.
    let (claim, loaded) = a
        .acquire_and_load(&key, &Claimant::new("http://a"), TTL, 10)
        .await
        .expect("a grant, whatever the head holds");
    let lease = match claim {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("granted, got held by {owner:?}"),
    };
    assert!(loaded.is_none(), "nothing read from foreign data");
    assert!(
        a.load(&key, 10).await.is_err(),
        "the caller's load reports it"
    );
    match b
        .acquire(&key, &Claimant::new("http://b"), TTL)
        .await
        .expect("acquire")
    {
        Claim::Held(owner) => assert_eq!(owner.address, "http://a"),
        Claim::Granted(_) => panic!("the activation's grant must stand"),
    }
    assert!(a.release(&key, &lease).await.expect("release"));
}
