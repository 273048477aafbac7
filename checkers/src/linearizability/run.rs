//! The driver: prepare parts, search them in parallel, combine the verdicts.

use super::explain::{explain_invalid, explain_stopped};
use super::factor::Components;
use super::model::Model;
use super::models::PerKey;
use super::prepare::prepare;
use super::search::{search, Budget, Mode, Outcome, Part, Progress, Stop};
use super::LinearizabilityOptions;
use crate::history::History;
use crate::verdict::{CheckResult, Coverage, Validity};
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
    // Split checks never need every pair at once (prepare reads them one by one).
    if !options.split_by_key && history.pairs().iter().any(|p| p.key.is_some()) {
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
            let Some(pair) = history.pair(bad.pair) else {
                return CheckResult::new("linearizable", Validity::Unknown, bad.reason);
            };
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
    let prepared = started.elapsed();
    let coverage = coverage(&parts, split);
    // Largest parts first, so the slowest part starts early and the tail stays short.
    parts.sort_by_key(|p| std::cmp::Reverse(p.ops.len()));
    let budget = Budget {
        deadline: options.bounds.time_limit.map(|d| started + d),
        max_memory: Some(options.bounds.max_memory.unwrap_or(DEFAULT_MAX_MEMORY)),
        used_memory: AtomicU64::new(0),
        cancel: AtomicBool::new(false),
    };
    let verdicts = check_parts(model, &parts, &budget);
    if profile_level() >= 1 {
        eprintln!(
            "linearizability profile: prepare {:.3} s ({} parts, {} ops, {} unsure), search {:.3} s",
            prepared.as_secs_f64(),
            parts.len(),
            coverage.get("ops").unwrap_or(0),
            coverage.get("unsure ops").unwrap_or(0),
            (started.elapsed() - prepared).as_secs_f64()
        );
    }

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
        return explain_invalid(model, history, part, prog, parts.len()).with_coverage(coverage);
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
        return explain_stopped(model, history, &stopped, parts.len(), &options.bounds)
            .with_coverage(coverage);
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
    let completed = coverage.get("ops").unwrap_or(0);
    r.with_coverage(coverage).unless_unobserved(
        completed,
        "no completed op (none ok, none an observed failure)",
    )
}

/// What the search was given: completed ops (ok, or a failure the model observes), ops
/// of unknown outcome it had to place or leave out, and keys (when split).
fn coverage<Op>(parts: &[super::search::Part<Op>], split: bool) -> Coverage {
    let (mut completed, mut unsure) = (0u64, 0u64);
    for o in parts.iter().flat_map(|p| &p.ops) {
        if o.required {
            completed += 1;
        } else {
            unsure += 1;
        }
    }
    let mut c = Coverage::of([("ops", completed), ("unsure ops", unsure)]);
    if split && parts.iter().any(|p| p.key.is_some()) {
        c.set("keys", parts.len() as u64);
    }
    c
}

/// A part's first step allowance; each retry multiplies it by [`ROUND_GROWTH`]. Growing
/// allowances let a quickly refuted part cancel the check even when other parts would
/// search for minutes (as Porcupine gets from one goroutine per part); the work repeated
/// across retries is at most 1 / (ROUND_GROWTH - 1) of the last attempt's.
const FIRST_ROUND_STEPS: u64 = 1 << 20;
const ROUND_GROWTH: u64 = 8;
/// Allowances at or above this are unlimited.
const UNLIMITED_FROM: u64 = 1 << 40;

/// Checks every part until each is decided, one is refuted, or a bound stops the check.
/// Workers take the pending attempt with the smallest allowance from a shared queue, so
/// cheap parts are decided first and no worker waits at a round barrier.
fn check_parts<M: Model>(
    model: &M,
    parts: &[Part<M::Op>],
    budget: &Budget,
) -> Vec<PartVerdict<M::State>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::sync::Mutex;

    // A lone part has nothing to interleave with: restarting would only repeat work.
    let first = if parts.len() == 1 {
        u64::MAX
    } else {
        FIRST_ROUND_STEPS
    };
    let queue: Mutex<BinaryHeap<Reverse<(u64, usize)>>> =
        Mutex::new((0..parts.len()).map(|i| Reverse((first, i))).collect());
    let verdicts: Mutex<Vec<Option<PartVerdict<M::State>>>> =
        Mutex::new(parts.iter().map(|_| None).collect());
    let workers = rayon::current_num_threads().clamp(1, parts.len().max(1));
    rayon::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|_| {
                // Bounded: each part is retried at most ~13 times before its allowance
                // becomes unlimited, and then it gets a final verdict.
                loop {
                    if budget.cancel.load(Ordering::Relaxed) {
                        break;
                    }
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(Reverse((steps, i))) = next else {
                        break;
                    };
                    let v = check_part(model, &parts[i], budget, steps);
                    match v {
                        PartVerdict::Stopped(Stop::Steps, _) => {
                            let grown = steps.saturating_mul(ROUND_GROWTH);
                            let grown = if grown >= UNLIMITED_FROM {
                                u64::MAX
                            } else {
                                grown
                            };
                            queue
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(Reverse((grown, i)));
                        }
                        v => {
                            if matches!(v, PartVerdict::Invalid(_)) {
                                budget.cancel.store(true, Ordering::Relaxed);
                            }
                            verdicts.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(v);
                        }
                    }
                }
            });
        }
    });
    verdicts
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|v| {
            v.unwrap_or(PartVerdict::Stopped(
                Stop::Cancelled,
                Progress {
                    best_prefix: Vec::new(),
                    stuck: None,
                    best_required: 0,
                    total_required: 0,
                    best_state: model.init(),
                    memo_entries: 0,
                    memo_bytes: 0,
                },
            ))
        })
        .collect()
}

/// The greedy pass's step allowance: this many per op of the part, plus the minimum.
const GREEDY_STEPS_PER_OP: u64 = 4;
const GREEDY_MIN_STEPS: u64 = 1 << 16;

/// `SPLITBRAIN_LIN_PROFILE` set: the check's phases (prepare, search) go to stderr; set to
/// `parts`, also each part's and each search's mode, size and time.
fn profile_level() -> u8 {
    static LEVEL: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| match std::env::var("SPLITBRAIN_LIN_PROFILE") {
        Ok(v) if v == "parts" => 2,
        Ok(_) => 1,
        Err(_) => 0,
    })
}

/// Per-part profile lines are wanted (see [`profile_level`]).
pub(crate) fn profiling() -> bool {
    profile_level() >= 2
}

fn check_part<M: Model>(
    model: &M,
    part: &Part<M::Op>,
    budget: &Budget,
    steps: u64,
) -> PartVerdict<M::State> {
    if !profiling() {
        return check_part_modes(model, part, budget, steps);
    }
    let t = Instant::now();
    let v = check_part_modes(model, part, budget, steps);
    let optional = part.ops.iter().filter(|o| !o.required).count();
    let verdict = match &v {
        PartVerdict::Valid => "valid".to_string(),
        PartVerdict::Invalid(_) => "invalid".to_string(),
        PartVerdict::Stopped(s, _) => format!("{s:?}"),
    };
    eprintln!(
        "linearizability profile: part {:?}: {} ops ({optional} unsure), {verdict} in {:.3} s",
        part.key,
        part.ops.len(),
        t.elapsed().as_secs_f64()
    );
    v
}

fn check_part_modes<M: Model>(
    model: &M,
    part: &Part<M::Op>,
    budget: &Budget,
    steps: u64,
) -> PartVerdict<M::State> {
    let has_optional = part.ops.iter().any(|o| !o.required);
    // Several components: focus on one at a time and, in the exact search, factor the
    // memo by component (see search.rs).
    let comps = Components::new(model, part);
    let comps = comps.as_ref();
    if has_optional {
        if model.small_state_space() {
            match search(model, part, Mode::Relaxed, budget, steps, comps) {
                Outcome::Linearizable { exact: true } => return PartVerdict::Valid,
                Outcome::NotLinearizable(p) => return PartVerdict::Invalid(p),
                Outcome::Stopped(s, p) => return PartVerdict::Stopped(s, p),
                // A relaxed order that reuses an indeterminate op proves nothing.
                Outcome::Linearizable { exact: false } => {}
            }
        }
        // The greedy pass's unfactored memo would meet the product of the components'
        // configurations, so a factored part goes straight to the exact search.
        if comps.is_none() {
            // Its own allowance: a greedy pass that succeeds walks a few entries per op,
            // one that fails may walk dozens before it gives up, and its failure proves
            // nothing either way, so past the allowance the exact search takes over (on 73k-op
            // keys with 5 % info: ~1.7 entries per op when greedy succeeds, ~3 for the
            // exact search, 15-50 for a greedy failure).
            let allowance = GREEDY_STEPS_PER_OP
                .saturating_mul(part.ops.len() as u64)
                .saturating_add(GREEDY_MIN_STEPS);
            match search(
                model,
                part,
                Mode::Greedy,
                budget,
                steps.min(allowance),
                None,
            ) {
                Outcome::Linearizable { .. } => return PartVerdict::Valid,
                Outcome::Stopped(Stop::Steps, _) if allowance < steps => {}
                Outcome::Stopped(s, p) => return PartVerdict::Stopped(s, p),
                // The greedy memo may cut real paths, so its failure proves nothing.
                Outcome::NotLinearizable(_) => {}
            }
        }
    }
    match search(model, part, Mode::Exact, budget, steps, comps) {
        Outcome::Linearizable { .. } => PartVerdict::Valid,
        Outcome::NotLinearizable(p) => PartVerdict::Invalid(p),
        Outcome::Stopped(s, p) => PartVerdict::Stopped(s, p),
    }
}
