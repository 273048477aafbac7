//! The checkers crate's integration tests, one binary: each file beside this one is a
//! module of it (one link instead of one per file). `autotests = false` in Cargo.toml, so a
//! new file must be named here; `every_test_file_is_a_module_here` fails until it is.

mod eventual_support;
#[path = "../../testing/skip.rs"]
mod skip;
mod support;

mod bank;
mod ddp;
mod ddp_elastic;
mod ddp_oracle;
mod ddp_recorded;
mod elle_anomalies;
mod elle_cycle_exists;
mod elle_inference;
mod elle_lazy;
mod elle_props;
mod eventual_bench;
mod eventual_booking;
mod eventual_convergence;
mod eventual_oracle;
mod eventual_prefix;
mod eventual_session;
mod eventual_set_full;
mod foreign_shapes;
mod jepsen_checkers;
mod kafka;
mod linearizability_anomalies;
mod linearizability_data;
mod linearizability_oracle;
mod no_valid_without_observation;
mod readers;
mod shrink;
mod txn_recorded;

#[test]
fn every_test_file_is_a_module_here() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(module) = name.strip_suffix(".rs") {
            if module != "main" && !main.contains(&format!("\nmod {module};\n")) {
                missing.push(name);
            }
        }
    }
    assert!(missing.is_empty(), "test files no binary runs: {missing:?}");
}
