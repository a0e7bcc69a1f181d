//! Artifact names with `..`, slashes, NUL or 10,000 bytes are refused with 400
//! `invalid_artifact` over HTTP, whatever their encoding in the path, and store nothing; the
//! file store keeps every name inside its folder, and a symbolic link planted in place of a
//! version file is refused, never followed out of the folder.
#![cfg(feature = "http")]

mod support;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use turnstile::artifact::{ArtifactError, ArtifactScope};
use turnstile::backend::FileArtifactStore;
use turnstile::http::HttpConfig;
use turnstile::{ArtifactStore, EchoAgent, Runtime, SessionKey};

use support::http::{code, TestGateway, ALICE};

fn put(uri: &str) -> Request<Body> {
    Request::builder()
        .method(Method::PUT)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {ALICE}"))
        .body(Body::from("x"))
        .expect("a valid request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_refused_over_http_and_nothing_leaves_the_folder() {
    let folder = tempfile::tempdir().expect("temporary folder");
    let root = folder.path().join("artifacts");
    let artifacts: Arc<dyn ArtifactStore> = Arc::new(FileArtifactStore::open(&root).unwrap());
    let builder = Runtime::builder()
        .agent(EchoAgent)
        .with_artifacts(artifacts.clone());
    let gw = TestGateway::with(builder, HttpConfig::default());
    let long = "n".repeat(10_000);
    let base = "/v1/sessions/alice/s1/artifacts";
    for name in [
        "..",
        "%2E%2E",
        "..%2F..%2Fescape",
        "a%2Fb",
        "a%5Cb",
        "nul%00",
        "tab%09x",
        &long,
    ] {
        let (status, body) = gw.send(put(&format!("{base}/{name}"))).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::BAD_REQUEST, "invalid_artifact"),
            "{}",
            &name[..name.len().min(20)]
        );
    }
    let scope = ArtifactScope::Session(SessionKey::new("alice", "s1").unwrap());
    assert!(
        artifacts.list(&scope).await.unwrap().is_empty(),
        "nothing stored"
    );
    // Names that merely look odd are contained: stored, and only under the root.
    for name in ["a.b.txt", ".hidden", "%25escape"] {
        let (status, _) = gw.send(put(&format!("{base}/{name}"))).await;
        assert_eq!(status, StatusCode::OK, "{name}");
    }
    let outside: Vec<_> = std::fs::read_dir(folder.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        outside,
        [std::ffi::OsString::from("artifacts")],
        "nothing beside the root"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symbolic_link_in_place_of_a_version_is_not_followed() {
    let folder = tempfile::tempdir().expect("temporary folder");
    let secret = folder.path().join("secret.txt");
    std::fs::write(&secret, "outside the store").unwrap();
    let root = folder.path().join("artifacts");
    let store = FileArtifactStore::open(&root).unwrap();
    let scope = ArtifactScope::Session(SessionKey::new("alice", "s1").unwrap());
    store
        .save(&scope, "doc", b"mine", "text/plain")
        .await
        .unwrap();
    // Find the version file and replace it with a link to the secret.
    let mut stack = vec![root.clone()];
    let mut version_file = None;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "art") {
                version_file = Some(path);
            }
        }
    }
    let version_file = version_file.expect("a version file");
    std::fs::remove_file(&version_file).unwrap();
    std::os::unix::fs::symlink(&secret, &version_file).unwrap();
    match store.load(&scope, "doc", Some(1)).await {
        Err(ArtifactError::Io { .. }) => {}
        other => panic!("a link must be refused, got {other:?}"),
    }
}
