//! How histories are checked, as options: the leaf every workload and checker-chooser
//! shares. It names no workload (workloads name it, through `Workload::checkers`), so
//! `check.rs` can ask the workload registry without an import circle.

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
use splitbrain_checkers::{CheckBounds, Checker};
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
}

/// Eventual-consistency checkers `check --checker` knows by name.
pub const EVENTUAL_CHECKERS: [&str; 5] = [
    "convergence",
    "set-full",
    "committed-prefix",
    "session-guarantees",
    "booking",
];

/// The check flags `splitbrain test`, `check` and `shrink` share (clap), read into
/// [`CheckOptions`] by [`CheckFlags::options`].
#[derive(clap::Args, Debug, Clone)]
pub struct CheckFlags {
    /// Linearizability model (register, cas-register, kv, list-append, set, queue, ...).
    #[arg(long)]
    pub model: Option<String>,
    /// Required consistency model for transactional histories.
    #[arg(long)]
    pub consistency_model: Option<String>,
    /// `jepsen` (a failed cas did nothing) or `observed` (it saw a different value).
    #[arg(long, default_value = "jepsen", value_parser = ["jepsen", "observed"])]
    failed_cas: String,
    /// Initial state of the linearizability model, as JSON (a register at `0`, a counter
    /// at `100`, a multi-register at `{"x":0,"y":0}`); also the `counter` checker's start.
    #[arg(long, value_parser = parse_json)]
    pub init: Option<serde_json::Value>,
    /// rw-register: infer version orders from each process's order (Elle's option).
    #[arg(long)]
    sequential_keys: bool,
    /// rw-register: infer version orders from real-time order (Elle's option).
    #[arg(long)]
    linearizable_keys: bool,
    /// rw-register: a write follows the value the same transaction read (Elle's option).
    #[arg(long)]
    wfr_keys: bool,
    /// Check a keyed history as one object instead of key by key.
    #[arg(long)]
    no_split: bool,
    /// Time bound for the check in seconds (then the verdict is `unknown`).
    #[arg(long = "check-time-limit")]
    check_time_limit: Option<f64>,
    /// Memory bound for the check in MiB.
    #[arg(long)]
    max_memory: Option<u64>,
}

/// Parses a `--init` argument.
fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

impl CheckFlags {
    /// The check options these flags set.
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            model: self.model.clone(),
            consistency_model: self.consistency_model.clone(),
            failed_cas_observed: self.failed_cas == "observed",
            init: self.init.clone(),
            sequential_keys: self.sequential_keys,
            linearizable_keys: self.linearizable_keys,
            wfr_keys: self.wfr_keys,
            no_split: self.no_split,
            time_limit: self.check_time_limit.map(Duration::from_secs_f64),
            max_memory: self.max_memory.map(|m| m * 1024 * 1024),
        }
    }
}
