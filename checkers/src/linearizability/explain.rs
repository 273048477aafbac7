//! Counterexamples: turning a failed or stopped search into words, evidence and details.

use super::model::Model;
use super::search::{Part, PartOp, Progress, Stop};
use crate::history::{History, OpPair, Outcome};
use crate::verdict::{CheckBounds, CheckResult, Validity};
use serde_json::{json, Value};

/// At most this many ops go into evidence and into the prefix listed in details.
const MAX_LISTED: usize = 50;

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::Fail => "fail",
        Outcome::Info => "info",
        Outcome::Pending => "pending",
    }
}

/// An op as a JSON object for evidence, named by the history's own indices.
pub(crate) fn op_json(history: &History, p: &OpPair) -> Value {
    json!({
        "index": history.op_index(p.invoke_pos),
        "complete_index": p.complete_pos.map(|c| history.op_index(c)),
        "time": p.invoke_time,
        "complete_time": p.complete_time,
        "process": p.process,
        "f": p.f,
        "key": p.key,
        "invoke_value": p.invoke_value,
        "value": p.value,
        "outcome": outcome_name(p.outcome),
    })
}

struct Clock<'h> {
    times: bool,
    history: &'h History,
}

impl Clock<'_> {
    fn new(history: &History) -> Clock<'_> {
        Clock {
            // From the op heads: a lazily read history is not materialized for this.
            times: (0..history.len()).any(|p| history.op_time(p).is_some_and(|t| t != 0)),
            history,
        }
    }
    fn point(&self, time: Option<u64>, pos: Option<usize>) -> String {
        match (self.times, time, pos) {
            // Milliseconds when that is exact, else microseconds, so close ops stay apart.
            (true, Some(t), _) if t % 1_000_000 == 0 => format!("{:.3} s", t as f64 / 1e9),
            (true, Some(t), _) => format!("{:.6} s", t as f64 / 1e9),
            (false, _, Some(p)) => format!("index {}", self.history.op_index(p)),
            _ => "never".into(),
        }
    }
    fn invoked(&self, p: &OpPair) -> String {
        self.point(Some(p.invoke_time), Some(p.invoke_pos))
    }
    fn completed(&self, p: &OpPair) -> String {
        self.point(p.complete_time, p.complete_pos)
    }
}

/// "read of k3 returned 4", "write 7", "cas [1,2] (info)".
fn describe(p: &OpPair) -> String {
    let key = p
        .key_string()
        .map(|k| format!(" of {k}"))
        .unwrap_or_default();
    let reads = matches!(p.f.as_str(), "read" | "get" | "r" | "dequeue");
    let mut s = if reads && p.outcome == Outcome::Ok {
        format!("{}{key} returned {}", p.f, p.value)
    } else if p.invoke_value.is_null() {
        format!("{}{key}", p.f)
    } else {
        format!("{} {}{key}", p.f, p.invoke_value)
    };
    if p.outcome != Outcome::Ok {
        s.push_str(&format!(" ({})", outcome_name(p.outcome)));
    }
    s
}

/// Builds the invalid result for a part whose search found no linearization.
///
/// Only what needs the model (replaying the prefix, trying the other ops against the
/// final state, the state as JSON) is done here; the words and evidence are built by
/// [`invalid_result`], which is compiled once instead of once per model type.
pub(crate) fn explain_invalid<M: Model>(
    model: &M,
    history: &History,
    part: &Part<M::Op>,
    prog: &Progress<M::State>,
    parts: usize,
) -> CheckResult {
    let Some(stuck) = stuck_op(&part.ops, &prog.best_prefix, prog.stuck) else {
        return CheckResult::new("linearizable", Validity::Invalid, "not linearizable");
    };

    // Replay the prefix to find the op that last changed the state.
    let mut state = model.init();
    let mut setter: Option<usize> = None;
    for &i in &prog.best_prefix {
        let po = &part.ops[i as usize];
        if let Some(next) = model.step(&state, &part.values[po.op as usize]) {
            if next != state {
                setter = Some(i as usize);
            }
            state = next;
        }
    }
    // Ops that, applied to the final state, would let the stuck op take effect.
    let stuck_value = &part.values[part.ops[stuck].op as usize];
    let enablers: Vec<usize> = (0..part.ops.len())
        .filter(|&i| i != stuck)
        .filter(|&i| {
            model
                .step(&prog.best_state, &part.values[part.ops[i].op as usize])
                .and_then(|s| model.step(&s, stuck_value))
                .is_some()
        })
        .collect();

    invalid_result(
        history,
        &Refutation {
            key: part.key.as_ref(),
            ops: &part.ops,
            best_prefix: &prog.best_prefix,
            stuck,
            setter,
            enablers,
            state_json: model.state_json(&prog.best_state),
            memo_entries: prog.memo_entries,
        },
        parts,
    )
}

/// The op whose return entry stopped the search: the one the search names, else the
/// earliest-completing required op left out of the longest prefix.
fn stuck_op(ops: &[PartOp], best_prefix: &[u32], named: Option<u32>) -> Option<usize> {
    let mut in_prefix = vec![false; ops.len()];
    for &i in best_prefix {
        in_prefix[i as usize] = true;
    }
    named.map(|i| i as usize).or_else(|| {
        (0..ops.len())
            .filter(|&i| ops[i].required && !in_prefix[i])
            .min_by_key(|&i| ops[i].end)
    })
}

/// What a refuted part's explanation is made of, with the model already applied.
struct Refutation<'a> {
    key: Option<&'a String>,
    ops: &'a [PartOp],
    best_prefix: &'a [u32],
    /// The part op that cannot take effect.
    stuck: usize,
    /// The prefix's last op that changed the state.
    setter: Option<usize>,
    /// Ops that, applied to the prefix's final state, would let the stuck op take effect.
    enablers: Vec<usize>,
    /// The prefix's final state.
    state_json: Value,
    memo_entries: usize,
}

/// The invalid result's text, evidence and details (see [`explain_invalid`]).
fn invalid_result(history: &History, found: &Refutation<'_>, parts: usize) -> CheckResult {
    // Pairs one at a time: the whole history's values are never held for an explanation.
    let pair = |i: usize| {
        history
            .pair(i)
            .expect("a part's ops index the history's pairs")
    };
    let invoke_pos = |i: usize| history.pair_slots()[i].invoke_pos;
    let clock = Clock::new(history);
    let ops = found.ops;
    let stuck = found.stuck;
    let setter = found.setter;
    let enablers = &found.enablers;
    let stuck_op = &ops[stuck];
    let stuck_pair = pair(stuck_op.pair);
    let sp = &*stuck_pair;

    let key_text = found.key.map(|k| format!("key {k}: ")).unwrap_or_default();
    let state_json = &found.state_json;
    let mut text = format!(
        "{key_text}not linearizable. {} (process {}, invoked at {}, completed at {}) cannot take \
         effect: no order of the ops consistent with real time explains it. The longest \
         linearizable prefix found has {} ops and leaves the state at {}",
        describe(sp),
        sp.process,
        clock.invoked(sp),
        clock.completed(sp),
        found.best_prefix.len(),
        state_json,
    );
    if let Some(s) = setter {
        let w = pair(ops[s].pair);
        text.push_str(&format!(
            ", set by {} (process {}), which completed at {}",
            describe(&w),
            w.process,
            clock.completed(&w)
        ));
    }
    text.push('.');
    if enablers.is_empty() {
        text.push_str(
            " No op of this object could have produced a state in which it takes effect.",
        );
    } else {
        let setter_pair = setter.map(|s| pair(ops[s].pair));
        let listed: Vec<String> = enablers
            .iter()
            .take(3)
            .map(|&i| {
                let e = pair(ops[i].pair);
                let e = &*e;
                let why = match setter_pair.as_deref() {
                    Some(w) if e.precedes(w) => format!(
                        "was overwritten by {}, which completed at {}",
                        describe(w),
                        clock.completed(w)
                    ),
                    _ if sp.precedes(e) => format!(
                        "was invoked only at {}, after it completed",
                        clock.invoked(e)
                    ),
                    _ => "cannot be ordered to fit with the other ops".into(),
                };
                format!(
                    "{} (process {}, completed at {}) {why}",
                    describe(e),
                    e.process,
                    clock.completed(e)
                )
            })
            .collect();
        text.push_str(&format!(
            " The op{} that could explain it: {}.",
            if enablers.len() == 1 { "" } else { "s" },
            listed.join("; ")
        ));
    }

    // Evidence: the stuck op, the ops concurrent with it, the last setter and the enablers.
    let mut chosen: Vec<usize> = vec![stuck];
    chosen.extend(setter);
    chosen.extend(enablers.iter().take(5));
    chosen.extend((0..ops.len()).filter(|&i| {
        let o = &ops[i];
        o.invoke < stuck_op.end && o.end > stuck_op.invoke && i != stuck
    }));
    chosen.truncate(MAX_LISTED);
    chosen.sort_by_key(|&i| ops[i].invoke);
    chosen.dedup();
    let evidence: Vec<Value> = chosen
        .iter()
        .map(|&i| op_json(history, &pair(ops[i].pair)))
        .collect();
    let prefix: Vec<u64> = found
        .best_prefix
        .iter()
        .map(|&i| history.op_index(invoke_pos(ops[i as usize].pair)))
        .collect();
    let tail = prefix.len().saturating_sub(MAX_LISTED);

    let mut r = CheckResult::new("linearizable", Validity::Invalid, text);
    r.evidence = evidence;
    r.details = json!({
        "key": found.key,
        "stuck_op": op_json(history, sp),
        "longest_prefix_len": prefix.len(),
        "longest_prefix": &prefix[tail..],
        "longest_prefix_truncated": tail > 0,
        "state": state_json,
        "memo_entries": found.memo_entries,
        "parts": parts,
    });
    r
}

/// A part a bound stopped, with why and how far it got.
pub(crate) type StoppedPart<'a, M> = (
    &'a Part<<M as Model>::Op>,
    Stop,
    &'a Progress<<M as Model>::State>,
);

/// A stopped part without its model types: what [`stopped_result`] reports of it.
struct StoppedSummary<'a> {
    key: Option<&'a String>,
    stop: Stop,
    ops: &'a [PartOp],
    best_prefix: &'a [u32],
    best_required: usize,
    total_required: usize,
    memo_entries: usize,
    memo_bytes: u64,
}

/// Builds the unknown result when bounds stopped one or more parts. Only the first
/// part's state as JSON needs the model; [`stopped_result`] does the rest, compiled once.
pub(crate) fn explain_stopped<M: Model>(
    model: &M,
    history: &History,
    stopped: &[StoppedPart<'_, M>],
    parts: usize,
    bounds: &CheckBounds,
) -> CheckResult {
    let summaries: Vec<StoppedSummary<'_>> = stopped
        .iter()
        .map(|(part, stop, prog)| StoppedSummary {
            key: part.key.as_ref(),
            stop: *stop,
            ops: &part.ops,
            best_prefix: &prog.best_prefix,
            best_required: prog.best_required,
            total_required: prog.total_required,
            memo_entries: prog.memo_entries,
            memo_bytes: prog.memo_bytes,
        })
        .collect();
    let first_state = model.state_json(&stopped[0].2.best_state);
    stopped_result(history, &summaries, first_state, parts, bounds)
}

/// The unknown result's text and details (see [`explain_stopped`]); `first_state` is the
/// first stopped part's state after its longest prefix.
fn stopped_result(
    history: &History,
    stopped: &[StoppedSummary<'_>],
    first_state: Value,
    parts: usize,
    bounds: &CheckBounds,
) -> CheckResult {
    let describe_part = |p: &StoppedSummary<'_>| {
        let bound = match p.stop {
            Stop::Time => match bounds.time_limit {
                Some(t) => format!("the time limit ({:.1} s)", t.as_secs_f64()),
                None => "the time limit".into(),
            },
            Stop::Memory => format!(
                "the memory bound ({} MB of search tables)",
                p.memo_bytes >> 20
            ),
            Stop::Cancelled => "cancellation".into(),
            Stop::Steps => "the step allowance".into(),
        };
        format!(
            "{} stopped at {bound} after linearizing {} of {} ops that surely took effect \
             ({} memo entries)",
            p.key
                .map(|k| format!("key {k}"))
                .unwrap_or("the history".into()),
            p.best_required,
            p.total_required,
            p.memo_entries
        )
    };
    let lines: Vec<String> = stopped.iter().take(5).map(describe_part).collect();
    let text = format!(
        "unknown: {} of {parts} part{} could not be decided: {}{}",
        stopped.len(),
        if parts == 1 { "" } else { "s" },
        lines.join("; "),
        if stopped.len() > 5 { "; ..." } else { "" }
    );
    let mut r = CheckResult::new("linearizable", Validity::Unknown, text);
    let first = &stopped[0];
    let prefix: Vec<u64> = first
        .best_prefix
        .iter()
        .map(|&i| history.op_index(history.pair_slots()[first.ops[i as usize].pair].invoke_pos))
        .collect();
    let tail = prefix.len().saturating_sub(MAX_LISTED);
    r.details = json!({
        "key": first.key,
        "stopped_keys": stopped.iter().map(|p| p.key.cloned()).take(MAX_LISTED).collect::<Vec<_>>(),
        "longest_prefix_len": prefix.len(),
        "longest_prefix": &prefix[tail..],
        "state": first_state,
        "memo_entries": first.memo_entries,
        "memo_bytes": first.memo_bytes,
    });
    r
}
