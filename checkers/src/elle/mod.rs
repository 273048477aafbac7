//! Elle-style transactional consistency checking for list-append and rw-register
//! histories.
//!
//! Transactions are ops whose value is a list of micro-ops `[f, key, value]` (`r`,
//! `append` or `w`). The checker infers a version order for every key, builds a
//! dependency graph between transactions (ww, wr, rw, plus process or real-time order
//! when the required model needs them), finds the non-cycle anomalies Elle names (G1a,
//! G1b, dirty-update, duplicate-elements, incompatible-order, internal, future-read,
//! lost-update, cyclic-versions) and searches each strongly connected component for the
//! shortest cycle of each class (G0, G1c, G-single-item, G-nonadjacent-item, G2-item and
//! their `-process` / `-realtime` variants). Independently of that search, it proves
//! with linear strongly-connected-component passes which models' forbidden cycles exist
//! (Elle's `PL-1-cycle-exists` ... `PL-SS-cycle-exists`); those stand when the search
//! runs out of time and are dropped when a named anomaly already rules the model out.
//!
//! As in Elle, a history is invalid only if it shows an anomaly that the required model
//! forbids; `not` and `also_not` name the models the anomalies rule out.
//!
//! ```
//! use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
//! use splitbrain_checkers::Checker;
//! let checker = ElleChecker::new(ElleWorkload::ListAppend, ElleOptions::default()).unwrap();
//! assert_eq!(checker.name(), "elle-list-append");
//! ```

pub mod bench;
mod cycle_exists;
mod cycles;
mod found;
mod graph;
mod list_append;
mod model;
mod rw_register;
mod txn;
mod txn_build;

use crate::history::History;
use crate::verdict::{CheckBounds, CheckResult, Checker, Coverage, Validity};
use found::{Found, Namer};
use graph::{EdgeList, EdgeParts, EdgeSink, Graph};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use txn::MopKind;

/// Which transactional workload a history comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElleWorkload {
    /// Micro-ops `r` (returns the whole list) and `append` (unique values per key).
    ListAppend,
    /// Micro-ops `r` (returns one value or nil) and `w` (unique values per key).
    RwRegister,
}

/// Options for [`ElleChecker`].
#[derive(Debug, Clone)]
pub struct ElleOptions {
    /// The consistency model the history must satisfy (default `strict-serializable`).
    pub consistency_model: String,
    /// Overall time budget, and a memory budget for the checker's own tables (not the
    /// history): over it, the verdict is `unknown` naming the bound.
    pub bounds: CheckBounds,
    /// rw-register: assume each key is sequentially consistent and infer versions
    /// from each process's order.
    pub sequential_keys: bool,
    /// rw-register: assume each key is linearizable and infer versions from real time.
    pub linearizable_keys: bool,
    /// rw-register: assume writes follow reads within a transaction.
    pub wfr_keys: bool,
    /// Time budget for the cycle search in each strongly connected component.
    pub cycle_search_timeout: Duration,
}

impl Default for ElleOptions {
    fn default() -> Self {
        ElleOptions {
            consistency_model: "strict-serializable".to_string(),
            bounds: CheckBounds::default(),
            sequential_keys: false,
            linearizable_keys: false,
            wfr_keys: false,
            cycle_search_timeout: Duration::from_secs(1),
        }
    }
}

/// The consistency model named is not one Elle knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown consistency model `{0}`; known models: {known}", known = known_models_text())]
pub struct UnknownConsistencyModel(pub String);

fn known_models_text() -> String {
    model::all_models()
        .into_iter()
        .collect::<Vec<_>>()
        .join(", ")
}

/// The principal consistency models, weakest first: (name, one-line description).
/// Every other model name Elle knows is accepted too.
pub fn consistency_models() -> &'static [(&'static str, &'static str)] {
    model::MAIN_MODELS
}

/// Anomaly types that make a result unknown rather than invalid.
const UNKNOWN_TYPES: &[&str] = &["empty-transaction-graph", "cycle-search-timeout"];

/// The Elle-style checker for one workload and required model.
#[derive(Debug, Clone)]
pub struct ElleChecker {
    workload: ElleWorkload,
    options: ElleOptions,
    prohibited: HashSet<String>,
}

impl ElleChecker {
    /// A checker for `workload` that requires `options.consistency_model`.
    pub fn new(
        workload: ElleWorkload,
        options: ElleOptions,
    ) -> Result<Self, UnknownConsistencyModel> {
        if !model::all_models().contains(&options.consistency_model) {
            return Err(UnknownConsistencyModel(options.consistency_model.clone()));
        }
        let prohibited = model::prohibited_anomalies(&options.consistency_model);
        Ok(ElleChecker {
            workload,
            options,
            prohibited,
        })
    }

    /// Which order edges the required model needs: real time if it forbids any
    /// `-realtime` cycle (process order is then implied), else process order if it
    /// forbids any `-process` cycle, else none.
    fn order_edges(&self) -> u8 {
        if self.prohibited.iter().any(|a| a.ends_with("-realtime")) {
            graph::REALTIME
        } else if self.prohibited.iter().any(|a| a.ends_with("-process")) {
            graph::PROCESS
        } else {
            0
        }
    }

    fn unknown(&self, explanation: String) -> CheckResult {
        CheckResult::new(self.name(), Validity::Unknown, explanation)
    }

    /// `unknown` naming the memory bound when `bytes` (the checker's own tables so far,
    /// not the history) exceed it.
    fn over_memory(&self, bytes: u64, stage: &str) -> Option<CheckResult> {
        let max = self.options.bounds.max_memory?;
        (bytes > max).then(|| {
            let mut r = self.unknown(format!(
                "stopped at the memory bound ({} MiB) while {stage}: the checker's tables need about {} MiB",
                max >> 20,
                bytes.div_ceil(1 << 20)
            ));
            r.details = json!({"workload": self.name(), "memory-bound-bytes": max, "needed-bytes": bytes});
            r
        })
    }
}

impl Checker for ElleChecker {
    fn name(&self) -> String {
        match self.workload {
            ElleWorkload::ListAppend => "elle-list-append".into(),
            ElleWorkload::RwRegister => "elle-rw-register".into(),
        }
    }

    fn check(&self, history: &History) -> CheckResult {
        let started = Instant::now();
        let overall_deadline = self.options.bounds.time_limit.map(|d| started + d);
        let list = self.workload == ElleWorkload::ListAppend;
        let mut phases: Vec<(&str, u64)> = Vec::new();
        let mut lap = Instant::now();
        let mut phase = |name: &'static str, phases: &mut Vec<(&str, u64)>| {
            phases.push((name, lap.elapsed().as_millis() as u64));
            lap = Instant::now();
        };
        let txns = txn::build(history, list);
        phase("intern", &mut phases);
        if let Some(r) = self.over_memory(txns.heap_bytes(), "interning transactions") {
            return r;
        }
        let wrong_kind = if list {
            MopKind::Write
        } else {
            MopKind::Append
        };
        if !txns.unexpected.is_empty() || txns.mops.iter().any(|m| m.kind == wrong_kind) {
            return self.unknown(format!(
                "the history has micro-ops this workload does not use (expected {}); is this the right workload?",
                if list { "r and append" } else { "r and w" }
            ));
        }
        if let Some(&pair) = txns.malformed.first() {
            let index = history.op_index(history.pair_slots()[pair as usize].invoke_pos);
            return self.unknown(format!(
                "{} transaction(s) are not lists of [f key value] micro-ops (the first is invoked at index {index})",
                txns.malformed.len()
            ));
        }
        let namer = Namer {
            txns: &txns,
            history,
        };
        let mut found = Found::default();
        let mut edges = EdgeList::default();
        // List-append's index of readers by version, for the graph, is built while the
        // analyses run (on whichever core they leave free).
        let mut readers = None;
        let analysis = match self.workload {
            ElleWorkload::ListAppend => {
                let (analyzed, built) = rayon::join(
                    || list_append::analyze(&txns, &namer, &mut found),
                    || list_append::Readers::build(&txns),
                );
                readers = Some(built);
                match analyzed {
                    Ok(index) => Ok(Analysis::List(index)),
                    // Elle refuses such histories: unknown, typed `duplicate-appends`.
                    Err(dup) => {
                        let mut r = self.unknown(dup.explanation);
                        r.anomaly_types = vec!["duplicate-appends".into()];
                        r.details = json!({"workload": self.name(),
                            "duplicate-appends": {"key": dup.key, "value": dup.value}});
                        return r;
                    }
                }
            }
            ElleWorkload::RwRegister => {
                let inference = rw_register::Inference {
                    wfr: self.options.wfr_keys,
                    sequential: self.options.sequential_keys,
                    linearizable: self.options.linearizable_keys,
                };
                rw_register::analyze(&txns, &namer, &mut found, &mut edges, inference)
                    .map(Analysis::Register)
            }
        };
        let analysis = match analysis {
            Ok(a) => a,
            Err(e) => return self.unknown(e),
        };
        phase("infer", &mut phases);
        // The graph is built in two passes over the same edges (count, then place), so
        // no list of edges is held beside it; list-append infers its edges anew in each.
        let order = self.order_edges();
        let n = txns.txns.len();
        // Inferred edges in ranges of transactions (or of the edge list), real-time edges
        // in ranges of history positions, run in parallel; process order edges come from
        // one sequential scan.
        let threads = rayon::current_num_threads() * 2;
        let mut parts: EdgeParts = match (&analysis, &readers) {
            (Analysis::List(index), Some(readers)) => graph::split_range(n, threads)
                .map(|r| {
                    let (txns, readers) = (&txns, readers);
                    Box::new(move |sink: &mut dyn EdgeSink| {
                        list_append::edges(txns, index, readers, r.clone(), sink)
                    }) as Box<dyn Fn(&mut dyn EdgeSink) + Sync>
                })
                .collect(),
            _ => graph::split_range(edges.len(), threads)
                .map(|r| {
                    let edges = &edges;
                    Box::new(move |sink: &mut dyn EdgeSink| edges.replay_range(r.clone(), sink))
                        as Box<dyn Fn(&mut dyn EdgeSink) + Sync>
                })
                .collect(),
        };
        let (txns_ref, history_len) = (&txns, history.len());
        match order {
            // Real-time edges are most of a big history's edges: in ranges of history
            // positions, in parallel.
            graph::REALTIME => {
                for r in graph::split_range(history_len, threads) {
                    parts.push(Box::new(move |sink: &mut dyn EdgeSink| {
                        graph::add_realtime_edges_in(txns_ref, history_len, r.clone(), sink)
                    }))
                }
            }
            graph::PROCESS => parts.push(Box::new(move |sink: &mut dyn EdgeSink| {
                graph::add_process_edges(txns_ref, sink)
            })),
            _ => {}
        }
        let offsets = Graph::count(n, &parts);
        phase("edges", &mut phases);
        // The graph holds each edge (4 + 1 bytes) plus two offsets per transaction.
        let graph_bytes = offsets.last().copied().unwrap_or(0) as u64 * 5 + n as u64 * 24;
        if let Some(r) = self.over_memory(
            txns.heap_bytes() + graph_bytes,
            "building the dependency graph",
        ) {
            return r;
        }
        let g = Graph::fill(offsets, &parts);
        drop(parts);
        drop(edges);
        drop(readers);
        phase("graph", &mut phases);
        if g.edge_count() == 0 {
            found.flag(
                "empty-transaction-graph",
                "no dependencies between transactions could be inferred, so nothing can be concluded".into(),
            );
        }
        let explain = |a: u32, b: u32, kind: u8| match &analysis {
            Analysis::List(idx) => list_append::explain(&txns, idx, &namer, a, b, kind),
            Analysis::Register(vg) => rw_register::explain(&txns, vg, &namer, a, b, kind),
        };
        // One pass over the whole graph serves both the cycle search and the proofs.
        let components = graph::nontrivial_sccs(&g, 0xff, None);
        cycles::find_cycles(
            &g,
            &components,
            &namer,
            &explain,
            &mut found,
            self.options.cycle_search_timeout,
            overall_deadline,
        );
        phase("cycles", &mut phases);
        // Elle's cycle-existence proofs: linear, so they stand even when the cycle
        // search above timed out; redundant ones (a named anomaly says more) are dropped.
        cycle_exists::find(&g, &components, &namer, &mut found);
        cycle_exists::remove_redundant(&mut found);
        phase("cycle-exists", &mut phases);
        let mut r = self.result(found, &namer, &g, started);
        r.details["phase-ms"] = phases
            .iter()
            .map(|(n, ms)| (n.to_string(), json!(ms)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        r
    }
}

enum Analysis {
    List(list_append::AppendIndex),
    Register(rw_register::VersionGraph),
}

impl ElleChecker {
    fn result(&self, found: Found, namer: &Namer, g: &Graph, started: Instant) -> CheckResult {
        let model = &self.options.consistency_model;
        let reportable: Vec<String> = found
            .by_type
            .keys()
            .filter(|t| self.prohibited.contains(*t) || UNKNOWN_TYPES.contains(&t.as_str()))
            .cloned()
            .collect();
        let bad: Vec<&String> = reportable
            .iter()
            .filter(|t| self.prohibited.contains(*t))
            .collect();
        let unreported: Vec<&String> = found
            .by_type
            .keys()
            .filter(|t| !reportable.contains(t))
            .collect();
        let n = namer.txns.txns.len();
        let coverage = coverage(namer.txns);
        let mut details = json!({
            "workload": self.name(),
            "consistency-model": model,
            "transactions": n,
            "dependency-edges": g.edge_count(),
            "elapsed-ms": started.elapsed().as_millis() as u64,
        });
        if !unreported.is_empty() {
            details["not-forbidden-by-model"] = json!(unreported);
        }
        if reportable.is_empty() {
            let mut r = CheckResult::new(
                self.name(),
                Validity::Valid,
                format!("checked {n} transactions: no anomaly that {model} forbids"),
            );
            r.details = details;
            // Dependencies are inferred from what reads saw: committed writes alone
            // show nothing about isolation.
            let committed = coverage.get("committed").unwrap_or(0);
            let reads = coverage.get("reads").unwrap_or(0);
            return r
                .with_coverage(coverage)
                .unless_unobserved(committed, "no committed transaction")
                .unless_unobserved(
                    reads,
                    "no committed transaction read anything (no ok r micro-op)",
                );
        }
        let valid = if bad.is_empty() {
            Validity::Unknown
        } else {
            Validity::Invalid
        };
        let (not, also_not) = model::boundary(found.by_type.keys().map(String::as_str));
        let mut anomalies = serde_json::Map::new();
        for t in &reportable {
            let (count, cases) = &found.by_type[t];
            let instances: Vec<Value> = cases
                .iter()
                .map(|c| {
                    let mut v = json!({"explanation": c.explanation});
                    if let Value::Object(m) = &c.data {
                        for (k, x) in m {
                            v[k] = x.clone();
                        }
                    }
                    v
                })
                .collect();
            anomalies.insert(t.clone(), json!({"count": count, "instances": instances}));
        }
        details["anomalies"] = Value::Object(anomalies);
        // Evidence and headline from the most severe forbidden anomaly: the one that rules
        // out the most models (a G1a before a G-nonadjacent), else the first reported.
        let headline = bad
            .iter()
            .copied()
            .max_by_key(|t| {
                (
                    model::impossible_models([t.as_str()]).len(),
                    std::cmp::Reverse(t.as_str()),
                )
            })
            .unwrap_or(&reportable[0]);
        let first = &found.by_type[headline].1[0];
        let evidence: Vec<Value> = first
            .txns
            .iter()
            .take(16)
            .map(|t| namer.op_json(*t))
            .collect();
        let mut explanation = match valid {
            Validity::Invalid => format!(
                "{model} is violated: found {} in {n} transactions. Most severe, {headline}: {}",
                reportable.join(", "),
                first.explanation
            ),
            _ => format!(
                "could not decide {model}: {}. {}",
                reportable.join(", "),
                first.explanation
            ),
        };
        if !not.is_empty() {
            explanation.push_str(&format!(". Ruled out: {}", not.join(", ")));
        }
        CheckResult {
            checker: self.name(),
            valid,
            explanation,
            evidence,
            anomaly_types: reportable,
            not,
            also_not,
            details,
            coverage,
        }
    }
}

/// What an Elle check saw: transactions, committed ones, keys, and the read micro-ops of
/// committed transactions (the observations every inferred dependency rests on).
fn coverage(txns: &txn::Txns) -> Coverage {
    let committed: Vec<&txn::Txn> = txns.txns.iter().filter(|t| t.ok()).collect();
    let reads = committed
        .iter()
        .flat_map(|t| txns.mops_of(t))
        .filter(|m| m.kind == MopKind::Read)
        .count();
    Coverage::of([
        ("transactions", txns.txns.len() as u64),
        ("committed", committed.len() as u64),
        ("keys", txns.num_keys() as u64),
        ("reads", reads as u64),
    ])
}
