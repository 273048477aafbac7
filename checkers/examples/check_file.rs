//! Reads a history and checks it for linearizability against a model, printing how long
//! reading and checking took: the checker's half of `splitbrain check FILE --model M`,
//! for profiling without the harness.
//!
//! `cargo run --release -p splitbrain-checkers --example check_file -- FILE MODEL [--no-split] [--observed] [--materialize] [--repeat N]`

use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::linearizability::{
    FailedCas, LinearizabilityChecker, LinearizabilityOptions,
};
use splitbrain_checkers::Checker;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(model)) = (args.get(1), args.get(2)) else {
        eprintln!(
            "usage: check_file FILE MODEL [--no-split] [--observed] [--materialize] [--repeat N]"
        );
        std::process::exit(2);
    };
    let split = !args.iter().any(|a| a == "--no-split");
    let observed = args.iter().any(|a| a == "--observed");
    // Materializes every pair before checking, as the checker did before it read pairs
    // one by one: the "before" figure of the memory comparison.
    let materialize = args.iter().any(|a| a == "--materialize");
    let repeat: usize = args
        .iter()
        .position(|a| a == "--repeat")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let options = LinearizabilityOptions {
        split_by_key: split,
        failed_cas: FailedCas::observed_if(observed),
        ..Default::default()
    };
    let checker = match LinearizabilityChecker::new(model, options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    for _ in 0..repeat {
        let t = Instant::now();
        let history = match read_path(std::path::Path::new(path)) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        };
        if materialize {
            let _ = history.pairs().len();
        }
        let read = t.elapsed();
        let t = Instant::now();
        let r = checker.check(&history);
        let check = t.elapsed();
        println!(
            "read {:.2} ms, check {:.2} ms: {} ({})",
            read.as_secs_f64() * 1e3,
            check.as_secs_f64() * 1e3,
            r.valid.label(),
            r.explanation
        );
    }
}
