//! What the end-to-end tests of bundled targets share: running `splitbrain test` in a fresh
//! store, and making sure no node process outlived the run.

#![allow(dead_code)] // each test binary uses its own part

use serde_json::Value;

pub mod browser;
#[path = "../../../testing/skip.rs"]
pub mod skip;
use std::path::Path;
use std::process::Command;

/// Runs `splitbrain test --target TARGET --nodes NODES ARGS` in a fresh store; returns the
/// exit code, results.json and the store (kept alive for the caller). Fails the test when a
/// node process whose command line names the store is still running afterwards.
pub fn run_target(
    target: &str,
    nodes: usize,
    args: &[&str],
) -> (Option<i32>, Value, tempfile::TempDir) {
    let store = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["test", "--target", target, "--no-progress"])
        .args(["--nodes", &nodes.to_string()])
        .args(args)
        .arg("--store")
        .arg(store.path())
        .output()
        .unwrap();
    let results = std::fs::read(store.path().join("latest/results.json")).unwrap_or_else(|e| {
        panic!(
            "no results.json ({e}); stdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let results: Value = serde_json::from_slice(&results).unwrap();
    assert!(
        no_process_mentions(store.path()),
        "node processes outlived the run"
    );
    (out.status.code(), results, store)
}

/// True when no running process has `store` in its command line.
pub fn no_process_mentions(store: &Path) -> bool {
    let marker = store.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    !entries.flatten().any(|e| {
        e.file_name().to_string_lossy().parse::<u32>().is_ok()
            && std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
    })
}

/// PIDs of the running processes whose `/proc/PID` directory satisfies `matches`.
pub fn pids_where(matches: impl Fn(&Path) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            matches(&e.path()).then_some(pid)
        })
        .collect()
}

/// The result of checker `name`, which must be there.
pub fn checker<'a>(results: &'a Value, name: &str) -> &'a Value {
    results["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["checker"] == name))
        .unwrap_or_else(|| panic!("no {name} result in {results:#}"))
}

/// `splitbrain test --target TARGET --nodes NODES --no-progress ARGS --store STORE`,
/// started with piped output and not awaited (for tests that signal it mid-run).
pub fn spawn_test(target: &str, nodes: usize, store: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["test", "--target", target, "--no-progress"])
        .args(["--nodes", &nodes.to_string()])
        .args(args)
        .arg("--store")
        .arg(store)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Namespaces and host links named after splitbrain process `pid` (every run names its
/// own so): what a namespaced run must not leave behind.
pub fn namespaces_and_links_of(pid: u32) -> Vec<String> {
    use splitbrain_nemesis::netns;
    let ns_prefix = format!("{}{pid}-", netns::PREFIX);
    let link_prefix = format!("sbh{pid}x");
    let ns = netns::list_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&ns_prefix));
    let links = netns::host_links()
        .into_iter()
        .filter(|l| l.starts_with(&link_prefix));
    ns.chain(links).collect()
}

/// The ops of the latest run in `store`, in history order.
pub fn history(store: &Path) -> Vec<Value> {
    std::fs::read_to_string(store.join("latest/history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A `--nemesis-plan` file holding `json`, removed when dropped.
pub fn plan_file(json: &str) -> tempfile::NamedTempFile {
    let plan = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(plan.path(), json).unwrap();
    plan
}

/// Why PostgreSQL runs (primary and standbys) cannot be made here, if they cannot: a
/// missing server program, or a harness running as root without the `postgres` account.
pub fn postgres_unavailable() -> Option<String> {
    use splitbrain::systems::postgres::{find_program, OS_USER};
    for program in ["postgres", "initdb", "pg_basebackup"] {
        if find_program(program).is_none() {
            return Some(format!(
                "PostgreSQL's `{program}` is not installed (Debian package postgresql)"
            ));
        }
    }
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let has_user = std::fs::read_to_string("/etc/passwd")
        .is_ok_and(|p| p.lines().any(|l| l.starts_with(&format!("{OS_USER}:"))));
    (root && !has_user).then(|| format!("running as root without an OS user `{OS_USER}`"))
}

/// The offset in seconds between real time and the wall clock process `pid` reads
/// through libfaketime: None unless libfaketime is mapped into it. `date` is run under
/// the process's own LD_PRELOAD and FAKETIME_* variables (read from `/proc/PID/environ`),
/// so this reads the offset file the process reads, as it reads it.
pub fn faketime_offset_s(pid: u32) -> Option<i64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    if !maps.contains("libfaketime") {
        return None;
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let vars: Vec<(String, String)> = environ
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let (k, v) = std::str::from_utf8(kv).ok()?.split_once('=')?;
            (k == "LD_PRELOAD" || k.starts_with("FAKETIME")).then(|| (k.into(), v.into()))
        })
        .collect();
    let out = Command::new("date").arg("+%s").envs(vars).output().ok()?;
    let faked: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    Some(faked - real)
}

/// Watches `child` (a run) until every process whose command line contains `marker`
/// (there must be `count`) reads a wall clock about `offset_s` ahead through libfaketime,
/// or until `bound`; returns what the last look saw, per PID.
pub fn watch_faketime_offsets(
    child: &mut std::process::Child,
    marker: &str,
    count: usize,
    offset_s: i64,
    bound: std::time::Duration,
) -> Vec<(u32, Option<i64>)> {
    let start = std::time::Instant::now();
    loop {
        let seen: Vec<(u32, Option<i64>)> = pids_where(|p| {
            std::fs::read(p.join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .into_iter()
        .map(|pid| (pid, faketime_offset_s(pid)))
        .collect();
        let moved = seen
            .iter()
            .filter(|(_, o)| o.is_some_and(|o| (o - offset_s).abs() <= 5))
            .count();
        if moved >= count || start.elapsed() > bound || child.try_wait().ok().flatten().is_some() {
            return seen;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Writes, in `dir`, a target spec for the Python register store of
/// `examples/http-contract/python` whose clocks move through libfaketime
/// (`clock = "faketime"`), and a plan that bumps every node's clock `offset_s` ahead from
/// 0.5 s to 5.5 s into the run; returns (spec, plan).
pub fn faketime_register_spec(dir: &Path, offset_s: i64) -> (String, String) {
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/http-contract/python/register_server.py")
        .canonicalize()
        .expect("the Python register server");
    let spec = dir.join("register-faketime.toml");
    std::fs::write(
        &spec,
        format!(
            r#"description = "the Python register store, its wall clock moved by libfaketime"
command = ["python3", "{}", "--id", "{{id}}", "--client-listen", "{{client_addr}}",
           "--peer-listen", "{{peer_addr}}", "--peers", "{{peers}}", "--data-dir", "{{data_dir}}",
           "--request-timeout-ms", "{{request_timeout_ms}}"]
workloads = ["register"]
status = true
clock = "faketime"
"#,
            server.display()
        ),
    )
    .unwrap();
    let plan = dir.join("clock-plan.json");
    std::fs::write(
        &plan,
        serde_json::json!([{"at_ms": 500, "for_ms": 5000, "f": "clock", "mode": "bump",
                            "nodes": ["n1", "n2", "n3"], "offset_ms": offset_s * 1000}])
        .to_string(),
    )
    .unwrap();
    (spec.display().to_string(), plan.display().to_string())
}

/// The nemesis ops of the store's latest history.
pub fn nemesis_ops(store: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(store.join("latest/history.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|op| op["process"] == "nemesis")
        .collect()
}

/// Checks a faketime run that `watch_faketime_offsets` watched: it exited 0, the
/// `count` node processes all read a clock `offset_s` ahead (within 5 s), and its clock
/// faults started and stopped without an error.
pub fn assert_faketime_run(
    store: &Path,
    out: &std::process::Output,
    seen: &[(u32, Option<i64>)],
    count: usize,
    offset_s: i64,
) {
    let results = std::fs::read(store.join("latest/results.json"))
        .ok()
        .and_then(|r| serde_json::from_slice::<Value>(&r).ok())
        .unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{results:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let moved = seen
        .iter()
        .filter(|(_, o)| o.is_some_and(|o| (o - offset_s).abs() <= 5))
        .count();
    assert_eq!(
        moved, count,
        "node processes and their clock offsets (s): {seen:?}"
    );
    let clock_ops: Vec<Value> = nemesis_ops(store)
        .into_iter()
        .filter(|o| o["f"].as_str().is_some_and(|f| f.contains("clock")))
        .collect();
    assert!(clock_ops.len() >= 2, "clock ops: {clock_ops:#?}");
    for op in &clock_ops {
        assert!(
            op["value"].get("error").is_none(),
            "a clock fault failed: {op}"
        );
    }
}

/// The time (ns) of the first nemesis op `f` in `ops` (e.g. `start-slow`); panics if none.
pub fn nemesis_time(ops: &[Value], f: &str) -> u64 {
    ops.iter()
        .find(|op| op["process"] == "nemesis" && op["f"] == f)
        .and_then(|op| op["time"].as_u64())
        .unwrap_or_else(|| panic!("no {f} in the history"))
}

/// Each completed-`ok` client op whose `f` passes `which`: its invoke time and its
/// latency (ns), paired as the history pairs them (a process's invoke, then its next op).
pub fn ok_latencies(ops: &[Value], which: impl Fn(&str) -> bool) -> Vec<(u64, u64)> {
    let mut open: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for op in ops.iter().filter(|op| op["process"] != "nemesis") {
        let (process, time) = (op["process"].to_string(), op["time"].as_u64().unwrap_or(0));
        if op["type"] == "invoke" {
            open.insert(process, time);
        } else if let Some(start) = open.remove(&process) {
            if op["type"] == "ok" && which(op["f"].as_str().unwrap_or("")) {
                out.push((start, time.saturating_sub(start)));
            }
        }
    }
    out
}

/// The median of `xs` (ns) in ms; None for none.
pub fn median_ms(xs: &[u64]) -> Option<f64> {
    let mut xs = xs.to_vec();
    xs.sort_unstable();
    xs.get(xs.len() / 2).map(|&x| x as f64 / 1e6)
}

/// The latencies of ok ops passing `which` invoked inside `[from, to)` and those invoked
/// before `from` (the baseline), by the history's times.
pub fn latencies_inside_and_before(
    ops: &[Value],
    which: impl Fn(&str) -> bool,
    from: u64,
    to: u64,
) -> (Vec<u64>, Vec<u64>) {
    let all = ok_latencies(ops, which);
    let inside = all
        .iter()
        .filter(|(t, _)| (from..to).contains(t))
        .map(|(_, l)| *l)
        .collect();
    let before = all
        .iter()
        .filter(|(t, _)| *t < from)
        .map(|(_, l)| *l)
        .collect();
    (inside, before)
}

/// Asserts that a run ended 0 with its `checker` valid (`results` is its results.json).
pub fn assert_exit_0_and_valid(code: Option<i32>, results: &Value, checker: &str) {
    assert_eq!(code, Some(0), "{results:#}");
    assert_eq!(
        self::checker(results, checker)["valid"],
        true,
        "{results:#}"
    );
}

/// Asserts that the ok writes invoked while the history's `slow` fault was on took a
/// round trip through the slowed link: a median of at least `floor_ms` (the added delay
/// is a floor, the proxy never delivers early) and more than twice the median of the
/// writes before it (a wide margin, whatever the machine's load). `label` names the
/// writes in the printed figures and the messages.
pub fn assert_slowed_writes(ops: &[Value], label: &str, floor_ms: f64) {
    let (slow_ms, before_ms) = median_write_ms_inside_and_before(ops, "slow", label);
    assert!(
        slow_ms >= floor_ms,
        "{label}: median slowed write {slow_ms:.1} ms, under {floor_ms} ms"
    );
    assert!(
        slow_ms > 2.0 * before_ms,
        "{label}: median slowed write {slow_ms:.1} ms vs {before_ms:.1} ms before"
    );
}

/// The median latency (ms) of the ok writes invoked while fault `fault` was on (between
/// the history's `start-<fault>` and `stop-<fault>`) and of those invoked before it,
/// printed with their counts under `label`; panics with fewer than 10 writes in either.
pub fn median_write_ms_inside_and_before(ops: &[Value], fault: &str, label: &str) -> (f64, f64) {
    let (from, to) = (
        nemesis_time(ops, &format!("start-{fault}")),
        nemesis_time(ops, &format!("stop-{fault}")),
    );
    let (inside, before) = latencies_inside_and_before(ops, |f| f == "write", from, to);
    assert!(
        inside.len() >= 10 && before.len() >= 10,
        "too few writes: {} during {fault}, {} before",
        inside.len(),
        before.len()
    );
    let (inside_ms, before_ms) = (median_ms(&inside).unwrap(), median_ms(&before).unwrap());
    eprintln!(
        "{label}: median {inside_ms:.1} ms over {} during {fault}, {before_ms:.1} ms over {} before",
        inside.len(),
        before.len()
    );
    (inside_ms, before_ms)
}
