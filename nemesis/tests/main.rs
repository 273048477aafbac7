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
