use super::*;

#[test]
fn entries_read_back_as_written_in_order() {
    let first = [
        append("users/a/log.jsonl", 0, b"{\"x\":1}\n"),
        append("b", 7, b""),
    ];
    let second = [
        Entry::Remove {
            path: "users/a".into(),
        },
        Entry::Replace {
            path: "users/b/head.json".into(),
            bytes: b"{\"whole\":true}".to_vec(),
        },
        append("users/a/log.jsonl", 0, b"line with\nnewlines\n"),
    ];
    let bytes = segment(&[&first, &second]);
    let read = read_segment(&bytes, true).unwrap();
    assert_eq!(read.entries, [&first[..], &second[..]].concat());
    assert_eq!(read.valid_len, bytes.len() as u64);
}

#[test]
fn a_batch_framed_from_pieces_is_its_magic_length_checksum_then_the_pieces_in_order() {
    let pieces: [&[u8]; 4] = [b"1234", b"", b"5678", b"9"];
    let mut framed = b"kept".to_vec();
    frame_batch(pieces, &mut framed);
    assert_eq!(&framed[..4], b"kept", "what the buffer held stays in front");
    let batch = &framed[4..];
    assert_eq!(&batch[..4], BATCH_MAGIC);
    assert_eq!(batch[4..8], 9u32.to_le_bytes());
    // CRC-32 (IEEE) of "123456789" is the algorithm's published check value.
    assert_eq!(batch[8..12], 0xCBF4_3926u32.to_le_bytes());
    assert_eq!(&batch[BATCH_FRAME..], b"123456789");
}

#[test]
fn an_unfinished_last_batch_is_cut_and_nothing_of_it_is_read() {
    let first = [append("a", 0, b"one\n")];
    let second = [append("a", 4, b"two\n")];
    let whole = segment(&[&first, &second]);
    let first_len = segment(&[&first]).len();
    for cut in first_len..whole.len() {
        let read = read_segment(&whole[..cut], true).unwrap();
        assert_eq!(read.entries, first, "cut at {cut}");
        assert_eq!(read.valid_len, first_len as u64);
    }
    // Not in a segment a newer one follows: that one was closed after its last flush.
    assert!(matches!(
        read_segment(&whole[..whole.len() - 1], false),
        Err(ReadError::Damaged(_))
    ));
    // Garbage in place of the last batch (a torn write): also cut.
    let mut torn = whole.clone();
    for b in &mut torn[first_len + 5..] {
        *b = 0;
    }
    assert_eq!(read_segment(&torn, true).unwrap().entries, first);
}

#[test]
fn a_damaged_batch_followed_by_an_intact_one_is_damage_not_a_crash() {
    let batches: [&[Entry]; 3] = [
        &[append("a", 0, b"one\n")],
        &[append("a", 4, b"two\n")],
        &[append("a", 8, b"three\n")],
    ];
    let mut bytes = segment(&batches);
    let second_at = segment(&batches[..1]).len();
    bytes[second_at + BATCH_FRAME + 3] ^= 0x20;
    match read_segment(&bytes, true) {
        Err(ReadError::Damaged(detail)) => assert!(detail.contains("intact batch follows")),
        other => panic!("expected damage, got {other:?}"),
    }
}

#[test]
fn zeroed_room_after_the_batches_is_no_damage_in_any_segment() {
    let batches: [&[Entry]; 2] = [&[append("a", 0, b"one\n")], &[append("a", 4, b"two\n")]];
    let whole = segment(&batches);
    let mut roomy = whole.clone();
    roomy.resize(whole.len() + 4096, 0);
    for last in [true, false] {
        let read = read_segment(&roomy, last).unwrap();
        assert_eq!(read.entries, batches.concat(), "last: {last}");
        assert_eq!(read.valid_len, whole.len() as u64);
        assert!(!read.unfinished);
    }
    // An unfinished batch written over the room (its payload reached the disk, its frame
    // did not) is still cut from the last segment only.
    let first_len = segment(&batches[..1]).len();
    let mut torn = roomy.clone();
    torn[first_len..first_len + BATCH_FRAME].fill(0);
    let read = read_segment(&torn, true).unwrap();
    assert_eq!(read.entries, batches[0]);
    assert!(read.unfinished);
    assert!(matches!(
        read_segment(&torn, false),
        Err(ReadError::Damaged(_))
    ));
}

#[test]
fn a_batch_cut_short_anywhere_over_the_room_is_cut_and_the_batches_before_it_kept() {
    // A crash part-way through writing the second batch over zeroed room: whatever prefix
    // of it reached the file, the zeros after it are still there.
    let batches: [&[Entry]; 2] = [
        &[append("a", 0, b"one\n")],
        &[append("a", 4, b"two\n"), append("b", 0, b"three\n")],
    ];
    let whole = segment(&batches);
    let first_len = segment(&batches[..1]).len();
    let room = whole.len() + 512;
    for cut in first_len..whole.len() {
        let mut left = whole[..cut].to_vec();
        left.resize(room, 0);
        let read = read_segment(&left, true).unwrap();
        assert_eq!(read.entries, batches[0], "cut at {cut}");
        assert_eq!(read.valid_len, first_len as u64, "cut at {cut}");
        // Nothing of the second batch written reads as room, not as an unfinished batch.
        assert_eq!(read.unfinished, cut > first_len, "cut at {cut}");
    }
    let mut complete = whole.clone();
    complete.resize(room, 0);
    assert_eq!(
        read_segment(&complete, true).unwrap().entries,
        batches.concat()
    );
}

#[test]
fn a_format_1_segment_still_reads_but_has_no_room_after_its_batches() {
    let batch = [append("a", 0, b"one\n")];
    let mut old = SEGMENT_HEADER_V1.to_vec();
    let mut payload = Vec::new();
    batch[0].encode(&mut payload).unwrap();
    frame_batch([payload.as_slice()], &mut old);
    let read = read_segment(&old, false).unwrap();
    assert_eq!(read.entries, batch);
    assert!(!read.unfinished);
    // Its writer never left zeros there: they are a damaged batch, as they always were.
    old.resize(old.len() + 64, 0);
    assert!(matches!(
        read_segment(&old, false),
        Err(ReadError::Damaged(_))
    ));
    assert!(read_segment(&old, true).unwrap().unfinished);
    for partial in [&b"turnstile-journal 1"[..], b"turnstile-journal 2"] {
        assert_eq!(read_segment(partial, false).unwrap().entries, []);
    }
}

#[test]
fn a_newer_segment_is_refused_and_a_foreign_file_is_damage() {
    assert_eq!(
        read_segment(b"turnstile-journal 7\nwhatever", true),
        Err(ReadError::Newer(7))
    );
    assert!(matches!(
        read_segment(b"something else", true),
        Err(ReadError::Damaged(_))
    ));
    // Only part of the header: a crash as the segment was made; nothing in it.
    for partial in [&b""[..], b"turnstile-jou"] {
        let read = read_segment(partial, true).unwrap();
        assert!(read.entries.is_empty());
        assert_eq!(read.valid_len, 0);
    }
}

#[test]
fn paths_outside_the_root_are_never_written_or_read() {
    for bad in ["/etc/passwd", "../x", "a/../../x", "./a", ""] {
        assert!(
            append(bad, 0, b"").encode(&mut Vec::new()).is_err(),
            "{bad}"
        );
    }
    let mut payload = br#"{"op":"remove","path":"../../etc"}"#.to_vec();
    payload.push(b'\n');
    let mut bytes = SEGMENT_HEADER.to_vec();
    frame_batch([payload.as_slice()], &mut bytes);
    match read_segment(&bytes, true) {
        Err(ReadError::Damaged(detail)) => assert!(detail.contains("not a plain path")),
        other => panic!("expected damage, got {other:?}"),
    }
}

#[test]
fn an_append_whose_length_runs_past_its_batch_is_damage() {
    let mut payload = br#"{"op":"append","path":"a","at":0,"len":99}"#.to_vec();
    payload.extend_from_slice(b"\nshort");
    let mut bytes = SEGMENT_HEADER.to_vec();
    frame_batch([payload.as_slice()], &mut bytes);
    assert!(matches!(
        read_segment(&bytes, true),
        Err(ReadError::Damaged(_))
    ));
}
