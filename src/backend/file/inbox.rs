//! [`FileInbox`]: the channel inbox beside the file session store, one file per platform message
//! under `inbox/<channel>/`.
//!
//! A message is accepted by writing it to a temporary file (fsync'd) and hard-linking that file
//! to its name, which is a hash of its id: the link either creates the name with the whole
//! entry in it or fails because the name exists, so two deliveries of one message racing each
//! other store it once, and a crash never leaves a half-written entry under its name. Changes
//! (replies posted, done) replace the file whole (temp file, fsync, rename, folder fsync).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::FileStore;
use crate::atomic_file::{read_optional, sync_dir, write_atomic};
use crate::inbox::INBOX_SCHEMA_VERSION;
use crate::inbox::{Accepted, EntryMeta, Inbox, InboxEntry, InboxError, Ledger};

/// The folder of a file backend's channel inbox, inside its root.
pub const INBOX_FOLDER: &str = "inbox";

/// The channel inbox of a file store's folder. Every change is fsync'd before it returns `Ok`.
/// Cloning is cheap and shares the inbox.
#[derive(Debug, Clone)]
pub struct FileInbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    /// Holds the folder's lock for as long as the inbox is in use: no other process writes it.
    _store: FileStore,
    /// Per channel, what its files hold, by file name: read once at open, then kept in step
    /// with every write (this process is the only writer).
    ledgers: Mutex<HashMap<String, Ledger>>,
}

/// One entry's file.
#[derive(Serialize, Deserialize)]
struct Document {
    schema_version: u32,
    #[serde(flatten)]
    entry: InboxEntry,
}

impl FileInbox {
    /// Opens the inbox of `store`, reading what every channel holds.
    ///
    /// Blocking: call it at start-up. A corrupt entry is [`InboxError::Corrupt`] and a newer
    /// one [`InboxError::Schema`]; neither is skipped or removed.
    pub fn open(store: &FileStore) -> Result<Self, InboxError> {
        let root = store.root().join(INBOX_FOLDER);
        let mut ledgers = HashMap::new();
        for (channel, dir) in channel_dirs(&root)? {
            remove_temporaries(&dir)?;
            let mut ledger = Ledger::default();
            for (name, path) in entry_files(&dir)? {
                let entry = read_entry(&path)?;
                ledger.set(&name, EntryMeta::of(&entry));
            }
            ledgers.insert(channel, ledger);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                _store: store.clone(),
                ledgers: Mutex::new(ledgers),
            }),
        })
    }

    /// The folder the inbox is kept in.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    fn dir_of(&self, channel: &str) -> PathBuf {
        // Channel names are `A-Z a-z 0-9 _ - .` (validated by the router); hex keeps even an
        // unvalidated one inside the folder.
        self.inner.root.join(crate::hex::encode(channel))
    }
}

/// The file name of an entry: a hash of its id, so that any bytes make a short, safe name.
fn file_name(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    let mut name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    name.push_str(".json");
    name
}

fn io_error(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> InboxError {
    let path = path.to_path_buf();
    move |source| InboxError::Io { op, path, source }
}

fn channel_dirs(root: &Path) -> Result<Vec<(String, PathBuf)>, InboxError> {
    let listing = match fs::read_dir(root) {
        Ok(listing) => listing,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("list", root)(e)),
    };
    let mut dirs = Vec::new();
    for item in listing {
        let item = item.map_err(io_error("list", root))?;
        let name = item.file_name().to_string_lossy().into_owned();
        // Anything that is not a hex-encoded channel folder is not the inbox's: left alone.
        if let Some(channel) = crate::hex::decode(&name) {
            dirs.push((channel, item.path()));
        }
    }
    Ok(dirs)
}

fn entry_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, InboxError> {
    let mut files = Vec::new();
    for item in fs::read_dir(dir).map_err(io_error("list", dir))? {
        let item = item.map_err(io_error("list", dir))?;
        let name = item.file_name().to_string_lossy().into_owned();
        // Temporaries left by a crash end in `.tmp`: never read.
        if name.len() == 64 + ".json".len() && name.ends_with(".json") {
            files.push((name, item.path()));
        }
    }
    Ok(files)
}

/// Removes the temporaries a crash left in `dir` (never read, so only space is at stake).
fn remove_temporaries(dir: &Path) -> Result<(), InboxError> {
    for item in fs::read_dir(dir).map_err(io_error("list", dir))? {
        let item = item.map_err(io_error("list", dir))?;
        if item.file_name().to_string_lossy().ends_with(".tmp") {
            let path = item.path();
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("remove", &path)(e)),
            }
        }
    }
    Ok(())
}

fn read_entry(path: &Path) -> Result<InboxEntry, InboxError> {
    let bytes = fs::read(path).map_err(io_error("read", path))?;
    decode(&bytes, path)
}

fn decode(bytes: &[u8], path: &Path) -> Result<InboxEntry, InboxError> {
    let place = || path.display().to_string();
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| InboxError::Corrupt {
            place: place(),
            detail: e.to_string(),
        })?;
    let found = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64);
    match found {
        Some(v) if v > u64::from(INBOX_SCHEMA_VERSION) => {
            return Err(InboxError::Schema {
                place: place(),
                found: u32::try_from(v).unwrap_or(u32::MAX),
            })
        }
        Some(_) => {}
        None => {
            return Err(InboxError::Corrupt {
                place: place(),
                detail: "no schema_version".into(),
            })
        }
    }
    let document: Document = serde_json::from_value(value).map_err(|e| InboxError::Corrupt {
        place: place(),
        detail: e.to_string(),
    })?;
    Ok(document.entry)
}

fn encode(entry: &InboxEntry) -> Vec<u8> {
    let document = Document {
        schema_version: INBOX_SCHEMA_VERSION,
        entry: entry.clone(),
    };
    serde_json::to_vec(&document).expect("an inbox entry is plain data and always encodes")
}

/// Creates `path` holding `bytes` unless it exists: written to a temporary beside it, fsync'd,
/// hard-linked into place (which fails when the name exists), the folder fsync'd. Returns
/// whether it was created.
fn create_new(dir: &Path, path: &Path, bytes: &[u8]) -> Result<bool, InboxError> {
    fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    let tmp = dir.join(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    let staged = (|| {
        let mut file = fs::File::create(&tmp).map_err(io_error("create", &tmp))?;
        file.write_all(bytes).map_err(io_error("write", &tmp))?;
        file.sync_all().map_err(io_error("fsync", &tmp))?;
        match fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_error("link into place", path)(e)),
        }
    })();
    // Best effort: a temporary is never read, so leaving one behind only costs space.
    let _ = fs::remove_file(&tmp);
    let created = staged?;
    if created {
        sync_dir(dir).map_err(io_error("fsync folder", dir))?;
        // The channel's folder itself may be new.
        if let Some(parent) = dir.parent() {
            sync_dir(parent).map_err(io_error("fsync folder", parent))?;
        }
    }
    Ok(created)
}

impl FileInbox {
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, InboxError> + Send + 'static,
    ) -> Result<T, InboxError> {
        super::pool::run(work)
            .await
            .map_err(|detail| InboxError::Unavailable {
                backend: "file",
                detail,
            })?
    }

    async fn accept_now(&self, entry: &InboxEntry) -> Result<Accepted, InboxError> {
        let channel = entry.message.channel.clone();
        let name = file_name(&entry.id);
        {
            // Counted against the cap before it is written, so that racing deliveries of
            // different messages cannot all pass the check.
            let mut ledgers = self.inner.ledgers.lock();
            let ledger = ledgers.entry(channel.clone()).or_default();
            if ledger.contains(&name) {
                return Ok(Accepted::Duplicate);
            }
            if !ledger.reserve() {
                return Err(InboxError::Full {
                    channel,
                    pending: ledger.pending(),
                });
            }
        }
        let dir = self.dir_of(&channel);
        let path = dir.join(&name);
        let bytes = encode(entry);
        let created = self.blocking(move || create_new(&dir, &path, &bytes)).await;
        let mut ledgers = self.inner.ledgers.lock();
        let ledger = ledgers.entry(channel).or_default();
        ledger.release();
        if !created? {
            return Ok(Accepted::Duplicate);
        }
        ledger.set(&name, EntryMeta::of(entry));
        Ok(Accepted::New)
    }
}

#[async_trait]
impl Inbox for FileInbox {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn accept(&self, entry: &InboxEntry) -> Result<Accepted, InboxError> {
        // A task of its own: a caller that stops waiting must not leave the cap reserved, or
        // the file written and not counted.
        let (inbox, entry) = (self.clone(), entry.clone());
        tokio::spawn(async move { inbox.accept_now(&entry).await })
            .await
            .map_err(|e| InboxError::Unavailable {
                backend: "file",
                detail: format!("the accepting task did not finish: {e}"),
            })?
    }

    async fn update(&self, entry: &InboxEntry) -> Result<(), InboxError> {
        let channel = entry.message.channel.clone();
        let name = file_name(&entry.id);
        let dir = self.dir_of(&channel);
        let path = dir.join(&name);
        let bytes = encode(entry);
        self.blocking(move || {
            fs::create_dir_all(&dir).map_err(io_error("create", &dir))?;
            write_atomic(&path, &bytes).map_err(|failed| InboxError::Io {
                op: failed.op,
                path: failed.path,
                source: failed.source,
            })
        })
        .await?;
        self.inner
            .ledgers
            .lock()
            .entry(channel)
            .or_default()
            .set(&name, EntryMeta::of(entry));
        Ok(())
    }

    async fn pending(&self, channel: &str) -> Result<Vec<InboxEntry>, InboxError> {
        let waiting = match self.inner.ledgers.lock().get(channel) {
            Some(ledger) => ledger.waiting(),
            None => return Ok(Vec::new()),
        };
        let dir = self.dir_of(channel);
        self.blocking(move || {
            let mut entries = Vec::with_capacity(waiting.len());
            for name in waiting {
                let path = dir.join(&name);
                // Read back, not taken from memory: what a resumed reply acts on is what is on
                // disk.
                match read_optional(&path).map_err(io_error("read", &path))? {
                    Some(bytes) => entries.push(decode(&bytes, &path)?),
                    None => continue,
                }
            }
            Ok(entries)
        })
        .await
    }

    async fn prune(&self, before_ms: u64) -> Result<u64, InboxError> {
        let expired: Vec<(String, Vec<String>)> = self
            .inner
            .ledgers
            .lock()
            .iter()
            .map(|(channel, ledger)| (channel.clone(), ledger.expired(before_ms)))
            .filter(|(_, names)| !names.is_empty())
            .collect();
        let mut forgotten = 0;
        for (channel, names) in expired {
            let dir = self.dir_of(&channel);
            let removed = {
                let names = names.clone();
                self.blocking(move || {
                    for name in &names {
                        let path = dir.join(name);
                        match fs::remove_file(&path) {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                            Err(e) => return Err(io_error("remove", &path)(e)),
                        }
                    }
                    sync_dir(&dir).map_err(io_error("fsync folder", &dir))
                })
                .await
            };
            removed?;
            let mut ledgers = self.inner.ledgers.lock();
            if let Some(ledger) = ledgers.get_mut(&channel) {
                for name in &names {
                    ledger.remove(name);
                }
            }
            forgotten += names.len() as u64;
        }
        Ok(forgotten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::conformance;

    fn store() -> (tempfile::TempDir, FileStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn the_file_inbox_passes_the_conformance_suite() {
        let (_dir, store) = store();
        conformance::run(&FileInbox::open(&store).unwrap()).await;
    }

    #[tokio::test]
    async fn entries_survive_a_reopen_and_retries_are_still_recognised() {
        let (dir, store) = store();
        let inbox = FileInbox::open(&store).unwrap();
        let first = conformance::entry("telegram", "1", 1);
        let mut second = conformance::entry("telegram", "2", 2);
        inbox.accept(&first).await.unwrap();
        inbox.accept(&second).await.unwrap();
        second.posted.push("900".into());
        inbox.update(&second).await.unwrap();
        drop((inbox, store));
        let store = FileStore::open(dir.path()).unwrap();
        let inbox = FileInbox::open(&store).unwrap();
        assert_eq!(
            inbox.pending("telegram").await.unwrap(),
            vec![first.clone(), second]
        );
        assert_eq!(inbox.accept(&first).await.unwrap(), Accepted::Duplicate);
    }

    #[tokio::test]
    async fn a_corrupt_or_newer_entry_is_refused_and_left_in_place() {
        let (dir, store) = store();
        let inbox = FileInbox::open(&store).unwrap();
        inbox
            .accept(&conformance::entry("telegram", "1", 1))
            .await
            .unwrap();
        let path = inbox
            .root()
            .join(crate::hex::encode("telegram"))
            .join(file_name("1"));
        drop((inbox, store));
        fs::write(&path, b"{not json").unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        assert!(matches!(
            FileInbox::open(&store),
            Err(InboxError::Corrupt { .. })
        ));
        let newer = br#"{"schema_version": 99, "id": "1"}"#;
        fs::write(&path, newer).unwrap();
        assert!(matches!(
            FileInbox::open(&store),
            Err(InboxError::Schema { found: 99, .. })
        ));
        assert_eq!(fs::read(&path).unwrap(), newer);
    }

    #[tokio::test]
    async fn temporaries_a_crash_left_are_removed_at_open() {
        let (dir, store) = store();
        let inbox = FileInbox::open(&store).unwrap();
        inbox
            .accept(&conformance::entry("telegram", "1", 1))
            .await
            .unwrap();
        let channel = inbox.root().join(crate::hex::encode("telegram"));
        fs::write(channel.join("0123.tmp"), b"half").unwrap();
        drop((inbox, store));
        let store = FileStore::open(dir.path()).unwrap();
        let inbox = FileInbox::open(&store).unwrap();
        assert!(!channel.join("0123.tmp").exists());
        assert_eq!(inbox.pending("telegram").await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn racing_deliveries_of_one_message_store_it_once() {
        let (_dir, store) = store();
        let inbox = FileInbox::open(&store).unwrap();
        let entry = conformance::entry("slack", "C1:1.5", 1);
        let tries = (0..16).map(|_| {
            let (inbox, entry) = (inbox.clone(), entry.clone());
            tokio::spawn(async move { inbox.accept(&entry).await.unwrap() })
        });
        let answers = futures::future::join_all(tries).await;
        let new = answers
            .into_iter()
            .filter(|a| *a.as_ref().unwrap() == Accepted::New)
            .count();
        assert_eq!(new, 1);
        assert_eq!(inbox.pending("slack").await.unwrap(), vec![entry]);
    }
}
