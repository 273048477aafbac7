//! Choosing checkers and running them: for `splitbrain test` (from the workload) and for
//! `splitbrain check` (from flags, test.json, or the history's shape).

use anyhow::Context;
use splitbrain_checkers::{CheckResult, Checker, History};
use splitbrain_reports::RunSummary;
use std::path::{Path, PathBuf};

/// The options live in the leaf module [`crate::check_options`] (workloads use them, and
/// this module asks the workloads); re-exported for the controller and the CLI.
pub use crate::check_options::CheckOptions;

/// The checkers for a named check workload: a harness workload or a Maelstrom one (what a
/// stored run's test.json names), from the one workload registry.
pub fn checkers_for_workload(
    name: &str,
    opts: &CheckOptions,
) -> anyhow::Result<Vec<Box<dyn Checker>>> {
    match crate::workload::registry::checkable_by_name(name) {
        Some(w) => w.checkers(opts),
        None => anyhow::bail!("unknown workload {name:?}; `splitbrain list` shows the workloads"),
    }
}

/// Ops per block of a pass over every operation: each block runs in parallel and a
/// mapped file's pages before the next block go back after it, so a pass over a
/// history near the size of memory keeps about one block's text resident.
const PASS_BLOCK: usize = 1 << 20;

/// The history's pair slots in blocks of [`PASS_BLOCK`], in order; `done(block)` is
/// called after each with the blocks' results, and the text before the next block is
/// released. Stops early when `done` returns true.
fn in_blocks<'h, T: Send>(
    history: &'h History,
    block_ops: usize,
    per_block: impl Fn(&'h [splitbrain_checkers::history::PairSlot]) -> T + Sync,
    mut done: impl FnMut(T) -> bool,
) {
    let slots = history.pair_slots();
    for (i, block) in slots.chunks(block_ops).enumerate() {
        if done(per_block(block)) {
            break;
        }
        let next = slots.get((i + 1) * block_ops).map(|s| s.invoke_pos);
        history.release_before(next.unwrap_or(history.len()));
    }
    history.release_before(history.len());
}

/// Per kind of operation (client `f`, and `txn:NAME` per micro-op kind inside
/// transactions): how many ops invoked it and how many observed it. Counted in parallel
/// over ranges of the history, names borrowed from it: at 10M transactions this pass
/// costs as much as reading the file.
fn observed_kinds(
    history: &History,
    opts: &CheckOptions,
    block_ops: usize,
) -> std::collections::BTreeMap<String, (u64, u64)> {
    use rayon::prelude::*;
    use splitbrain_checkers::Outcome;
    use std::collections::HashMap;
    #[derive(Default)]
    struct Tally<'h> {
        fs: HashMap<&'h str, (u64, u64)>,
        micro: HashMap<std::borrow::Cow<'h, str>, (u64, u64)>,
        /// Per set of micro-op names the reader recorded (by its index): how many
        /// transactions invoked it and how many observed it.
        sets: Vec<(u64, u64)>,
    }
    /// Counts op `pos`'s micro-op names, in `invoked` or `observed`: by the set the
    /// reader recorded when there is one (the text is not read again), else by name.
    fn count<'h>(t: &mut Tally<'h>, history: &'h History, pos: usize, observed: bool) {
        let at = |n: &mut (u64, u64)| {
            if observed {
                n.1 += 1
            } else {
                n.0 += 1
            }
        };
        if let Some(id) = history.op_micro_op_set(pos) {
            if t.sets.len() <= id {
                t.sets.resize(id + 1, (0, 0));
            }
            at(&mut t.sets[id]);
            return;
        }
        for m in history.op_micro_op_names_borrowed(pos) {
            at(t.micro.entry(m).or_default());
        }
    }
    fn merge_sets(into: &mut Vec<(u64, u64)>, from: Vec<(u64, u64)>) {
        if into.len() < from.len() {
            into.resize(from.len(), (0, 0));
        }
        for (a, b) in into.iter_mut().zip(from) {
            a.0 += b.0;
            a.1 += b.1;
        }
    }
    fn merge<K: std::hash::Hash + Eq>(
        into: &mut HashMap<K, (u64, u64)>,
        from: HashMap<K, (u64, u64)>,
    ) {
        for (k, (i, o)) in from {
            let e = into.entry(k).or_default();
            e.0 += i;
            e.1 += o;
        }
    }
    let chunk = (block_ops / (rayon::current_num_threads() * 8)).max(4096);
    let mut tally = Tally::default();
    in_blocks(
        history,
        block_ops,
        |block| {
            block
                .par_chunks(chunk)
                .map(|part| {
                    let mut t = Tally::default();
                    for s in part {
                        let f = history.op_f(s.invoke_pos).unwrap_or("");
                        let observed = match s.outcome {
                            Outcome::Ok => true,
                            Outcome::Fail => opts.failed_cas_observed && f == "cas",
                            Outcome::Info | Outcome::Pending => false,
                        };
                        let k = t.fs.entry(f).or_default();
                        k.0 += 1;
                        k.1 += u64::from(observed);
                        if f != "txn" {
                            continue;
                        }
                        count(&mut t, history, s.invoke_pos, false);
                        if let (Outcome::Ok, Some(c)) = (s.outcome, s.complete_pos) {
                            count(&mut t, history, c, true);
                        }
                    }
                    t
                })
                .reduce(Tally::default, |mut a, b| {
                    merge(&mut a.fs, b.fs);
                    merge(&mut a.micro, b.micro);
                    merge_sets(&mut a.sets, b.sets);
                    a
                })
        },
        |t| {
            merge(&mut tally.fs, t.fs);
            merge(&mut tally.micro, t.micro);
            merge_sets(&mut tally.sets, t.sets);
            false
        },
    );
    for (id, (i, o)) in tally.sets.iter().enumerate() {
        for m in history.micro_op_name_set(id) {
            let e = tally
                .micro
                .entry(std::borrow::Cow::Borrowed(m))
                .or_default();
            e.0 += i;
            e.1 += o;
        }
    }
    let fs = tally.fs.into_iter().map(|(f, n)| (f.to_string(), n));
    let micro = tally
        .micro
        .into_iter()
        .map(|(m, n)| (format!("txn:{m}"), n));
    let mut kinds = std::collections::BTreeMap::new();
    for (k, (i, o)) in fs.chain(micro) {
        let e: &mut (u64, u64) = kinds.entry(k).or_default();
        e.0 += i;
        e.1 += o;
    }
    kinds
}

/// No hollow passes: a test in which some kind of operation never succeeded (a cluster
/// that never served a read) proves nothing about it, so it is `unknown`, naming the kinds.
/// Kinds are client `f`s and, inside transactions, micro-op kinds (`r`, `w`, `append`):
/// a list-append run whose every read failed is hollow though many `txn`s committed. A
/// definite failure is an observation where the checker takes it as one (a failed `cas`
/// under `--failed-cas observed`). `None` when every kind was observed at least once.
pub fn hollow_run(history: &History, opts: &CheckOptions) -> Option<CheckResult> {
    let kinds = observed_kinds(history, opts, PASS_BLOCK);
    if kinds.is_empty() {
        return Some(CheckResult::new(
            "hollow-run",
            splitbrain_checkers::Validity::Unknown,
            "the history has no client operation: nothing was observed, so nothing is shown",
        ));
    }
    let never: Vec<String> = kinds
        .iter()
        .filter(|(_, (invoked, observed))| *invoked > 0 && *observed == 0)
        .map(|(k, (invoked, _))| match k.strip_prefix("txn:") {
            Some(m) => {
                format!("micro-op {m:?} in transactions ({invoked} invoked, none committed)")
            }
            None => format!("{k:?} ({invoked} invoked, none observed)"),
        })
        .collect();
    if never.is_empty() {
        return None;
    }
    let mut r = CheckResult::new(
        "hollow-run",
        splitbrain_checkers::Validity::Unknown,
        format!(
            "a hollow run proves nothing about what it never observed: {}",
            never.join("; ")
        ),
    );
    r.details = serde_json::json!({
        "kinds": kinds.iter().map(|(k, (i, o))| (k.clone(), serde_json::json!({"invoked": i, "observed": o}))).collect::<serde_json::Map<_, _>>()
    });
    let never_observed = kinds.values().filter(|(i, o)| *i > 0 && *o == 0).count();
    Some(r.with_coverage(splitbrain_checkers::Coverage::of([
        ("kinds", kinds.len() as u64),
        ("never observed", never_observed as u64),
    ])))
}

/// Everything a history earns: the workload's checkers (in order; each parallelizes
/// inside), then the hollow-run rule, then, for a test that asked for faults (its
/// test.json), whether they took effect. The same for `test`, `suite` and `check`.
pub fn check_history(
    history: &History,
    checkers: &[Box<dyn Checker>],
    opts: &CheckOptions,
    test: Option<&serde_json::Value>,
) -> Vec<CheckResult> {
    let mut results: Vec<CheckResult> = checkers.iter().map(|c| c.check(history)).collect();
    results.extend(hollow_run(history, opts));
    if let Some(faults) = test.and_then(crate::fault_coverage::FaultCoverageChecker::from_test_json)
    {
        results.push(faults.check(history));
    }
    results
}

/// Guesses which checker fits a history from the shape of its ops.
pub fn infer_workload(history: &History) -> &'static str {
    infer_workload_in_blocks(history, PASS_BLOCK)
}

fn infer_workload_in_blocks(history: &History, block_ops: usize) -> &'static str {
    // Slots and op names only: never materialize every op's value for a guess.
    let slots = history.pair_slots();
    let has = |f: &str| slots.iter().any(|s| history.op_f(s.invoke_pos) == Some(f));
    if has("txn") {
        // Every op is looked at when none appends (an rw-register history), so in
        // parallel and by micro-op names, without building each value.
        use rayon::prelude::*;
        let mut appends = false;
        in_blocks(
            history,
            block_ops,
            |block| {
                block
                    .par_iter()
                    .any(|s| history.op_has_micro_op(s.invoke_pos, "append"))
            },
            |found| {
                appends = found;
                found
            },
        );
        return if appends {
            "list-append"
        } else {
            "rw-register"
        };
    }
    if has("transfer") {
        return "bank";
    }
    if has("book") {
        return "booking";
    }
    if has("add") {
        // Jepsen's shapes: a set's reads return collections, a counter's numbers.
        let numeric_reads = slots.iter().any(|s| {
            history.op_f(s.invoke_pos) == Some("read")
                && s.complete_pos
                    .and_then(|c| history.op_value(c))
                    .is_some_and(|v| v.is_number())
        });
        return if numeric_reads { "counter" } else { "set" };
    }
    if has("get") || has("put") {
        return "model:kv";
    }
    if has("append") {
        return "model:list-append";
    }
    if has("cas") {
        return "model:cas-register";
    }
    "model:register"
}

/// What `check PATH` found at PATH: the history, and what a stored run records about
/// how it ran and how it was first checked (nothing for a bare history file).
#[derive(Debug, Clone)]
pub struct StoredRun {
    /// The history file.
    pub history: PathBuf,
    /// The run's workload.
    pub workload: Option<String>,
    /// The consistency model the run required.
    pub consistency_model: Option<String>,
    /// The initial state the run's model started at (`--init`).
    pub init: Option<serde_json::Value>,
    /// The run's test.json, when it has one: what it asked for (faults included).
    pub test: Option<serde_json::Value>,
    /// The run's first results.json, when it was checked before: a re-check keeps what
    /// the run was (interrupted, its seed, its network figures) and is stored beside it.
    pub original: Option<RunSummary>,
}

/// Locates a `check` PATH's history: PATH itself, or `history.jsonl` in a run directory
/// together with what its test.json and results.json record.
pub fn locate_history(path: &Path) -> anyhow::Result<StoredRun> {
    if !path.is_dir() {
        return Ok(StoredRun {
            history: path.to_path_buf(),
            workload: None,
            consistency_model: None,
            init: None,
            test: None,
            original: None,
        });
    }
    let history = path.join("history.jsonl");
    anyhow::ensure!(
        history.is_file(),
        "{} is a directory without history.jsonl",
        path.display()
    );
    let test: Option<serde_json::Value> = match std::fs::read(path.join("test.json")) {
        Ok(b) => Some(
            serde_json::from_slice(&b)
                .with_context(|| format!("{} is not JSON", path.join("test.json").display()))?,
        ),
        Err(_) => None,
    };
    let original = match std::fs::read(path.join("results.json")) {
        Ok(b) => Some(serde_json::from_slice::<RunSummary>(&b).with_context(|| {
            format!(
                "{} is not a splitbrain results.json; a stored run's record is not overwritten",
                path.join("results.json").display()
            )
        })?),
        Err(_) => None,
    };
    let t = test.clone().unwrap_or_default();
    let field = |name: &str| t[name].as_str().map(str::to_string);
    Ok(StoredRun {
        history,
        workload: field("workload"),
        consistency_model: field("consistency_model"),
        init: Some(t["init"].clone()).filter(|v| !v.is_null()),
        test,
        original,
    })
}

/// Writes results.json, report.html and junit.xml into `dir`; `test` is the run's
/// test.json (what ran and how to repeat it), which a hand-made run dir may lack. The
/// report keeps its "Shrunk reproduction" section when `dir` holds a `shrunk/` that
/// `splitbrain shrink` wrote: a run checked again still links to its reproduction.
pub fn write_outputs(
    dir: &Path,
    summary: &RunSummary,
    history: &History,
    test: Option<&serde_json::Value>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_vec_pretty(summary)?,
    )
    .with_context(|| format!("writing {}", dir.join("results.json").display()))?;
    let shrunk = shrunk_files(dir)?;
    let html = splitbrain_reports::render_html_with_shrunk(summary, history, test, shrunk.as_ref());
    std::fs::write(dir.join("report.html"), html)?;
    std::fs::write(
        dir.join("junit.xml"),
        splitbrain_reports::junit_xml(summary).context("rendering JUnit XML")?,
    )?;
    Ok(())
}

/// What `splitbrain shrink` left in `dir/shrunk/` for the run's report: its
/// `schedule.json` and `shrink.json`, `None` when neither is there.
pub fn shrunk_files(dir: &Path) -> anyhow::Result<Option<splitbrain_reports::ShrunkFiles>> {
    let files = splitbrain_reports::ShrunkFiles {
        schedule: read_json_if_there(&dir.join("shrunk/schedule.json"))?,
        history: read_json_if_there(&dir.join("shrunk/shrink.json"))?,
    };
    Ok((files.schedule.is_some() || files.history.is_some()).then_some(files))
}

/// A JSON file's value, `None` when there is no such file.
pub fn read_json_if_there(path: &Path) -> anyhow::Result<Option<serde_json::Value>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(
            serde_json::from_slice(&b).with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::{
        hollow_run, infer_workload_in_blocks, observed_kinds, write_outputs, CheckOptions,
        PASS_BLOCK,
    };
    use serde_json::json;
    use splitbrain_checkers::{History, Op, OpType, Process, Validity};
    use std::path::Path;

    fn pair(p: u64, f: &str, done: OpType) -> [Op; 2] {
        [
            Op::new(Process::Client(p), OpType::Invoke, f, json!(null)),
            Op::new(Process::Client(p), done, f, json!(null)),
        ]
    }

    #[test]
    fn a_run_where_some_op_kind_never_succeeded_is_unknown() {
        let mut ops: Vec<Op> = Vec::new();
        ops.extend(pair(0, "write", OpType::Ok));
        ops.extend(pair(0, "read", OpType::Fail));
        ops.extend(pair(1, "read", OpType::Info));
        let opts = CheckOptions::default();
        let hollow = hollow_run(&History::new(ops.clone()).unwrap(), &opts).expect("hollow");
        assert_eq!(hollow.valid, Validity::Unknown);
        assert!(
            hollow.explanation.contains("read"),
            "{}",
            hollow.explanation
        );
        ops.extend(pair(2, "read", OpType::Ok));
        assert_eq!(hollow_run(&History::new(ops).unwrap(), &opts), None);
    }

    fn txn(
        p: u64,
        done: OpType,
        invoked: serde_json::Value,
        completed: serde_json::Value,
    ) -> [Op; 2] {
        [
            Op::new(Process::Client(p), OpType::Invoke, "txn", invoked),
            Op::new(Process::Client(p), done, "txn", completed),
        ]
    }

    #[test]
    fn a_transactional_run_whose_reads_never_committed_is_unknown() {
        let mut ops: Vec<Op> = Vec::new();
        // appends commit, every transaction with a read aborts
        ops.extend(txn(
            0,
            OpType::Ok,
            json!([["append", 1, 1]]),
            json!([["append", 1, 1]]),
        ));
        ops.extend(txn(
            1,
            OpType::Fail,
            json!([["r", 1, null]]),
            json!([["r", 1, null]]),
        ));
        let opts = CheckOptions::default();
        let hollow = hollow_run(&History::new(ops.clone()).unwrap(), &opts).expect("hollow");
        assert_eq!(hollow.valid, Validity::Unknown);
        assert!(
            hollow.explanation.contains("micro-op \"r\""),
            "{}",
            hollow.explanation
        );
        assert!(
            !hollow.explanation.contains("\"append\""),
            "{}",
            hollow.explanation
        );
        ops.extend(txn(
            2,
            OpType::Ok,
            json!([["r", 1, null]]),
            json!([["r", 1, [1]]]),
        ));
        assert_eq!(hollow_run(&History::new(ops).unwrap(), &opts), None);
    }

    /// The passes over every op read a file's text in blocks, releasing pages between
    /// them: blocks of two ops must count what one block counts, and an append seen
    /// only in the last block still makes a list-append history.
    #[test]
    fn passes_in_blocks_count_what_one_pass_counts() {
        let mut text = String::new();
        let line = |text: &mut String, p: u64, ty: &str, v: &str| {
            text.push_str(&format!(
                "{{\"process\": {p}, \"type\": \"{ty}\", \"f\": \"txn\", \"value\": {v}}}\n"
            ))
        };
        for p in 0..5 {
            line(&mut text, p, "invoke", r#"[["r", 1, null], ["w", 1, 2]]"#);
            let done = if p == 3 { "fail" } else { "ok" };
            line(&mut text, p, done, r#"[["r", 1, 1], ["w", 1, 2]]"#);
        }
        let rw = splitbrain_checkers::history::read::read_str(&text, Path::new("h.jsonl"), None)
            .unwrap();
        line(&mut text, 9, "invoke", r#"[["append", 1, 3]]"#);
        line(&mut text, 9, "info", "null");
        // A name too long for the reader to record: counted from the text.
        line(
            &mut text,
            8,
            "invoke",
            r#"[["increment", 1, 1], ["r", 1, null]]"#,
        );
        line(
            &mut text,
            8,
            "ok",
            r#"[["increment", 1, 1], ["r", 1, [1]]]"#,
        );
        let la = splitbrain_checkers::history::read::read_str(&text, Path::new("h.jsonl"), None)
            .unwrap();
        assert!(la.op_micro_op_set(0).is_some(), "recorded when read");
        assert!(la.op_micro_op_set(12).is_none(), "too long to record");
        let opts = CheckOptions::default();
        for h in [&rw, &la] {
            let whole = observed_kinds(h, &opts, PASS_BLOCK);
            assert_eq!(observed_kinds(h, &opts, 2), whole);
            assert_eq!(observed_kinds(h, &opts, 1), whole);
            // Names the reader recorded count as names read from each value do.
            let parsed = History::new(h.ops().to_vec()).unwrap();
            assert_eq!(parsed.op_micro_op_set(0), None);
            assert_eq!(observed_kinds(&parsed, &opts, PASS_BLOCK), whole);
        }
        let whole = observed_kinds(&la, &opts, PASS_BLOCK);
        assert_eq!(whole["txn"], (7, 5));
        assert_eq!(whole["txn:r"], (6, 5));
        assert_eq!(whole["txn:increment"], (1, 1));
        assert_eq!(whole["txn:append"], (1, 0));
        assert_eq!(infer_workload_in_blocks(&rw, 2), "rw-register");
        assert_eq!(infer_workload_in_blocks(&la, 2), "list-append");
        assert_eq!(infer_workload_in_blocks(&la, PASS_BLOCK), "list-append");
        assert!(hollow_run(&la, &opts).is_some(), "append never committed");
    }

    #[test]
    fn an_empty_history_is_hollow_and_failed_cas_counts_only_when_observed() {
        let opts = CheckOptions::default();
        let empty = hollow_run(&History::new(Vec::new()).unwrap(), &opts).expect("hollow");
        assert_eq!(empty.valid, Validity::Unknown);
        let mut ops: Vec<Op> = Vec::new();
        ops.extend(pair(0, "read", OpType::Ok));
        ops.extend(pair(1, "cas", OpType::Fail));
        let h = History::new(ops).unwrap();
        assert!(hollow_run(&h, &opts).is_some());
        let observed = CheckOptions {
            failed_cas_observed: true,
            ..CheckOptions::default()
        };
        assert_eq!(hollow_run(&h, &observed), None);
    }

    #[test]
    fn outputs_written_again_keep_the_runs_shrunk_reproduction() {
        let dir = tempfile::tempdir().unwrap();
        let mut ops: Vec<Op> = Vec::new();
        ops.extend(pair(0, "read", OpType::Ok));
        let history = History::new(ops).unwrap();
        let summary = splitbrain_reports::RunSummary::new(
            "history.jsonl".into(),
            Some(dir.path().display().to_string()),
            Vec::new(),
            splitbrain_reports::history_stats(&history),
            None,
        );
        let report = || std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        write_outputs(dir.path(), &summary, &history, None).unwrap();
        assert!(!report().contains("Shrunk reproduction"));
        std::fs::create_dir(dir.path().join("shrunk")).unwrap();
        std::fs::write(
            dir.path().join("shrunk/schedule.json"),
            json!({"failure": "linearizable: invalid", "events_before": 12, "events_after": 1,
                   "command": "splitbrain test --target kv --nemesis-plan shrunk/plan.json"})
            .to_string(),
        )
        .unwrap();
        write_outputs(dir.path(), &summary, &history, None).unwrap();
        let html = report();
        assert!(html.contains("Shrunk reproduction"), "{html}");
        assert!(html.contains("href=\"shrunk/plan.json\""), "{html}");
    }
}
