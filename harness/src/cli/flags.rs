//! Check flags shared by `test` and `check`.

use clap::Args;
use splitbrain::check_options::CheckOptions;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub(crate) struct CheckFlags {
    /// Linearizability model (register, cas-register, kv, list-append, set, queue, ...).
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Required consistency model for transactional histories.
    #[arg(long)]
    pub(crate) consistency_model: Option<String>,
    /// `jepsen` (a failed cas did nothing) or `observed` (it saw a different value).
    #[arg(long, default_value = "jepsen", value_parser = ["jepsen", "observed"])]
    failed_cas: String,
    /// Initial state of the linearizability model, as JSON (a register at `0`, a counter
    /// at `100`, a multi-register at `{"x":0,"y":0}`); also the `counter` checker's start.
    #[arg(long, value_parser = parse_json)]
    pub(crate) init: Option<serde_json::Value>,
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
    pub(crate) fn options(&self) -> CheckOptions {
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
