//! Criterion benchmark of the Elle list-append checker at strict-serializable.
//! `splitbrain bench elle` (elle::bench::run_table) measures parse + check up to 1M.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use splitbrain_checkers::elle::bench::generate_list_append_history;
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::Checker;

fn check_list_append(c: &mut Criterion) {
    let checker = match ElleChecker::new(ElleWorkload::ListAppend, ElleOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("default model must be known: {e}"),
    };
    let mut group = c.benchmark_group("elle-list-append-strict-serializable");
    group.sample_size(10);
    for (txns, processes) in [
        (10_000usize, 30usize),
        (100_000, 10),
        (100_000, 30),
        (100_000, 100),
    ] {
        let history = generate_list_append_history(7, txns, 1000, processes);
        group.throughput(Throughput::Elements(txns as u64));
        group.bench_with_input(
            BenchmarkId::new(format!("{processes}-processes"), txns),
            &history,
            |b, h| b.iter(|| checker.check(h)),
        );
    }
    group.finish();
}

criterion_group!(benches, check_list_append);
criterion_main!(benches);
