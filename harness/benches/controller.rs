//! Criterion benchmark of the controller's own ceiling: ops recorded per second with an
//! in-process no-op client (no network). `splitbrain bench controller` prints the same
//! figure for a longer run.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

fn controller(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("h.jsonl");
    // Calibrate how many ops a 200 ms run records, then report throughput per op.
    let probe = rt
        .block_on(splitbrain::bench::controller::controller_throughput(
            64,
            Duration::from_millis(200),
            &path,
        ))
        .expect("probe");
    let mut group = c.benchmark_group("controller");
    group.throughput(Throughput::Elements(probe.ops.max(1)));
    group.sample_size(10);
    group.bench_function("64 processes, 200 ms, no-op client", |b| {
        b.iter(|| {
            rt.block_on(splitbrain::bench::controller::controller_throughput(
                64,
                Duration::from_millis(200),
                &path,
            ))
            .expect("run")
        })
    });
    group.finish();
}

criterion_group!(benches, controller);
criterion_main!(benches);
