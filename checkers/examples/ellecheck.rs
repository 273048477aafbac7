//! Checks a transactional history file with the Elle-style checker and prints the
//! verdict with timings, for measuring the whole process with `/usr/bin/time -v`.
//!
//! Usage: `ellecheck <history> <list-append|rw-register> [--consistency-model M] [--json FILE]`
//!
//! `--json FILE` also writes the whole result as JSON, without its timings
//! (`elapsed-ms`, `phase-ms`), so the results of two builds can be diffed.

use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::Checker;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: ellecheck <history> <list-append|rw-register> [--consistency-model M] [--json FILE]";
    let (Some(path), Some(workload)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let workload = match workload.as_str() {
        "list-append" => ElleWorkload::ListAppend,
        "rw-register" => ElleWorkload::RwRegister,
        other => {
            eprintln!("unknown workload {other}; {usage}");
            std::process::exit(2);
        }
    };
    let mut options = ElleOptions::default();
    if let Some(i) = args.iter().position(|a| a == "--consistency-model") {
        match args.get(i + 1) {
            Some(m) => options.consistency_model = m.clone(),
            None => {
                eprintln!("{usage}");
                std::process::exit(2);
            }
        }
    }
    let checker = match ElleChecker::new(workload, options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let history = match read_path(&PathBuf::from(path)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(4);
        }
    };
    let parse = t0.elapsed();
    let t1 = Instant::now();
    let result = checker.check(&history);
    let check = t1.elapsed();
    println!("{}: {}", result.checker, result.valid.label());
    if !result.anomaly_types.is_empty() {
        println!("anomaly types: {}", result.anomaly_types.join(" "));
        println!(
            "not: {}  also not: {}",
            result.not.join(" "),
            result.also_not.join(" ")
        );
    }
    println!("{}", result.explanation);
    println!("phases (ms): {}", result.details["phase-ms"]);
    if let Some(file) = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
    {
        let mut r = result.clone();
        if let Some(d) = r.details.as_object_mut() {
            d.remove("elapsed-ms");
            d.remove("phase-ms");
        }
        let text = serde_json::to_string_pretty(&r).unwrap_or_default();
        if let Err(e) = std::fs::write(file, text + "\n") {
            eprintln!("writing {file}: {e}");
        }
    }
    println!(
        "{} ops, parse {:.2} s, check {:.2} s",
        history.len(),
        parse.as_secs_f64(),
        check.as_secs_f64()
    );
    std::process::exit(result.valid.exit_code());
}
