//! Prints the linearizability benchmark table (what `splitbrain bench linearizable` shows).
//!
//! `cargo run --release --example linbench -- [DATA_DIR]`

fn main() {
    let dir = std::env::args().nth(1).map(std::path::PathBuf::from);
    print!(
        "{}",
        splitbrain_checkers::linearizability::bench::run_table(dir.as_deref())
    );
}
