//! Writes a generated benchmark history as JSON Lines, streaming (never held in memory):
//! the inputs of the 1M and 10M-event benches.
//!
//! ```text
//! gen_history cas PATH EVENTS [--corrupt]     keyed cas registers (100 keys, 50 processes, 5% info), seed 1
//! gen_history list-append PATH TXNS [--corrupt] list-append transactions (1000 keys, 30 processes), seed 42;
//!                                             corrupt: one stale read past the middle
//! ```

use splitbrain_checkers::elle::bench::{write_list_append_history, GenConfig};
use splitbrain_checkers::linearizability::write_keyed_cas_history;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kind), Some(path), Some(n)) = (
        args.get(1),
        args.get(2),
        args.get(3).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: gen_history cas|list-append PATH COUNT [--corrupt]");
        std::process::exit(2);
    };
    let corrupt = args.iter().any(|a| a == "--corrupt");
    let path = Path::new(path);
    let written = match kind.as_str() {
        "cas" => {
            println!("seed 1: {n} events, 100 keys, 50 processes, 5% info, corrupt {corrupt}");
            write_keyed_cas_history(path, 1, n, 100, 50, 0.05, corrupt)
        }
        "list-append" => {
            println!("seed 42: {n} transactions, 1000 keys, 30 processes, corrupt {corrupt}");
            let mut cfg = GenConfig::new(42, n, 1000, 30);
            cfg.stale_read = corrupt;
            write_list_append_history(path, &cfg)
        }
        other => {
            eprintln!("unknown kind {other}: cas or list-append");
            std::process::exit(2);
        }
    };
    if let Err(e) = written {
        eprintln!("writing {}: {e}", path.display());
        std::process::exit(1);
    }
}
