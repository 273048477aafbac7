//! Finding the programs a run starts: a target's node binary and the third-party
//! programs a target needs.

use crate::systems::Target;
use std::path::PathBuf;

/// The program `name` beside this executable, or one level up (test binaries live in
/// `target/<profile>/deps`): where the workspace's own node binaries are.
pub fn beside_splitbrain(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let found = exe
        .parent()
        .into_iter()
        .flat_map(|d| [Some(d), d.parent()])
        .flatten()
        .map(|dir| dir.join(name))
        .find(|cand| cand.is_file());
    found
}

/// Finds a target's node binary: `--target-bin`, beside the running executable, or PATH.
pub fn find_binary(explicit: Option<&PathBuf>, name: &str) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        anyhow::ensure!(p.is_file(), "--target-bin {} does not exist", p.display());
        return Ok(p.clone());
    }
    if let Some(found) = beside_splitbrain(name) {
        return Ok(found);
    }
    if let Some(found) = find_on_path(name) {
        return Ok(found);
    }
    anyhow::bail!(
        "cannot find the node binary `{name}` beside splitbrain or on PATH; build it with `cargo build --release --workspace` or pass --target-bin"
    )
}

/// `name` in a directory of PATH, if there.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|cand| cand.is_file())
}

/// Fails, naming the program and its Debian package, when a program the target needs
/// (see [`Target::required_programs`]) is not on PATH.
pub fn check_required_programs(target: &dyn Target) -> anyhow::Result<()> {
    for p in target.required_programs() {
        anyhow::ensure!(
            find_on_path(p.program).is_some(),
            "target {} needs `{}`, which is not on PATH; install the Debian package {} (apt-get install {})",
            target.name(),
            p.program,
            p.package,
            p.package
        );
    }
    Ok(())
}
