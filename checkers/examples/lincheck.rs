//! Checks one history file for linearizability and prints the verdict and timing.
//!
//! `cargo run --release --example lincheck -- PATH MODEL [--no-split] [--failed-cas-observed] [--time-limit=SECS]`

use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::linearizability::{
    FailedCas, LinearizabilityChecker, LinearizabilityOptions,
};
use splitbrain_checkers::Checker;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let (Some(path), Some(model)) = (positional.first(), positional.get(1)) else {
        eprintln!(
            "usage: lincheck PATH MODEL [--no-split] [--failed-cas-observed] [--time-limit=SECS]"
        );
        std::process::exit(2);
    };
    let options = LinearizabilityOptions {
        split_by_key: !args.iter().any(|a| a == "--no-split"),
        failed_cas: FailedCas::observed_if(args.iter().any(|a| a == "--failed-cas-observed")),
        bounds: splitbrain_checkers::CheckBounds {
            time_limit: args
                .iter()
                .find_map(|a| a.strip_prefix("--time-limit="))
                .and_then(|s| s.parse::<f64>().ok())
                .map(std::time::Duration::from_secs_f64),
            max_memory: None,
        },
    };
    let checker = match LinearizabilityChecker::new(model, options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let history = match read_path(std::path::Path::new(path.as_str())) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let read = t0.elapsed();
    let t1 = Instant::now();
    let result = checker.check(&history);
    let check = t1.elapsed();
    println!("{}: {}", result.valid.label(), result.explanation);
    println!(
        "{} ops; read {:.3} s, check {:.3} s",
        history.pairs().len(),
        read.as_secs_f64(),
        check.as_secs_f64()
    );
    std::process::exit(result.valid.exit_code());
}
