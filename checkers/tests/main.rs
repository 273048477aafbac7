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

#[path = "../../testing/test_binary.rs"]
mod test_binary;

#[test]
fn every_test_file_is_a_module_here() {
    test_binary::assert_every_test_file_is_a_module(env!("CARGO_MANIFEST_DIR"));
}
