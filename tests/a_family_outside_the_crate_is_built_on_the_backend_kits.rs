//! A family of data written outside the crate — notes, one text per `(user, note)` — kept on
//! each backend through its public kit (`turnstile::backend::{file, redis, postgres}::kit`)
//! beside the session store, as `docs/stores.md` ("Adding a backend") describes: the same
//! contract on all three, hostile ids kept apart, and each kit's guards (links in a file root,
//! a prefix that could open a hash tag) holding for code that is not turnstile's.

mod support;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use support::postgres::TestDatabase;
use support::redis_server::RedisServer;
use turnstile::backend::file::kit as file_kit;
use turnstile::backend::postgres::kit as pg_kit;
use turnstile::backend::redis::kit as redis_kit;
use turnstile::backend::{FileStore, PostgresOptions, PostgresStore, RedisOptions};
use turnstile::store::StoreError;

/// The family: one text per user and note id.
#[async_trait]
trait Notes: Send + Sync {
    async fn put(&self, user: &str, note: &str, text: &str) -> Result<(), StoreError>;
    async fn get(&self, user: &str, note: &str) -> Result<Option<String>, StoreError>;
}

/// Notes in files: `<root>/notes/<user>/<note>.txt`, names from the kit's encoder.
struct FileNotes {
    root: PathBuf,
}

impl FileNotes {
    fn path(&self, user: &str, note: &str) -> (Vec<PathBuf>, PathBuf) {
        let notes = self.root.join("notes");
        let user_dir = notes.join(file_kit::encode_name(user));
        let file = user_dir.join(format!("{}.txt", file_kit::encode_name(note)));
        (vec![notes, user_dir], file)
    }
}

#[async_trait]
impl Notes for FileNotes {
    async fn put(&self, user: &str, note: &str, text: &str) -> Result<(), StoreError> {
        let (folders, file) = self.path(user, note);
        let (root, text) = (self.root.clone(), text.to_owned());
        file_kit::run_io(move || {
            file_kit::refuse_links(&root, &[&file])?;
            file_kit::create_dirs(&folders)?;
            file_kit::write_atomic(&file, text.as_bytes())
        })
        .await
    }

    async fn get(&self, user: &str, note: &str) -> Result<Option<String>, StoreError> {
        let (_, file) = self.path(user, note);
        let bytes = file_kit::run_io(move || file_kit::read_optional(&file)).await?;
        Ok(bytes.map(|b| String::from_utf8(b).expect("notes are text")))
    }
}

/// Notes in Redis: `<prefix>:notes:{<user>}:<note>`, on the session store's connection.
struct RedisNotes {
    conn: redis_kit::RedisConnection,
    prefix: String,
}

impl RedisNotes {
    fn key(&self, user: &str, note: &str) -> String {
        format!(
            "{}:notes:{{{}}}:{}",
            self.prefix,
            redis_kit::key_part(user),
            redis_kit::key_part(note)
        )
    }
}

#[async_trait]
impl Notes for RedisNotes {
    async fn put(&self, user: &str, note: &str, text: &str) -> Result<(), StoreError> {
        redis_kit::redis::cmd("SET")
            .arg(self.key(user, note))
            .arg(text)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(|e| redis_kit::redis_error("notes", e))
    }

    async fn get(&self, user: &str, note: &str) -> Result<Option<String>, StoreError> {
        redis_kit::redis::cmd("GET")
            .arg(self.key(user, note))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_kit::redis_error("notes", e))
    }
}

/// Notes in PostgreSQL: the table `<schema>.notes`, on the session store's pool.
struct PgNotes {
    store: PostgresStore,
}

impl PgNotes {
    async fn open(store: PostgresStore) -> Result<Self, StoreError> {
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {}.notes \
             (user_id text NOT NULL, note text NOT NULL, body text NOT NULL, \
              PRIMARY KEY (user_id, note))",
            store.schema()
        );
        store.query("notes", &create, &[]).await?;
        Ok(Self { store })
    }
}

#[async_trait]
impl Notes for PgNotes {
    async fn put(&self, user: &str, note: &str, text: &str) -> Result<(), StoreError> {
        let upsert = format!(
            "INSERT INTO {}.notes (user_id, note, body) VALUES ($1, $2, $3) \
             ON CONFLICT (user_id, note) DO UPDATE SET body = EXCLUDED.body",
            self.store.schema()
        );
        self.store
            .query("notes", &upsert, &[&user, &note, &text])
            .await
            .map(drop)
    }

    async fn get(&self, user: &str, note: &str) -> Result<Option<String>, StoreError> {
        let select = format!(
            "SELECT body FROM {}.notes WHERE user_id = $1 AND note = $2",
            self.store.schema()
        );
        let rows: Vec<pg_kit::tokio_postgres::Row> =
            self.store.read("notes", &select, &[&user, &note]).await?;
        Ok(rows.first().map(|row| row.get(0)))
    }
}

/// The family's contract, whatever it is kept on.
async fn contract(notes: &dyn Notes) {
    assert_eq!(notes.get("alice", "todo").await.unwrap(), None);
    notes.put("alice", "todo", "milk").await.unwrap();
    notes.put("bob", "todo", "eggs").await.unwrap();
    assert_eq!(
        notes.get("alice", "todo").await.unwrap().as_deref(),
        Some("milk")
    );
    notes.put("alice", "todo", "milk, bread").await.unwrap();
    assert_eq!(
        notes.get("alice", "todo").await.unwrap().as_deref(),
        Some("milk, bread")
    );
    assert_eq!(
        notes.get("bob", "todo").await.unwrap().as_deref(),
        Some("eggs")
    );
    // Ids that would leave a folder, open a hash tag or look like one another stay apart.
    let hostile = [
        ("../alice", "todo"),
        ("alice", "../todo"),
        ("a{b}*:", "x"),
        ("ALICE", "todo"),
        ("alice/todo", "n"),
        ("alic\u{202e}e", "todo"),
    ];
    for (i, (user, note)) in hostile.iter().enumerate() {
        notes
            .put(user, note, &format!("hostile {i}"))
            .await
            .unwrap();
    }
    for (i, (user, note)) in hostile.iter().enumerate() {
        assert_eq!(
            notes.get(user, note).await.unwrap(),
            Some(format!("hostile {i}")),
            "{user:?}/{note:?}"
        );
    }
    assert_eq!(
        notes.get("alice", "todo").await.unwrap().as_deref(),
        Some("milk, bread"),
        "a hostile id overwrote another's note"
    );
}

#[tokio::test]
async fn a_family_kept_in_files_beside_a_file_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let notes = FileNotes {
        root: store.root().to_owned(),
    };
    contract(&notes).await;
    // Everything stayed under the notes folder, with names the encoder made.
    for entry in walk(&dir.path().join("notes")) {
        let name = entry.file_name().unwrap().to_str().unwrap().to_owned();
        let plain = name.trim_end_matches(".txt");
        assert!(
            file_kit::decode_name(plain).is_some(),
            "{name} is not an encoded name"
        );
    }

    // The kit's guard holds for this family too: a link planted in its folder is refused.
    let outside = tempfile::tempdir().unwrap();
    let user_dir = dir
        .path()
        .join("notes")
        .join(file_kit::encode_name("carol"));
    std::os::unix::fs::symlink(outside.path(), &user_dir).unwrap();
    match notes.put("carol", "x", "secret").await {
        Err(StoreError::Corrupt { detail, .. }) => assert!(detail.contains("symbolic link")),
        other => panic!("a write through a planted link was not refused: {other:?}"),
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

#[tokio::test]
async fn a_family_kept_in_redis_beside_a_redis_store() {
    let server = RedisServer::start();
    let store = server.store().await;
    let notes = RedisNotes {
        conn: store.connection(),
        prefix: store.prefix().to_owned(),
    };
    assert!(!notes.conn.is_cluster());
    contract(&notes).await;
    // Every key the family wrote lies under the store's prefix, one hash tag each.
    let keys: Vec<String> = redis_kit::redis::cmd("KEYS")
        .arg(format!("{}:notes:*", store.prefix()))
        .query_async(&mut store.connection())
        .await
        .unwrap();
    assert_eq!(keys.len(), 8, "{keys:?}");
    assert!(keys.iter().all(|k| k.matches('{').count() == 1));

    // A connection of the family's own, through the kit, sees the same data.
    let own = redis_kit::connect(server.url(), &RedisOptions::default())
        .await
        .unwrap();
    let separate = RedisNotes {
        conn: own,
        prefix: store.prefix().to_owned(),
    };
    assert_eq!(
        separate.get("bob", "todo").await.unwrap().as_deref(),
        Some("eggs")
    );

    // The kit's checks and errors.
    assert!(redis_kit::check_prefix("team-a:notes").is_ok());
    assert!(redis_kit::check_prefix("a{b}").is_err());
    assert!(redis_kit::is_cluster_url(
        "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"
    ));
    assert!(!redis_kit::is_cluster_url(server.url()));
    match redis_kit::connect("redis://127.0.0.1:1", &RedisOptions::default()).await {
        Err(StoreError::Unavailable { backend, .. }) => assert_eq!(backend, "redis"),
        other => panic!("a Redis that is not there: {other:?}"),
    }
    // A key holding another type is Corrupt, as for turnstile's own families.
    let wrong = notes.key("dave", "list");
    redis_kit::redis::cmd("LPUSH")
        .arg(&wrong)
        .arg("x")
        .query_async::<()>(&mut store.connection())
        .await
        .unwrap();
    assert!(matches!(
        notes.get("dave", "list").await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn a_family_kept_in_postgres_beside_a_postgres_store() {
    let database = TestDatabase::create().await;
    let store = database.store().await;
    let notes = PgNotes::open(store.clone()).await.unwrap();
    contract(&notes).await;
    // Opening again (a second store on the same schema) finds the table there, and the notes.
    let same_schema = PostgresOptions::default().with_schema(store.schema());
    let again = PgNotes::open(database.store_with(same_schema).await)
        .await
        .unwrap();
    assert_eq!(
        again.get("bob", "todo").await.unwrap().as_deref(),
        Some("eggs")
    );
    // A statement the server refuses is an error naming what it was about, nothing written.
    let refused = store
        .query(
            "notes",
            &format!("INSERT INTO {}.nope VALUES (1)", store.schema()),
            &[],
        )
        .await;
    match refused {
        Err(e) => assert!(e.to_string().contains("notes"), "{e}"),
        Ok(_) => panic!("a statement on a missing table succeeded"),
    }
}
