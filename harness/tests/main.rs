//! The harness crate's integration tests, one binary: each file beside this one is a
//! module of it (one link instead of one per file). `autotests = false` in Cargo.toml, so a
//! new file must be named here; `every_test_file_is_a_module_here` fails until it is.

mod support;

mod bayou;
mod cli;
mod ddp;
mod etcd;
mod exec;
mod import_cycles;
mod kv_hedge;
mod live_view;
mod maelstrom;
mod mariadb;
mod online;
mod postgres;
mod postgres_replicas;
mod redis;
mod remote;
mod report;
mod schedule_shrink;
mod suite;
mod target_defaults;
mod txn;

#[path = "../../testing/test_binary.rs"]
mod test_binary;

#[test]
fn every_test_file_is_a_module_here() {
    test_binary::assert_every_test_file_is_a_module(env!("CARGO_MANIFEST_DIR"));
}
