//! Choosing checkers and running them: for `splitbrain test` (from the workload) and for
//! `splitbrain check` (from flags, test.json, or the history's shape).

use anyhow::{bail, Context};
use splitbrain_checkers::bank::{BankChecker, BankOptions};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::eventual::{
    BookingChecker, CommittedPrefixChecker, ConvergenceChecker, EventualDataType,
    SessionGuaranteesChecker, SetFullChecker,
};
use splitbrain_checkers::jepsen::counter::CounterChecker;
use splitbrain_checkers::linearizability::{
    FailedCas, LinearizabilityChecker, LinearizabilityOptions,
};
use splitbrain_checkers::{CheckBounds, CheckResult, Checker, History};
use splitbrain_reports::RunSummary;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options that shape how histories are checked.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Linearizability model override (`--model`).
    pub model: Option<String>,
    /// Required consistency model for transactional checks.
    pub consistency_model: Option<String>,
    /// Treat a failed cas as an observation (`--failed-cas observed`).
    pub failed_cas_observed: bool,
    /// Initial state of the linearizability model (`--init`), and the counter's start.
    pub init: Option<serde_json::Value>,
    /// rw-register: Elle's `sequential-keys` inference.
    pub sequential_keys: bool,
    /// rw-register: Elle's `linearizable-keys` inference.
    pub linearizable_keys: bool,
    /// rw-register: Elle's `wfr-keys` inference.
    pub wfr_keys: bool,
    /// Check keyed histories as one object (`--no-split`).
    pub no_split: bool,
    /// Time bound of the check.
    pub time_limit: Option<Duration>,
    /// Memory bound of the check, in bytes.
    pub max_memory: Option<u64>,
}

impl CheckOptions {
    fn bounds(&self) -> CheckBounds {
        CheckBounds {
            time_limit: self.time_limit,
            max_memory: self.max_memory,
        }
    }

    /// A linearizability checker for `default_model`, unless `--model` overrides it.
    pub fn linearizability(&self, default_model: &str) -> anyhow::Result<Box<dyn Checker>> {
        let model = self.model.as_deref().unwrap_or(default_model);
        let opts = LinearizabilityOptions {
            split_by_key: !self.no_split,
            failed_cas: FailedCas::observed_if(self.failed_cas_observed),
            bounds: self.bounds(),
        };
        let checker = LinearizabilityChecker::new(model, opts)?;
        Ok(Box::new(match &self.init {
            Some(init) => checker.with_init(init.clone())?,
            None => checker,
        }))
    }

    /// An Elle checker for a transactional workload.
    pub fn elle(&self, workload: ElleWorkload) -> anyhow::Result<Box<dyn Checker>> {
        let mut opts = ElleOptions {
            bounds: self.bounds(),
            sequential_keys: self.sequential_keys,
            linearizable_keys: self.linearizable_keys,
            wfr_keys: self.wfr_keys,
            ..ElleOptions::default()
        };
        if let Some(m) = &self.consistency_model {
            opts.consistency_model = m.clone();
        }
        Ok(Box::new(ElleChecker::new(workload, opts)?))
    }

    /// A checker chosen by name (`check --checker NAME`): one of Jepsen's generic
    /// checkers (`splitbrain_checkers::jepsen::CHECKERS`), `bank`, or an
    /// eventual-consistency checker ([`EVENTUAL_CHECKERS`]).
    pub fn named_checker(&self, name: &str) -> anyhow::Result<Box<dyn Checker>> {
        if name == "bank" {
            return Ok(Box::new(BankChecker::new(BankOptions::default())));
        }
        if name == "counter" {
            let initial = match &self.init {
                None => 0,
                Some(v) => v.as_i64().with_context(|| {
                    format!("--init for the counter must be an integer, got {v}")
                })?,
            };
            return Ok(Box::new(CounterChecker { initial }));
        }
        // The eventual-consistency checkers by name, on set-shaped histories (a counter's
        // or a booking's are judged through `--workload counter|booking`).
        let set = EventualDataType::Set;
        let eventual: Option<Box<dyn Checker>> = match name {
            "convergence" => Some(Box::new(ConvergenceChecker::new(set))),
            "set-full" => Some(Box::new(SetFullChecker)),
            "committed-prefix" => Some(Box::new(CommittedPrefixChecker)),
            "session-guarantees" => Some(Box::new(SessionGuaranteesChecker::new(set))),
            "booking" => Some(Box::new(BookingChecker)),
            _ => None,
        };
        if let Some(c) = eventual {
            return Ok(c);
        }
        match splitbrain_checkers::jepsen::by_name(name) {
            Some(c) => Ok(c),
            None => {
                let known: Vec<&str> = splitbrain_checkers::jepsen::CHECKERS
                    .iter()
                    .map(|(n, _)| *n)
                    .chain(["bank"])
                    .chain(EVENTUAL_CHECKERS)
                    .collect();
                bail!(
                    "unknown checker {name:?}; known checkers: {}",
                    known.join(", ")
                )
            }
        }
    }

    /// The checkers for a named check workload: a harness workload, a Maelstrom one, or
    /// `list-append`, `rw-register`, `bank`.
    pub fn for_workload(&self, name: &str) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        match name {
            "list-append" => Ok(vec![self.elle(ElleWorkload::ListAppend)?]),
            "rw-register" => Ok(vec![self.elle(ElleWorkload::RwRegister)?]),
            "bank" => Ok(vec![Box::new(BankChecker::new(BankOptions {
                total: None,
                negative_allowed: false,
            }))]),
            other => match crate::workload::by_name(other) {
                Some(w) => w.checkers(self),
                // A stored Maelstrom run names its Maelstrom workload (`echo`, `kafka`, ...).
                None => match crate::maelstrom::workloads::MaelstromWorkload::parse(other) {
                    Some(w) => crate::workload::Workload::checkers(&w, self),
                    None => {
                        bail!("unknown workload {other:?}; `splitbrain list` shows the workloads")
                    }
                },
            },
        }
    }
}

/// No hollow passes: a test in which some kind of operation never succeeded (a cluster
/// that never served a read) proves nothing about it, so it is `unknown`, with Jepsen's
/// `stats` counts as the reason. `None` when every kind succeeded at least once.
pub fn hollow_run(history: &History) -> Option<CheckResult> {
    let stats = splitbrain_checkers::jepsen::stats::StatsChecker.check(history);
    (stats.valid != splitbrain_checkers::Validity::Valid).then(|| {
        let mut r = stats;
        r.valid = splitbrain_checkers::Validity::Unknown;
        r.explanation = format!("a hollow run proves nothing: {}", r.explanation);
        r
    })
}

/// Runs every checker on the history (in order; each checker parallelizes inside).
pub fn run_checkers(history: &History, checkers: &[Box<dyn Checker>]) -> Vec<CheckResult> {
    checkers.iter().map(|c| c.check(history)).collect()
}

/// Eventual-consistency checkers `check --checker` knows by name.
pub const EVENTUAL_CHECKERS: [&str; 5] = [
    "convergence",
    "set-full",
    "committed-prefix",
    "session-guarantees",
    "booking",
];

/// Guesses which checker fits a history from the shape of its ops.
pub fn infer_workload(history: &History) -> &'static str {
    // Slots and op names only: never materialize every op's value for a guess.
    let slots = history.pair_slots();
    let has = |f: &str| slots.iter().any(|s| history.op_f(s.invoke_pos) == Some(f));
    if has("txn") {
        let appends = slots.iter().any(|s| {
            history.op_value(s.invoke_pos).is_some_and(|v| {
                v.as_array()
                    .is_some_and(|mops| mops.iter().any(|m| m[0] == "append"))
            })
        });
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

/// What `check PATH` found at PATH: the history, and what the run's test.json says about
/// how it was checked (nothing for a bare history file).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The history file.
    pub history: PathBuf,
    /// The run's workload.
    pub workload: Option<String>,
    /// The consistency model the run required.
    pub consistency_model: Option<String>,
    /// The initial state the run's model started at (`--init`).
    pub init: Option<serde_json::Value>,
}

/// Locates a `check` PATH's history: PATH itself, or `history.jsonl` in a run directory
/// together with what its test.json records.
pub fn locate_history(path: &Path) -> anyhow::Result<StoredRun> {
    if !path.is_dir() {
        return Ok(StoredRun {
            history: path.to_path_buf(),
            workload: None,
            consistency_model: None,
            init: None,
        });
    }
    let history = path.join("history.jsonl");
    anyhow::ensure!(
        history.is_file(),
        "{} is a directory without history.jsonl",
        path.display()
    );
    let test = std::fs::read(path.join("test.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .unwrap_or_default();
    let field = |name: &str| test[name].as_str().map(str::to_string);
    Ok(StoredRun {
        history,
        workload: field("workload"),
        consistency_model: field("consistency_model"),
        init: Some(test["init"].clone()).filter(|v| !v.is_null()),
    })
}

/// Writes results.json, report.html and junit.xml into `dir`.
pub fn write_outputs(dir: &Path, summary: &RunSummary, history: &History) -> anyhow::Result<()> {
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_vec_pretty(summary)?,
    )
    .with_context(|| format!("writing {}", dir.join("results.json").display()))?;
    // test.json names what ran and how to repeat it; a hand-made run dir may lack it.
    let test: Option<serde_json::Value> = std::fs::read(dir.join("test.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let html = splitbrain_reports::render_html(summary, history, test.as_ref());
    std::fs::write(dir.join("report.html"), html)?;
    std::fs::write(
        dir.join("junit.xml"),
        splitbrain_reports::junit_xml(summary),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::hollow_run;
    use serde_json::json;
    use splitbrain_checkers::{History, Op, OpType, Process, Validity};

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
        let hollow = hollow_run(&History::new(ops.clone()).unwrap()).expect("hollow");
        assert_eq!(hollow.valid, Validity::Unknown);
        assert!(
            hollow.explanation.contains("read"),
            "{}",
            hollow.explanation
        );
        ops.extend(pair(2, "read", OpType::Ok));
        assert_eq!(hollow_run(&History::new(ops).unwrap()), None);
    }
}
