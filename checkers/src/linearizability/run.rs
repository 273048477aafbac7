//! The driver: prepare parts, search them in parallel, combine the verdicts.

use super::explain::{explain_invalid, explain_stopped};
use super::model::Model;
use super::models::PerKey;
use super::prepare::prepare;
use super::search::{search, Budget, Mode, Outcome, Part, Stop};
use super::LinearizabilityOptions;
use crate::history::History;
use crate::verdict::{CheckResult, Validity};
use rayon::prelude::*;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Without an explicit memory bound the memo is still capped, so no check can be killed
/// for memory: 2 GiB.
const DEFAULT_MAX_MEMORY: u64 = 2 << 30;

/// Checks a history against any [`Model`] with the given options.
///
/// With `split_by_key: false`, a keyed history is checked as one object whose state maps
/// each key to the model's per-key state.
pub fn check_model<M: Model>(
    model: &M,
    history: &History,
    options: &LinearizabilityOptions,
) -> CheckResult {
    let keyed = history.pairs().iter().any(|p| p.key.is_some());
    if !options.split_by_key && keyed {
        run(&PerKey(model), history, options, false)
    } else {
        run(model, history, options, options.split_by_key)
    }
}

enum PartVerdict<S> {
    Valid,
    Invalid(super::search::Progress<S>),
    Stopped(Stop, super::search::Progress<S>),
}

fn run<M: Model>(
    model: &M,
    history: &History,
    options: &LinearizabilityOptions,
    split: bool,
) -> CheckResult {
    let started = Instant::now();
    let mut parts = match prepare(model, history, split) {
        Ok(p) => p,
        Err(bad) => {
            let pair = &history.pairs()[bad.pair];
            let mut r = CheckResult::new(
                "linearizable",
                Validity::Unknown,
                format!(
                    "cannot check: op at index {} (process {}, {}): {}",
                    pair.invoke_pos, pair.process, pair.f, bad.reason
                ),
            );
            r.details = json!({"malformed_op": pair.invoke_pos});
            return r;
        }
    };
    // Largest parts first, so the slowest part starts early and the tail stays short.
    parts.sort_by_key(|p| std::cmp::Reverse(p.ops.len()));
    let budget = Budget {
        deadline: options.bounds.time_limit.map(|d| started + d),
        max_memory: Some(options.bounds.max_memory.unwrap_or(DEFAULT_MAX_MEMORY)),
        used_memory: AtomicU64::new(0),
        cancel: AtomicBool::new(false),
    };
    let verdicts: Vec<PartVerdict<M::State>> = parts
        .par_iter()
        .map(|part| {
            let v = check_part(model, part, &budget);
            if matches!(v, PartVerdict::Invalid(_)) {
                budget.cancel.store(true, Ordering::Relaxed);
            }
            v
        })
        .collect();

    // Report the invalid part with the smallest key, so the result is deterministic.
    let invalid = parts
        .iter()
        .zip(&verdicts)
        .filter_map(|(p, v)| match v {
            PartVerdict::Invalid(prog) => Some((p, prog)),
            _ => None,
        })
        .min_by(|a, b| a.0.key.cmp(&b.0.key));
    if let Some((part, prog)) = invalid {
        return explain_invalid(model, history, part, prog, parts.len());
    }
    let stopped: Vec<_> = parts
        .iter()
        .zip(&verdicts)
        .filter_map(|(p, v)| match v {
            PartVerdict::Stopped(s, prog) if *s != Stop::Cancelled => Some((p, *s, prog)),
            _ => None,
        })
        .collect();
    if !stopped.is_empty() {
        return explain_stopped(model, history, &stopped, parts.len(), &options.bounds);
    }
    let ops: usize = parts.iter().map(|p| p.ops.len()).sum();
    let mut r = CheckResult::new(
        "linearizable",
        Validity::Valid,
        format!(
            "linearizable: {} ops in {} independent part{} each have a valid order",
            ops,
            parts.len(),
            if parts.len() == 1 { "" } else { "s" }
        ),
    );
    r.details = json!({"parts": parts.len(), "ops_checked": ops});
    r
}

fn check_part<M: Model>(model: &M, part: &Part<M::Op>, budget: &Budget) -> PartVerdict<M::State> {
    let has_optional = part.ops.iter().any(|o| !o.required);
    if has_optional {
        if model.small_state_space() {
            match search(model, part, Mode::Relaxed, budget) {
                Outcome::Linearizable { exact: true } => return PartVerdict::Valid,
                Outcome::NotLinearizable(p) => return PartVerdict::Invalid(p),
                Outcome::Stopped(Stop::Cancelled, p) => {
                    return PartVerdict::Stopped(Stop::Cancelled, p)
                }
                // Inconclusive (or out of budget, and then the next search stops too).
                _ => {}
            }
        }
        match search(model, part, Mode::Greedy, budget) {
            Outcome::Linearizable { .. } => return PartVerdict::Valid,
            Outcome::Stopped(Stop::Cancelled, p) => {
                return PartVerdict::Stopped(Stop::Cancelled, p)
            }
            _ => {}
        }
    }
    let o = search(model, part, Mode::Exact, budget);
    match o {
        Outcome::Linearizable { .. } => PartVerdict::Valid,
        Outcome::NotLinearizable(p) => PartVerdict::Invalid(p),
        Outcome::Stopped(s, p) => PartVerdict::Stopped(s, p),
    }
}
