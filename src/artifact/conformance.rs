//! The conformance suite every [`ArtifactStore`] must pass.
//!
//! Call [`run_all`] from a test with a factory that returns a fresh, empty store each time:
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! use turnstile::artifact::{conformance, MemoryArtifactStore};
//! conformance::run_all(|| async { Arc::new(MemoryArtifactStore::new()) as _ }).await;
//! # }
//! ```
//!
//! Each check panics with a message naming the property that broke.

use std::future::Future;
use std::sync::Arc;

use super::{ArtifactError, ArtifactScope, ArtifactStore};
use crate::key::SessionKey;

/// Runs every check, each against a fresh store from `make`.
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn ArtifactStore>>,
{
    a_saved_version_loads_back_with_its_type(make().await).await;
    versions_grow_and_old_versions_stay_loadable(make().await).await;
    a_listing_names_each_artifact_with_its_newest_version(make().await).await;
    hostile_names_are_refused_and_store_nothing(make().await).await;
    near_hostile_names_stay_apart(make().await).await;
    an_oversized_artifact_is_refused_and_stores_nothing(make().await).await;
    scopes_never_see_each_other(make().await).await;
    delete_removes_a_name_or_a_scope(make().await).await;
    delete_user_removes_the_user_and_its_sessions_only(make().await).await;
    concurrent_saves_of_one_name_get_distinct_versions(make().await).await;
}

fn session(user: &str, id: &str) -> ArtifactScope {
    ArtifactScope::Session(SessionKey::new(user, id).expect("a valid key"))
}

fn user(id: &str) -> ArtifactScope {
    ArtifactScope::user(id).expect("a valid user")
}

/// A version saved loads back byte for byte with its type, as the newest and by number.
pub async fn a_saved_version_loads_back_with_its_type(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    let bytes: Vec<u8> = (0..=255).collect();
    let version = store
        .save(&scope, "report.bin", &bytes, "application/octet-stream")
        .await
        .expect("save");
    assert_eq!(version, 1, "the first version is 1");
    for asked in [None, Some(1)] {
        let loaded = store
            .load(&scope, "report.bin", asked)
            .await
            .expect("load")
            .expect("the saved version exists");
        assert_eq!(loaded.data, bytes, "bytes round-trip");
        assert_eq!(loaded.meta.mime, "application/octet-stream");
        assert_eq!(loaded.meta.bytes, 256);
        assert_eq!(loaded.meta.version, 1);
        assert_eq!(loaded.meta.name, "report.bin");
    }
    for missing in [Some(0), Some(2)] {
        let none = store
            .load(&scope, "report.bin", missing)
            .await
            .expect("load");
        assert!(none.is_none(), "version {missing:?} does not exist");
    }
    let none = store.load(&scope, "other", None).await.expect("load");
    assert!(none.is_none(), "an unknown name loads as None");
    assert!(store
        .versions(&scope, "other")
        .await
        .expect("versions")
        .is_empty());
}

/// Each save of a name is one version more; every older version stays loadable as it was.
pub async fn versions_grow_and_old_versions_stay_loadable(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    for n in 1..=4u64 {
        let text = format!("draft {n}");
        let version = store
            .save(&scope, "notes.md", text.as_bytes(), "text/markdown")
            .await
            .expect("save");
        assert_eq!(version, n, "versions grow by one");
    }
    for n in 1..=4u64 {
        let loaded = store.load(&scope, "notes.md", Some(n)).await.expect("load");
        assert_eq!(
            loaded.expect("an old version stays").data,
            format!("draft {n}").into_bytes()
        );
    }
    let newest = store.load(&scope, "notes.md", None).await.expect("load");
    assert_eq!(newest.expect("newest").meta.version, 4);
    let versions = store.versions(&scope, "notes.md").await.expect("versions");
    let numbers: Vec<u64> = versions.iter().map(|m| m.version).collect();
    assert_eq!(numbers, [1, 2, 3, 4], "versions are listed oldest first");
    assert!(versions
        .iter()
        .all(|m| m.bytes == 7 && m.mime == "text/markdown"));
}

/// A listing gives every name once, with its newest version, ordered by name.
pub async fn a_listing_names_each_artifact_with_its_newest_version(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    assert!(store.list(&scope).await.expect("list").is_empty());
    for (name, body) in [("b.txt", "1"), ("a.txt", "1"), ("b.txt", "22")] {
        store
            .save(&scope, name, body.as_bytes(), "text/plain")
            .await
            .expect("save");
    }
    let listed = store.list(&scope).await.expect("list");
    let seen: Vec<(&str, u64, u64)> = listed
        .iter()
        .map(|m| (m.name.as_str(), m.version, m.bytes))
        .collect();
    assert_eq!(seen, [("a.txt", 1, 1), ("b.txt", 2, 2)]);
}

/// Names with `..`, slashes, NUL, control characters or 10,000 bytes are refused, and nothing
/// of them is stored.
pub async fn hostile_names_are_refused_and_store_nothing(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    let long = "n".repeat(10_000);
    for name in [
        "..",
        "../../etc/passwd",
        "a/b",
        "a\\b",
        "nul\0x",
        "tab\tx",
        "",
        &long,
    ] {
        let refused = store.save(&scope, name, b"x", "text/plain").await;
        assert!(
            matches!(refused, Err(ArtifactError::InvalidName { .. })),
            "{:?} must be refused, got {refused:?}",
            &name[..name.len().min(20)]
        );
        let load = store.load(&scope, name, None).await;
        assert!(matches!(load, Err(ArtifactError::InvalidName { .. })));
    }
    let bad_mime = store.save(&scope, "ok", b"x", "text/\nplain").await;
    assert!(matches!(bad_mime, Err(ArtifactError::InvalidMime { .. })));
    assert!(
        store.list(&scope).await.expect("list").is_empty(),
        "nothing stored"
    );
}

/// Names that look like paths, patterns or hash tags, or differ only in case, are distinct
/// artifacts that never mix.
pub async fn near_hostile_names_stay_apart(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    let names = [
        "Report", "report", "%2e%2e", ".hidden", "{tag}", "*", "a:b", "CON", "x.y.z",
    ];
    for name in names {
        store
            .save(&scope, name, name.as_bytes(), "text/plain")
            .await
            .expect("save");
    }
    for name in names {
        let loaded = store.load(&scope, name, None).await.expect("load");
        let loaded = loaded.expect("each name is its own artifact");
        assert_eq!(loaded.data, name.as_bytes(), "{name}");
        assert_eq!(loaded.meta.version, 1, "{name} did not collide");
    }
    assert_eq!(store.list(&scope).await.expect("list").len(), names.len());
}

/// Bytes over the store's limit are refused with `TooLarge` and nothing is stored.
pub async fn an_oversized_artifact_is_refused_and_stores_nothing(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    let limit = usize::try_from(store.max_bytes()).expect("a limit that fits memory");
    let too_big = vec![7u8; limit + 1];
    let refused = store.save(&scope, "big", &too_big, "text/plain").await;
    assert!(
        matches!(refused, Err(ArtifactError::TooLarge { .. })),
        "got {refused:?}"
    );
    assert!(store
        .load(&scope, "big", None)
        .await
        .expect("load")
        .is_none());
    let fits = vec![7u8; limit.min(64 * 1024)];
    store
        .save(&scope, "big", &fits, "text/plain")
        .await
        .expect("at the limit fits");
}

/// A session's, another session's, its user's and another user's artifacts never mix, and an
/// anonymous session is apart from every user.
pub async fn scopes_never_see_each_other(store: Arc<dyn ArtifactStore>) {
    let scopes = [
        session("ada", "s1"),
        session("ada", "s2"),
        user("ada"),
        session("bob", "s1"),
        user("bob"),
        ArtifactScope::Session(SessionKey::anonymous("s1").expect("valid")),
        // Ids that look like a separator or a prefix of another id.
        session("ada/s1", "x"),
        user("ada/s1"),
    ];
    for (i, scope) in scopes.iter().enumerate() {
        store
            .save(scope, "same-name", i.to_string().as_bytes(), "text/plain")
            .await
            .expect("save");
    }
    for (i, scope) in scopes.iter().enumerate() {
        let loaded = store.load(scope, "same-name", None).await.expect("load");
        let loaded = loaded.expect("each scope has its own");
        assert_eq!(loaded.data, i.to_string().into_bytes(), "{scope}");
        assert_eq!(loaded.meta.version, 1, "{scope} shares no versions");
    }
}

/// Deleting a name removes all its versions and leaves other names; deleting a scope removes
/// everything in it and nothing elsewhere. A deleted name starts again at version 1.
pub async fn delete_removes_a_name_or_a_scope(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    let other = session("ada", "s2");
    for name in ["a", "a", "b"] {
        store
            .save(&scope, name, b"x", "text/plain")
            .await
            .expect("save");
    }
    store
        .save(&other, "a", b"y", "text/plain")
        .await
        .expect("save");
    assert_eq!(store.delete(&scope, Some("a")).await.expect("delete"), 2);
    assert!(store
        .load(&scope, "a", Some(1))
        .await
        .expect("load")
        .is_none());
    assert!(store.load(&scope, "b", None).await.expect("load").is_some());
    assert_eq!(store.delete(&scope, Some("a")).await.expect("delete"), 0);
    assert_eq!(
        store
            .save(&scope, "a", b"z", "text/plain")
            .await
            .expect("save"),
        1
    );
    assert_eq!(store.delete(&scope, None).await.expect("delete"), 2);
    assert!(store.list(&scope).await.expect("list").is_empty());
    assert_eq!(
        store.list(&other).await.expect("list").len(),
        1,
        "other scope kept"
    );
}

/// `delete_user` removes the user's own artifacts and those of every session of the user, and
/// nothing of another user (even one whose id starts the same).
pub async fn delete_user_removes_the_user_and_its_sessions_only(store: Arc<dyn ArtifactStore>) {
    let theirs = [user("ada"), session("ada", "s1"), session("ada", "s2")];
    let others = [user("ada2"), session("ada2", "s1"), session("bob", "s1")];
    for scope in theirs.iter().chain(&others) {
        store
            .save(scope, "f", b"x", "text/plain")
            .await
            .expect("save");
    }
    assert_eq!(store.delete_user("ada").await.expect("delete_user"), 3);
    for scope in &theirs {
        assert!(store.list(scope).await.expect("list").is_empty(), "{scope}");
    }
    for scope in &others {
        assert_eq!(store.list(scope).await.expect("list").len(), 1, "{scope}");
    }
    assert!(
        store.delete_user("").await.is_err(),
        "an empty user id is refused"
    );
}

/// Saves of one name racing each other get distinct versions, and every one stays loadable.
pub async fn concurrent_saves_of_one_name_get_distinct_versions(store: Arc<dyn ArtifactStore>) {
    let scope = session("ada", "s1");
    let saves = (0..16).map(|i| {
        let store = store.clone();
        let scope = scope.clone();
        async move {
            let body = format!("writer {i}");
            let version = store
                .save(&scope, "race", body.as_bytes(), "text/plain")
                .await
                .expect("save");
            (version, body)
        }
    });
    let mut results = futures::future::join_all(saves).await;
    results.sort();
    let versions: Vec<u64> = results.iter().map(|(v, _)| *v).collect();
    assert_eq!(
        versions,
        (1..=16).collect::<Vec<_>>(),
        "no version given twice"
    );
    for (version, body) in results {
        let loaded = store
            .load(&scope, "race", Some(version))
            .await
            .expect("load");
        assert_eq!(loaded.expect("kept").data, body.into_bytes());
    }
}
