use super::*;

fn log_of(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(LOG_FILE)).unwrap()
}

#[test]
fn a_debt_is_written_log_first_in_one_run_and_only_once() {
    let root = tempfile::tempdir().unwrap();
    let behind = Behind::new(root.path());
    let session = Path::new("users/u/sessions/s");
    let dir = root.path().join(session);
    behind.owe(
        &session.join(LOG_FILE),
        Owed::Log {
            at: 0,
            bytes: b"a\n".to_vec(),
        },
    );
    behind.owe(
        &session.join(HEAD_FILE),
        Owed::Head(b"{\"old\":1}".to_vec()),
    );
    let total = behind.owe(
        &session.join(LOG_FILE),
        Owed::Log {
            at: 2,
            bytes: b"b\n".to_vec(),
        },
    );
    behind.owe(
        &session.join(HEAD_FILE),
        Owed::Head(b"{\"new\":1}".to_vec()),
    );
    assert!(total >= 4);
    assert!(!dir.exists(), "nothing is written before a settle");
    assert!(behind.owes_under(&root.path().join("users/u")));
    behind.settle(&dir).unwrap();
    assert_eq!(log_of(&dir), b"a\nb\n");
    assert_eq!(std::fs::read(dir.join(HEAD_FILE)).unwrap(), b"{\"new\":1}");
    assert_eq!(behind.owing(), (0, None));
    // Settled debts are gone: settling again writes nothing.
    std::fs::write(dir.join(HEAD_FILE), b"kept").unwrap();
    behind.settle_all().unwrap();
    assert_eq!(std::fs::read(dir.join(HEAD_FILE)).unwrap(), b"kept");
}

#[test]
fn a_run_of_more_appends_than_one_vectored_write_takes_is_written_whole_and_in_order() {
    let root = tempfile::tempdir().unwrap();
    let behind = Behind::new(root.path());
    let session = Path::new("users/u/sessions/s");
    let log = session.join(LOG_FILE);
    let mut expected = Vec::new();
    for n in 0..3_000 {
        let bytes = format!("{n}\n").into_bytes();
        let at = expected.len() as u64;
        expected.extend_from_slice(&bytes);
        behind.owe(&log, Owed::Log { at, bytes });
    }
    // A gap starts a second run, written at its own offset.
    let gap = expected.len() as u64 + 3;
    behind.owe(
        &log,
        Owed::Log {
            at: gap,
            bytes: b"end\n".to_vec(),
        },
    );
    assert_eq!(behind.owing().0, expected.len() + 4);
    behind.settle_all().unwrap();
    expected.extend_from_slice(b"\0\0\0end\n");
    assert_eq!(log_of(&root.path().join(session)), expected);
}

#[test]
fn a_log_changed_behind_the_store_keeps_its_debt_and_says_so() {
    let root = tempfile::tempdir().unwrap();
    let behind = Behind::new(root.path());
    let session = Path::new("users/u/sessions/s");
    let dir = root.path().join(session);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(LOG_FILE), b"a\n").unwrap();
    behind.owe(
        &session.join(LOG_FILE),
        Owed::Log {
            at: 5,
            bytes: b"c\n".to_vec(),
        },
    );
    let error = behind.settle(&dir).unwrap_err().to_string();
    assert!(error.contains("acknowledged events are missing"), "{error}");
    assert_eq!(log_of(&dir), b"a\n", "nothing written");
    assert_eq!(behind.owing().0, 2, "the debt is kept");
    assert!(
        behind.settle_all().is_err(),
        "and every later settle says so"
    );
}

#[test]
fn bytes_past_the_acknowledged_end_are_cut_off_and_kept_beside_the_log() {
    let root = tempfile::tempdir().unwrap();
    let behind = Behind::new(root.path());
    let session = Path::new("users/u/sessions/s");
    let dir = root.path().join(session);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(LOG_FILE), b"a\nleft").unwrap();
    let log = session.join(LOG_FILE);
    let at = 2;
    let bytes = b"b\n".to_vec();
    behind.owe(&log, Owed::Log { at, bytes });
    behind.settle(&dir).unwrap();
    assert_eq!(log_of(&dir), b"a\nb\n");
    assert_eq!(std::fs::read(dir.join("log.jsonl.cut-2")).unwrap(), b"left");
}

#[test]
fn discarding_a_removed_folder_drops_its_debts_and_no_other() {
    let root = tempfile::tempdir().unwrap();
    let behind = Behind::new(root.path());
    for session in [
        "users/u/sessions/a",
        "users/u/sessions/b",
        "users/v/sessions/a",
    ] {
        let log = Path::new(session).join(LOG_FILE);
        behind.owe(
            &log,
            Owed::Log {
                at: 0,
                bytes: b"x\n".to_vec(),
            },
        );
    }
    behind.discard_under(&root.path().join("users/u"));
    assert_eq!(behind.owing().0, 2);
    behind.settle_all().unwrap();
    assert!(!root.path().join("users/u").exists());
    assert_eq!(log_of(&root.path().join("users/v/sessions/a")), b"x\n");
}
