//! The nemesis crate's integration tests, one binary: each file beside this one is a
//! module of it (one link instead of one per file). `autotests = false` in Cargo.toml, so a
//! new file must be named here; `every_test_file_is_a_module_here` fails until it is.

mod faketime;
mod guided;
mod netns;
mod process;
mod proxy;
mod schedule;
#[path = "../../testing/skip.rs"]
mod skip;

#[path = "../../testing/test_binary.rs"]
mod test_binary;

#[test]
fn every_test_file_is_a_module_here() {
    test_binary::assert_every_test_file_is_a_module(env!("CARGO_MANIFEST_DIR"));
}
