//! The set benchmark's generator makes histories every eventual checker accepts (it is
//! correct by construction), with stale reads; the full table runs on demand:
//! `cargo test --release -p splitbrain-checkers --test eventual_bench -- --ignored --nocapture`.

use splitbrain_checkers::eventual::bench::{generate, run_table, SetGenConfig};
use splitbrain_checkers::eventual::{
    CommittedPrefixChecker, ConvergenceChecker, EventualDataType, SessionGuaranteesChecker,
    SetFullChecker,
};
use splitbrain_checkers::{Checker, Validity};

fn small(seed: u64) -> SetGenConfig {
    SetGenConfig {
        seed,
        ops: 20_000,
        replicas: 5,
        keys: 20,
        elements: 2_000,
        processes: 10,
        max_lag_ms: 50,
        final_rounds: 2,
    }
}

#[test]
fn generated_histories_pass_every_checker_and_have_stale_reads() {
    for seed in 0..3 {
        let h = generate(&small(seed));
        assert!(h.len() >= 19_000, "{} ops", h.len());
        let full = SetFullChecker.check(&h);
        assert_eq!(full.valid, Validity::Valid, "{}", full.explanation);
        assert!(full.details["stale_reads"].as_u64().unwrap_or(0) > 0);
        assert_eq!(full.details["elements"], 2_000);
        for c in [
            &ConvergenceChecker::new(EventualDataType::Set) as &dyn Checker,
            &SessionGuaranteesChecker::new(EventualDataType::Set),
            &CommittedPrefixChecker,
        ] {
            let r = c.check(&h);
            assert_eq!(r.valid, Validity::Valid, "{}: {}", c.name(), r.explanation);
        }
    }
}

#[test]
#[ignore = "the 1,000,000-op benchmark; run in release with --ignored --nocapture"]
fn set_benchmark_table() {
    let table = run_table();
    println!("{table}");
    assert!(table.contains("set-full"), "{table}");
}
