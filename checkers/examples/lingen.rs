//! Writes a generated keyed cas-register history as JSON Lines.
//!
//! `cargo run --release --example lingen -- OUT [EVENTS] [--corrupt] [--seed N]`

use splitbrain_checkers::history::write::write_json_lines;
use splitbrain_checkers::linearizability::generate_keyed_cas_history;
use std::io::BufWriter;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let Some(out) = positional.first() else {
        eprintln!("usage: lingen OUT [EVENTS] [--corrupt] [--seed N]");
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
    let corrupt = args.iter().any(|a| a == "--corrupt");
    let history = generate_keyed_cas_history(seed, events, 100, 50, 0.05, corrupt);
    let file = match std::fs::File::create(out.as_str()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot create {out}: {e}");
            std::process::exit(1);
        }
    };
    let mut w = BufWriter::new(file);
    if let Err(e) = write_json_lines(&mut w, history.ops()) {
        eprintln!("cannot write {out}: {e}");
        std::process::exit(1);
    }
    println!(
        "wrote {} ops ({} client operations) to {out}",
        history.len(),
        history.pairs().len()
    );
}
