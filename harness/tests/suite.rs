//! End-to-end tests of `splitbrain suite`: a tiny suite of real KV runs on loopback, and
//! bad suite files. Each test is bounded in time and kills only what it started.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `splitbrain ARGS` with a bound; kills it (by its PID) if the bound passes.
fn splitbrain(args: &[&str], envs: &[(&str, &Path)], bound: Duration) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_splitbrain"));
    cmd.args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while start.elapsed() < bound {
        if let Ok(Some(_)) = child.try_wait() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "splitbrain {args:?} did not finish within {bound:?}; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// True when no running process has `marker` in its command line.
fn no_process_mentions(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    !entries.flatten().any(|e| {
        e.file_name().to_string_lossy().parse::<u32>().is_ok()
            && std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
    })
}

const TINY: &str = r#"name = "tiny"
seeds = [3]

[defaults]
target = "kv"
nodes = 3
nemesis = "none"
time_limit = 2

[[cell]]
name = "kv/correct"
expect = "valid"

# Deliberately wrong: a correct KV store is not invalid.
[[cell]]
name = "kv/wrong-expectation"
expect = "invalid"
checkers = ["linearizable"]
"#;

#[test]
fn a_wrong_expectation_exits_1_and_is_listed_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let suite = d.join("tiny.toml");
    std::fs::write(&suite, TINY).unwrap();
    let summary = d.join("step-summary.md");
    let store = d.join("store");
    let p = |name: &str| d.join(name).display().to_string();
    let out = splitbrain(
        &[
            "suite",
            &suite.display().to_string(),
            "--store",
            &store.display().to_string(),
            "--junit",
            &p("junit.xml"),
            "--markdown",
            &p("table.md"),
            "--json",
            &p("results.json"),
        ],
        &[("GITHUB_STEP_SUMMARY", &summary)],
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    // Failing cell first in the table, named with its line and why.
    let wrong = stdout.find("kv/wrong-expectation").unwrap();
    let correct = stdout.find("kv/correct").unwrap();
    assert!(wrong < correct, "{stdout}");
    assert!(
        stdout.contains("FAIL kv/wrong-expectation (line 15): detected 0/1, needs 1; seed 3: missed: the run was valid"),
        "{stdout}"
    );
    assert!(
        stdout.contains("suite tiny: 1/2 cells met their expectation"),
        "{stdout}"
    );
    // One progress line per cell.
    assert_eq!(stderr.matches("splitbrain suite [").count(), 2, "{stderr}");
    let junit = std::fs::read_to_string(d.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 2, "{junit}");
    assert_eq!(junit.matches("<failure").count(), 1, "{junit}");
    let md = std::fs::read_to_string(d.join("table.md")).unwrap();
    assert!(md.contains("| FAIL   | kv/wrong-expectation |"), "{md}");
    assert_eq!(std::fs::read_to_string(&summary).unwrap().trim(), md.trim());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["cells"][0]["name"], "kv/wrong-expectation");
    assert_eq!(json["cells"][1]["runs"][0]["verdict"], "valid");
    // Every run is in the store as `splitbrain test` leaves it.
    for cell in ["kv-wrong-expectation", "kv-correct"] {
        assert!(
            store.join(cell).join("latest/results.json").exists(),
            "{cell}"
        );
    }
    assert!(no_process_mentions(&store.display().to_string()));
}

#[test]
fn a_bad_suite_file_exits_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "seeds = [1]\n\n[[cell]]\ntarget = \"kv\"\nexpect = \"valdi\"\n",
    )
    .unwrap();
    let out = splitbrain(
        &["suite", &bad.display().to_string()],
        &[],
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml") && stderr.contains("line 5"),
        "{stderr}"
    );
    // Well-formed, but a cell the test command refuses: found before anything runs.
    std::fs::write(
        &bad,
        "[[cell]]\ntarget = \"kv\"\nexpect = \"valid\"\n\n[[cell]]\ntarget = \"kv\"\nbugs = [\"no-such-bug\"]\nexpect = \"invalid\"\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let out = splitbrain(
        &[
            "suite",
            &bad.display().to_string(),
            "--store",
            &store.display().to_string(),
        ],
        &[],
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml:5: cell \"kv/no-such-bug\""),
        "{stderr}"
    );
    assert!(stderr.contains("no bug \"no-such-bug\""), "{stderr}");
    assert!(!store.exists(), "nothing ran");
}

#[test]
fn built_in_suites_print_and_unknown_names_are_usage_errors() {
    let out = splitbrain(&["suite", "--print", "quick"], &[], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("name = \"quick\"") && text.contains("[[cell]]"),
        "{text}"
    );
    let out = splitbrain(&["suite", "no-such-suite"], &[], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("quick, full"));
}
