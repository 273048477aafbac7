//! The guard of a crate whose integration tests are one binary (`tests/main.rs` naming each
//! file beside it as a module, `autotests = false`): a file it does not name would never
//! run, so the guard fails for it. Included by each such `tests/main.rs` with `#[path]`.

use std::path::Path;

/// Panics naming every `tests/*.rs` file of the crate at `manifest_dir` that
/// `tests/main.rs` does not declare as `mod NAME;`.
pub fn assert_every_test_file_is_a_module(manifest_dir: &str) {
    let dir = Path::new(manifest_dir).join("tests");
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
