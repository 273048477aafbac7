//! Writes a generated keyed cas-register history as JSON Lines.
//!
//! `cargo run --release --example lingen -- OUT [EVENTS] [--corrupt] [--seed N] [--info PERCENT]`
//!
//! EVENTS counts generator steps (an invoke, a linearization point and a completion per
//! op), so a history holds about EVENTS / 3 ops; `--info` (default 5) is the percentage
//! of ops ending `info`.

use splitbrain_checkers::linearizability::write_keyed_cas_history;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let Some(out) = positional.first() else {
        eprintln!("usage: lingen OUT [EVENTS] [--corrupt] [--seed N] [--info PERCENT]");
        std::process::exit(2);
    };
    let events = positional
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let seed = args
        .iter()
        .position(|a| a == "--seed")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let info_percent: f64 = args
        .iter()
        .position(|a| a == "--info")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let corrupt = args.iter().any(|a| a == "--corrupt");
    // Streamed: a 10M-op history is never held in memory.
    let path = std::path::Path::new(out.as_str());
    let written =
        write_keyed_cas_history(path, seed, events, 100, 50, info_percent / 100.0, corrupt);
    if let Err(e) = written {
        eprintln!("cannot write {out}: {e}");
        std::process::exit(1);
    }
    println!("wrote {events} generator steps ({info_percent} % info) to {out}");
}
