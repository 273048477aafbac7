//! Writes a generated strict-serializable list-append history as JSON Lines, or prints
//! the benchmark table.
//!
//! Usage: `elle_gen <path> <txns> [processes] [keys]` or `elle_gen --table`

use splitbrain_checkers::elle::bench::{run_table, write_list_append_history, GenConfig};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--table") {
        print!("{}", run_table());
        return;
    }
    let parse =
        |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let Some(path) = args.first() else {
        eprintln!("usage: elle_gen <path> <txns> [processes] [keys] | elle_gen --table");
        std::process::exit(2);
    };
    let cfg = GenConfig::new(42, parse(1, 10_000), parse(3, 1000), parse(2, 30));
    if let Err(e) = write_list_append_history(&PathBuf::from(path), &cfg) {
        eprintln!("{e}");
        std::process::exit(4);
    }
}
