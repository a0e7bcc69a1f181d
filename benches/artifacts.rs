//! Artifact benchmarks: saving and loading one 1 MiB version on the file artifact store, next
//! to the raw cost of the medium in the same run — writing the same bytes to a new file and
//! fsyncing it, and reading them back (see docs/BENCHMARKS.md, section "Artifacts").
//!
//! Run: `cargo bench --bench artifacts -- --warm-up-time 1 --measurement-time 5`
#![allow(missing_docs)]

use std::fs::File;
use std::io::{Read, Write};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tokio::runtime::Runtime;
use turnstile::artifact::ArtifactScope;
use turnstile::backend::FileArtifactStore;
use turnstile::{ArtifactStore, SessionKey};

/// The size the issue names: 1 MiB.
const SIZE: usize = 1024 * 1024;

fn bytes() -> Vec<u8> {
    (0..SIZE).map(|i| (i % 251) as u8).collect()
}

fn save_and_load(c: &mut Criterion) {
    let rt = Runtime::new().expect("tokio");
    let folder = tempfile::tempdir().expect("temporary folder");
    let data = bytes();
    let mut group = c.benchmark_group("artifact_1mib");
    group.throughput(Throughput::Bytes(SIZE as u64));
    group.sample_size(30);

    // Raw medium: a new file, the bytes, fsync — what any durable write of them costs.
    let raw = folder.path().join("raw");
    std::fs::create_dir_all(&raw).expect("folder");
    let mut n = 0u64;
    group.bench_function("raw_write_fsync", |b| {
        b.iter(|| {
            n += 1;
            let mut file = File::create(raw.join(format!("{n}.bin"))).expect("create");
            file.write_all(&data).expect("write");
            file.sync_all().expect("fsync");
        })
    });
    let raw_file = raw.join("1.bin");
    group.bench_function("raw_read", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(SIZE);
            File::open(&raw_file)
                .expect("open")
                .read_to_end(&mut out)
                .expect("read");
            out
        })
    });

    let store = FileArtifactStore::open(folder.path().join("store")).expect("open");
    // Each save is a new name in one session (version 1 in a folder of its own), so that no
    // folder's listing grows with the number of iterations.
    let scope = ArtifactScope::Session(SessionKey::new("bench", "s1").unwrap());
    let mut s = 0u64;
    group.bench_function("file_store_save", |b| {
        b.iter(|| {
            s += 1;
            rt.block_on(store.save(
                &scope,
                &format!("report-{s}.bin"),
                &data,
                "application/octet-stream",
            ))
            .expect("save")
        })
    });
    group.bench_function("file_store_load", |b| {
        b.iter(|| {
            rt.block_on(store.load(&scope, "report-1.bin", None))
                .expect("load")
                .expect("saved")
        })
    });
    group.finish();
}

criterion_group!(benches, save_and_load);
criterion_main!(benches);
