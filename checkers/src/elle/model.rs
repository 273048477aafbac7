//! Elle's consistency-model lattice and anomaly implications.
//!
//! The tables mirror Elle's `elle.consistency-model` namespace (model implications, the
//! anomalies each model directly proscribes, and which anomalies imply which), so that
//! `valid`, `not` and `also_not` come out as Elle computes them.

use std::collections::{BTreeSet, HashMap, HashSet};

/// Friendly name -> canonical name, as Elle canonicalises model names.
const CANONICAL: &[(&str, &str)] = &[
    ("consistent-view", "PL-2+"),
    ("conflict-serializable", "PL-3"),
    ("cursor-stability", "PL-CS"),
    ("forward-consistent-view", "PL-FCV"),
    ("monotonic-snapshot-read", "PL-MSR"),
    ("monotonic-view", "PL-2L"),
    ("read-committed", "PL-2"),
    ("read-uncommitted", "PL-1"),
    ("repeatable-read", "PL-2.99"),
    ("serializable", "PL-3"),
    ("snapshot-isolation", "PL-SI"),
    ("strict-serializable", "PL-SS"),
    ("strong-serializable", "PL-SS"),
    ("update-serializable", "PL-3U"),
    ("strong-session-read-uncommitted", "strong-session-PL-1"),
    ("strong-session-read-committed", "strong-session-PL-2"),
    ("strong-read-uncommitted", "strong-PL-1"),
    ("strong-read-committed", "strong-PL-2"),
];

/// Model implications (a history satisfying the left satisfies each on the right).
/// Names may be friendly or canonical; they are canonicalised when used.
const MODEL_EDGES: &[(&str, &[&str])] = &[
    ("causal-cerone", &["read-atomic"]),
    ("consistent-view", &["cursor-stability", "monotonic-view"]),
    ("conflict-serializable", &["view-serializable"]),
    ("cursor-stability", &["read-committed", "PL-2"]),
    ("forward-consistent-view", &["consistent-view"]),
    ("PL-2", &["PL-1"]),
    ("PL-3", &["repeatable-read", "update-serializable"]),
    ("update-serializable", &["forward-consistent-view"]),
    ("monotonic-atomic-view", &["read-committed"]),
    ("monotonic-view", &["PL-2"]),
    ("monotonic-snapshot-read", &["PL-2"]),
    (
        "parallel-snapshot-isolation",
        &["causal-cerone", "update-atomic"],
    ),
    ("prefix", &["causal-cerone"]),
    ("read-atomic", &["monotonic-atomic-view"]),
    ("read-committed", &["read-uncommitted"]),
    (
        "repeatable-read",
        &["cursor-stability", "monotonic-atomic-view"],
    ),
    ("update-atomic", &["read-atomic"]),
    (
        "serializable",
        &["repeatable-read", "snapshot-isolation", "view-serializable"],
    ),
    ("session-serializable", &["1SR"]),
    (
        "snapshot-isolation",
        &[
            "forward-consistent-view",
            "monotonic-atomic-view",
            "monotonic-snapshot-read",
            "parallel-snapshot-isolation",
            "prefix",
        ],
    ),
    (
        "strict-serializable",
        &[
            "PL-3",
            "serializable",
            "linearizable",
            "snapshot-isolation",
            "strong-snapshot-isolation",
            "strong-session-serializable",
        ],
    ),
    ("strong-session-PL-1", &["PL-1"]),
    ("strong-session-PL-2", &["PL-2", "strong-session-PL-1"]),
    ("strong-PL-1", &["strong-session-PL-1"]),
    ("strong-PL-2", &["strong-session-PL-2", "strong-PL-1"]),
    (
        "strong-session-serializable",
        &["serializable", "strong-session-snapshot-isolation"],
    ),
    (
        "strong-session-snapshot-isolation",
        &["snapshot-isolation", "strong-session-PL-2"],
    ),
    ("strong-serializable", &["session-serializable"]),
    (
        "strong-snapshot-isolation",
        &["strong-session-snapshot-isolation", "strong-PL-2"],
    ),
    ("linearizable", &["sequential"]),
    ("sequential", &["causal"]),
    ("causal", &["writes-follow-reads", "PRAM"]),
    (
        "PRAM",
        &["monotonic-reads", "monotonic-writes", "read-your-writes"],
    ),
];

/// Anomalies each model proscribes directly (beyond those of weaker models).
const PROSCRIBED: &[(&str, &[&str])] = &[
    ("causal-cerone", &["internal", "G1a"]),
    ("cursor-stability", &["G1", "G-cursor", "lost-update"]),
    ("monotonic-view", &["G1", "G-monotonic"]),
    ("monotonic-snapshot-read", &["G1", "G-MSR"]),
    ("consistent-view", &["G1", "G-single"]),
    ("forward-consistent-view", &["G1", "G-SIb"]),
    ("parallel-snapshot-isolation", &["internal", "G1a"]),
    (
        "PL-3",
        &["G1", "G2", "predicate-read-miss", "PL-3-cycle-exists"],
    ),
    ("PL-2", &["G1", "PL-2-cycle-exists"]),
    (
        "PL-1",
        &[
            "G0",
            "duplicate-elements",
            "cyclic-versions",
            "garbage-read",
            "PL-1-cycle-exists",
        ],
    ),
    // A read of a value nobody wrote is corruption: every model forbids it, so every
    // weakest model (the lattice's sinks besides PL-1) proscribes it too.
    ("view-serializable", &["garbage-read"]),
    ("1SR", &["garbage-read"]),
    ("monotonic-reads", &["garbage-read"]),
    ("monotonic-writes", &["garbage-read"]),
    ("read-your-writes", &["garbage-read"]),
    ("writes-follow-reads", &["garbage-read"]),
    ("prefix", &["internal", "G1a"]),
    ("serializable", &["internal"]),
    (
        "snapshot-isolation",
        &[
            "internal",
            "G1",
            "G-SI",
            "G-nonadjacent",
            "PL-SI-cycle-exists",
        ],
    ),
    ("read-atomic", &["internal", "G1a", "future-read"]),
    (
        "repeatable-read",
        &["G1", "G2-item", "PL-2.99-cycle-exists", "lost-update"],
    ),
    ("update-atomic", &["lost-update"]),
    (
        "strict-serializable",
        &["G1", "G1c-realtime", "G2-realtime", "PL-SS-cycle-exists"],
    ),
    (
        "strong-session-PL-1",
        &["strong-session-PL-1-cycle-exists", "G0-process"],
    ),
    (
        "strong-session-PL-2",
        &["strong-session-PL-2-cycle-exists", "G1c-process"],
    ),
    ("strong-PL-1", &["strong-PL-1-cycle-exists", "G0-realtime"]),
    ("strong-PL-2", &["strong-PL-2-cycle-exists", "G1c-realtime"]),
    (
        "strong-session-snapshot-isolation",
        &[
            "internal",
            "G1-process",
            "G-nonadjacent-process",
            "strong-session-snapshot-isolation-cycle-exists",
        ],
    ),
    (
        "strong-snapshot-isolation",
        &[
            "internal",
            "G1-realtime",
            "G-nonadjacent-realtime",
            "strong-snapshot-isolation-cycle-exists",
        ],
    ),
    (
        "strong-session-serializable",
        &[
            "G1-process",
            "G2-process",
            "strong-session-serializable-cycle-exists",
        ],
    ),
    ("update-serializable", &["G1", "G-update"]),
];

/// Anomaly implications: finding the left means the right anomalies are present too.
const IMPLIED: &[(&str, &[&str])] = &[
    ("G0", &["G1c", "G0-process"]),
    ("G0-process", &["G1c-process", "G0-realtime"]),
    ("G0-realtime", &["G1c-realtime"]),
    ("G1a", &["G1"]),
    ("G1b", &["G1"]),
    ("G1c", &["G1", "G1c-process"]),
    ("G1c-process", &["G1c-realtime", "G1-process"]),
    ("G1c-realtime", &["G1-realtime"]),
    ("G1", &["G1-process"]),
    ("G1-process", &["G1-realtime"]),
    (
        "G-single-item",
        &["G-single", "G-single-item-process", "G-nonadjacent-item"],
    ),
    (
        "G-single-item-process",
        &[
            "G-single-process",
            "G-single-item-realtime",
            "G-nonadjacent-item-process",
        ],
    ),
    (
        "G-single-item-realtime",
        &["G-single-realtime", "G-nonadjacent-item-realtime"],
    ),
    ("G-single", &["G-nonadjacent", "GSIb", "G-single-process"]),
    (
        "G-single-process",
        &["G-nonadjacent-process", "G-single-realtime"],
    ),
    ("G-single-realtime", &["G-nonadjacent-realtime"]),
    (
        "G-nonadjacent-item",
        &["G-nonadjacent", "G2-item", "G-nonadjacent-item-process"],
    ),
    (
        "G-nonadjacent-item-process",
        &[
            "G-nonadjacent-process",
            "G2-item-process",
            "G-nonadjacent-item-realtime",
        ],
    ),
    (
        "G-nonadjacent-item-realtime",
        &["G2-item-realtime", "G-nonadjacent-realtime"],
    ),
    ("G-nonadjacent", &["G2", "G-nonadjacent-process"]),
    (
        "G-nonadjacent-process",
        &["G2-process", "G-nonadjacent-realtime"],
    ),
    ("G-nonadjacent-realtime", &["G2-realtime"]),
    ("G2", &["G2-process"]),
    ("G2-item", &["G2", "G2-item-process"]),
    ("G2-item-process", &["G2-process", "G2-item-realtime"]),
    ("G2-item-realtime", &["G2-realtime"]),
    ("G2-process", &["G2-realtime"]),
    ("GSIa", &["GSI"]),
    ("GSIb", &["GSI"]),
    ("incompatible-order", &["G1a"]),
    ("future-read", &["G1c"]),
    ("dirty-update", &["G1a"]),
    ("lost-update", &["write-skew", "G2-item"]),
    ("write-skew", &["G2"]),
];

/// The models `splitbrain` documents, with one-line descriptions.
pub(crate) const MAIN_MODELS: &[(&str, &str)] = &[
    ("read-uncommitted", "no dirty writes: forbids G0 (write cycles)"),
    ("read-committed", "no dirty reads: forbids G0, G1a, G1b and G1c"),
    ("repeatable-read", "read committed, plus no G2-item or lost updates (Adya PL-2.99)"),
    ("snapshot-isolation", "reads from a consistent snapshot; forbids G1, G-single, G-nonadjacent, lost updates; allows write skew"),
    ("serializable", "equivalent to some serial order of transactions (no G0, G1, G2 cycles)"),
    ("strong-session-snapshot-isolation", "snapshot isolation that also respects each process's order"),
    ("strong-session-serializable", "serializable and respecting each process's order"),
    ("strong-snapshot-isolation", "snapshot isolation that also respects real-time order"),
    ("strict-serializable", "serializable and respecting real-time order (the strongest)"),
];

/// Canonical name of a model (Elle's `canonical-model-name`).
pub(crate) fn canonical(model: &str) -> &str {
    CANONICAL
        .iter()
        .find(|(f, _)| *f == model)
        .map(|(_, c)| *c)
        .unwrap_or(model)
}

/// Friendly name of a canonical model (Elle's `friendly-model-name`).
pub(crate) fn friendly(model: &str) -> &str {
    match model {
        "PL-3" => "serializable",
        // Elle renders PL-SS as strong-serializable (its alias strict-serializable is
        // accepted as input).
        "PL-SS" => "strong-serializable",
        _ => CANONICAL
            .iter()
            .find(|(_, c)| *c == model)
            .map(|(f, _)| *f)
            .unwrap_or(model),
    }
}

/// Every model name Elle knows (friendly and canonical).
pub(crate) fn all_models() -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    for (a, bs) in MODEL_EDGES {
        s.insert(canonical(a).to_string());
        for b in *bs {
            s.insert(canonical(b).to_string());
        }
    }
    for (f, c) in CANONICAL {
        s.insert((*f).to_string());
        s.insert((*c).to_string());
    }
    s
}

/// Canonical model graph: out-edges (implied models) and in-edges.
struct ModelGraph {
    out: HashMap<String, Vec<String>>,
    inn: HashMap<String, Vec<String>>,
}

fn model_graph() -> ModelGraph {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    let mut inn: HashMap<String, Vec<String>> = HashMap::new();
    for (a, bs) in MODEL_EDGES {
        for b in *bs {
            let (a, b) = (canonical(a).to_string(), canonical(b).to_string());
            if a == b {
                continue;
            }
            out.entry(a.clone()).or_default().push(b.clone());
            inn.entry(b).or_default().push(a.clone());
        }
    }
    ModelGraph { out, inn }
}

fn bfs(
    start: impl IntoIterator<Item = String>,
    next: &HashMap<String, Vec<String>>,
) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut stack: Vec<String> = start.into_iter().collect();
    while let Some(x) = stack.pop() {
        if !seen.insert(x.clone()) {
            continue;
        }
        if let Some(ns) = next.get(&x) {
            stack.extend(ns.iter().cloned());
        }
    }
    seen
}

fn implied_graph() -> (HashMap<String, Vec<String>>, HashMap<String, Vec<String>>) {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    let mut inn: HashMap<String, Vec<String>> = HashMap::new();
    for (a, bs) in IMPLIED {
        for b in *bs {
            out.entry((*a).to_string())
                .or_default()
                .push((*b).to_string());
            inn.entry((*b).to_string())
                .or_default()
                .push((*a).to_string());
        }
    }
    (out, inn)
}

/// Every anomaly implied by the given ones (including themselves).
pub(crate) fn all_implied_anomalies<'a>(
    anomalies: impl IntoIterator<Item = &'a str>,
) -> HashSet<String> {
    let (out, _) = implied_graph();
    bfs(anomalies.into_iter().map(str::to_string), &out)
}

/// Every anomaly whose presence means the given model cannot hold (Elle's
/// `anomalies-prohibited-by`).
pub(crate) fn prohibited_anomalies(model: &str) -> HashSet<String> {
    let mg = model_graph();
    let models = bfs([canonical(model).to_string()], &mg.out);
    let mut direct: Vec<String> = Vec::new();
    for (m, anomalies) in PROSCRIBED {
        if models.contains(canonical(m)) {
            direct.extend(anomalies.iter().map(|a| (*a).to_string()));
        }
    }
    let (_, inn) = implied_graph();
    bfs(direct, &inn)
}

/// Canonical names of every model these anomalies rule out (Elle's
/// `anomalies->impossible-models`).
pub(crate) fn impossible_models<'a>(
    anomalies: impl IntoIterator<Item = &'a str>,
) -> HashSet<String> {
    let implied = all_implied_anomalies(anomalies);
    let direct = PROSCRIBED
        .iter()
        .filter(|(_, proscribed)| proscribed.iter().any(|a| implied.contains(*a)))
        .map(|(m, _)| canonical(m).to_string());
    models_implying(direct)
}

/// The given models and every model that implies one of them, canonical (Elle's
/// `all-impossible-models`: if these cannot hold, neither can those).
pub(crate) fn models_implying(models: impl IntoIterator<Item = String>) -> HashSet<String> {
    let start: Vec<String> = models
        .into_iter()
        .map(|m| canonical(&m).to_string())
        .collect();
    bfs(start, &model_graph().inn)
}

/// Elle's `friendly-boundary`: (`not`, `also_not`) for the anomalies found.
pub(crate) fn boundary<'a>(
    anomalies: impl IntoIterator<Item = &'a str>,
) -> (Vec<String>, Vec<String>) {
    let impossible = impossible_models(anomalies);
    let mg = model_graph();
    // Weakest: impossible models that imply no other impossible model.
    let weakest: BTreeSet<String> = impossible
        .iter()
        .filter(|m| {
            let below = bfs([(*m).clone()], &mg.out);
            !below.iter().any(|b| b != *m && impossible.contains(b))
        })
        .cloned()
        .collect();
    let not: BTreeSet<String> = weakest.iter().map(|m| friendly(m).to_string()).collect();
    let also: BTreeSet<String> = impossible
        .iter()
        .filter(|m| !weakest.contains(*m))
        .map(|m| friendly(m).to_string())
        .collect();
    (not.into_iter().collect(), also.into_iter().collect())
}

/// A topological rank of anomalies: an anomaly ranks before every anomaly it implies.
pub(crate) fn implication_rank(anomaly: &str) -> usize {
    // Longest path from any root in the implication graph.
    let (_, inn) = implied_graph();
    let mut memo: HashMap<String, usize> = HashMap::new();
    fn depth(
        a: &str,
        inn: &HashMap<String, Vec<String>>,
        memo: &mut HashMap<String, usize>,
        guard: usize,
    ) -> usize {
        if let Some(d) = memo.get(a) {
            return *d;
        }
        let d = match inn.get(a) {
            Some(ps) if guard < 64 => ps
                .iter()
                .map(|p| depth(p, inn, memo, guard + 1) + 1)
                .max()
                .unwrap_or(0),
            _ => 0,
        };
        memo.insert(a.to_string(), d);
        d
    }
    depth(anomaly, &inn, &mut memo, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g1c_rules_out_read_committed() {
        let (not, also) = boundary(["G1c"]);
        assert_eq!(not, vec!["read-committed".to_string()]);
        assert!(also.contains(&"strong-serializable".to_string()));
        assert!(also.contains(&"serializable".to_string()));
        assert!(!also.contains(&"read-uncommitted".to_string()));
    }

    fn set(xs: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
        v.sort();
        v
    }

    /// The boundaries Elle's own consistency-model tests assert.
    #[test]
    fn matches_elle_friendly_boundaries() {
        assert_eq!(
            boundary(["internal"]),
            (
                set(&["read-atomic"]),
                set(&[
                    "causal-cerone",
                    "parallel-snapshot-isolation",
                    "prefix",
                    "update-atomic",
                    "serializable",
                    "snapshot-isolation",
                    "strong-serializable",
                    "strong-session-serializable",
                    "strong-session-snapshot-isolation",
                    "strong-snapshot-isolation"
                ])
            )
        );
        assert_eq!(
            boundary(["G1a"]),
            (
                set(&["read-committed"]),
                set(&[
                    "read-atomic",
                    "update-atomic",
                    "causal-cerone",
                    "consistent-view",
                    "cursor-stability",
                    "forward-consistent-view",
                    "monotonic-atomic-view",
                    "monotonic-snapshot-read",
                    "monotonic-view",
                    "parallel-snapshot-isolation",
                    "prefix",
                    "repeatable-read",
                    "serializable",
                    "snapshot-isolation",
                    "strong-read-committed",
                    "strong-snapshot-isolation",
                    "strong-serializable",
                    "strong-session-read-committed",
                    "strong-session-serializable",
                    "strong-session-snapshot-isolation",
                    "update-serializable"
                ])
            )
        );
        assert_eq!(
            boundary(["G-single"]),
            (
                set(&["consistent-view"]),
                set(&[
                    "snapshot-isolation",
                    "serializable",
                    "strong-serializable",
                    "strong-session-snapshot-isolation",
                    "strong-snapshot-isolation",
                    "strong-session-serializable",
                    "forward-consistent-view",
                    "update-serializable"
                ])
            )
        );
        assert_eq!(boundary(["G2", "internal"]).0, set(&["read-atomic"]));
        assert_eq!(
            boundary(["lost-update"]).0,
            set(&["cursor-stability", "update-atomic"])
        );
        assert_eq!(
            boundary(["G-single-realtime"]),
            (
                set(&["strong-snapshot-isolation"]),
                set(&["strong-serializable"])
            )
        );
        let (not, also) = boundary(["cyclic-versions"]);
        assert_eq!(not, set(&["read-uncommitted"]));
        assert_eq!(
            also,
            set(&[
                "read-committed",
                "snapshot-isolation",
                "causal-cerone",
                "consistent-view",
                "cursor-stability",
                "forward-consistent-view",
                "monotonic-atomic-view",
                "monotonic-snapshot-read",
                "monotonic-view",
                "parallel-snapshot-isolation",
                "prefix",
                "read-atomic",
                "repeatable-read",
                "update-atomic",
                "serializable",
                "strong-read-committed",
                "strong-read-uncommitted",
                "strong-serializable",
                "strong-session-read-committed",
                "strong-session-read-uncommitted",
                "strong-session-serializable",
                "strong-session-snapshot-isolation",
                "strong-snapshot-isolation",
                "update-serializable"
            ])
        );
    }

    #[test]
    fn garbage_read_rules_out_every_model() {
        let impossible = impossible_models(["garbage-read"]);
        for m in all_models() {
            assert!(
                impossible.contains(canonical(&m)),
                "{m} allows garbage reads"
            );
        }
    }

    #[test]
    fn g2_item_rules_out_repeatable_read_not_si() {
        let (not, also) = boundary(["G2-item"]);
        assert_eq!(not, vec!["repeatable-read".to_string()]);
        assert!(!also.contains(&"snapshot-isolation".to_string()));
        assert!(also.contains(&"serializable".to_string()));
    }

    #[test]
    fn si_allows_write_skew_but_not_g_single() {
        let p = prohibited_anomalies("snapshot-isolation");
        assert!(!p.contains("G2-item"));
        assert!(p.contains("G-single-item"));
        assert!(p.contains("lost-update"));
        let s = prohibited_anomalies("strict-serializable");
        assert!(s.contains("G2-item-realtime") && s.contains("G-single-item-realtime"));
        assert!(s.contains("internal") && s.contains("future-read"));
    }
}
