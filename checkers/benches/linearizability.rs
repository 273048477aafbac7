//! Criterion benchmarks of the linearizability checker: Porcupine's etcd and kv files
//! (skipped when ../shared/data is absent) and a generated keyed cas-register history.
//! `splitbrain bench linearizable` prints the full table (`linearizability::bench`).

use criterion::{criterion_group, criterion_main, Criterion};
use splitbrain_checkers::history::{read::read_path, History};
use splitbrain_checkers::linearizability::{
    generate_keyed_cas_history, FailedCas, LinearizabilityChecker, LinearizabilityOptions,
};
use splitbrain_checkers::{Checker, Validity};
use std::path::PathBuf;

fn data() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/data/porcupine"
    ))
}

fn checker(model: &str, split: bool, observed: bool) -> Option<LinearizabilityChecker> {
    let options = LinearizabilityOptions {
        split_by_key: split,
        failed_cas: FailedCas::observed_if(observed),
        ..Default::default()
    };
    LinearizabilityChecker::new(model, options).ok()
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("linearizability");
    group.sample_size(10);
    let etcd: Vec<History> = (0..=102)
        .filter_map(|i| read_path(&data().join(format!("jepsen/etcd_{i:03}.log"))).ok())
        .filter(|h| !h.is_empty())
        .collect();
    if etcd.is_empty() {
        println!("SKIP etcd benchmarks: {} not found", data().display());
    } else if let Some(cas) = checker("cas-register", true, true) {
        group.bench_function("etcd all files", |b| {
            b.iter(|| {
                etcd.iter()
                    .filter(|h| cas.check(h).valid == Validity::Invalid)
                    .count()
            })
        });
    }
    for (file, split) in [
        ("c50-ok.txt", true),
        ("c10-ok.txt", false),
        ("c50-bad.txt", false),
    ] {
        let Ok(h) = read_path(&data().join("kv").join(file)) else {
            println!("SKIP {file}: not found");
            continue;
        };
        if let Some(kv) = checker("kv", split, false) {
            let name = format!("{file} {}", if split { "split" } else { "unsplit" });
            group.bench_function(name, |b| b.iter(|| kv.check(&h).valid));
        }
    }
    for corrupt in [false, true] {
        let h = generate_keyed_cas_history(1, 100_000, 100, 50, 0.05, corrupt);
        if let Some(cas) = checker("cas-register", true, false) {
            let name = format!(
                "generated 100k events{}",
                if corrupt { " corrupt" } else { "" }
            );
            group.bench_function(name, |b| b.iter(|| cas.check(&h).valid));
        }
    }
    group.finish();
}

criterion_group!(linearizability, benches);
criterion_main!(linearizability);
