//! The DDP checks against brute-force oracles on small random histories: each oracle is
//! the property's plain definition over all pairs of records (issue 12's checks; the
//! loss trend needs 20 steps, more than these histories have, so it never fires here).

use proptest::prelude::*;
use serde_json::{json, Value};
use splitbrain_checkers::ddp::{DdpCheck, DdpChecker, DdpOptions};
use splitbrain_checkers::history::{History, Op, OpType, Process};
use splitbrain_checkers::{Checker, Validity};
use std::collections::{BTreeMap, BTreeSet};

/// One recorded step: (process, rank, step, epoch, digest, samples).
type Rec = (u64, u64, u64, u64, u8, Vec<u64>);

const N: u64 = 4;

fn history(recs: &[Rec]) -> History {
    let mut ops = Vec::new();
    for (p, rank, step, epoch, digest, samples) in recs {
        let v = json!({"rank": rank, "step": step, "epoch": epoch, "digest": format!("d{digest}"),
                       "loss": 1.0, "samples": samples, "gen": 1});
        ops.push(Op::new(
            Process::Client(*p),
            OpType::Invoke,
            "step",
            Value::Null,
        ));
        ops.push(Op::new(Process::Client(*p), OpType::Ok, "step", v));
    }
    History::new(ops).unwrap()
}

fn replicas_oracle(recs: &[Rec]) -> bool {
    recs.iter()
        .all(|a| recs.iter().all(|b| a.2 != b.2 || a.4 == b.4))
}

fn data_oracle(recs: &[Rec]) -> bool {
    // A repeated report of (rank, step) must say the same.
    for a in recs {
        for b in recs {
            if (a.1, a.2) == (b.1, b.2) && (a.3 != b.3 || a.5 != b.5) {
                return false;
            }
        }
    }
    // First report of each (rank, step).
    let mut distinct: BTreeMap<(u64, u64), &Rec> = BTreeMap::new();
    for r in recs {
        distinct.entry((r.1, r.2)).or_insert(r);
    }
    let mut uses: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for r in distinct.values() {
        for id in &r.5 {
            *uses.entry((r.3, *id)).or_insert(0) += 1;
        }
    }
    if uses.values().any(|&n| n > 1) {
        return false;
    }
    let mut last_epoch: BTreeMap<u64, u64> = BTreeMap::new();
    for r in distinct.values() {
        let e = last_epoch.entry(r.1).or_insert(0);
        *e = (*e).max(r.3);
    }
    let epochs: BTreeSet<u64> = distinct.values().map(|r| r.3).collect();
    epochs.iter().all(|e| {
        let finished = last_epoch.values().all(|l| l > e);
        !finished || (0..N).all(|id| uses.contains_key(&(*e, id)))
    })
}

fn progress_oracle(recs: &[Rec]) -> bool {
    let procs: BTreeSet<u64> = recs.iter().map(|r| r.0).collect();
    procs.iter().all(|p| {
        let steps: Vec<u64> = recs.iter().filter(|r| r.0 == *p).map(|r| r.2).collect();
        steps == (1..=steps.len() as u64).collect::<Vec<_>>()
    })
}

fn rec() -> impl Strategy<Value = Rec> {
    (
        0..3u64,
        0..2u64,
        1..5u64,
        0..2u64,
        0..2u8,
        prop::collection::vec(0..N, 1..3),
    )
}

/// Histories that are mostly well-formed (processes stepping 1, 2, 3 ...), with random
/// digests, epochs and samples, plus a few arbitrary records.
fn histories() -> impl Strategy<Value = Vec<Rec>> {
    (
        prop::collection::vec(rec(), 0..10),
        prop::collection::vec(rec(), 0..3),
    )
        .prop_map(|(base, noise)| {
            let mut next: BTreeMap<u64, u64> = BTreeMap::new();
            let mut out: Vec<Rec> = base
                .into_iter()
                .map(|(p, _, _, epoch, d, s)| {
                    let step = next.entry(p).or_insert(0);
                    *step += 1;
                    // Process p follows rank p mod 2.
                    (p, p % 2, *step, epoch.min(*step / 2), d, s)
                })
                .collect();
            out.extend(noise);
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn checks_agree_with_the_oracles(recs in histories()) {
        let h = history(&recs);
        let opts = DdpOptions { dataset_size: Some(N), reference: None };
        let verdict = |c: DdpCheck| DdpChecker::new(c, opts.clone()).check(&h).valid;
        // No committed step: nothing was checked, whatever the oracle says.
        let want = |ok: bool| match (recs.is_empty(), ok) {
            (true, _) => Validity::Unknown,
            (false, true) => Validity::Valid,
            (false, false) => Validity::Invalid,
        };
        prop_assert_eq!(verdict(DdpCheck::Replicas), want(replicas_oracle(&recs)), "replicas {:?}", recs);
        prop_assert_eq!(verdict(DdpCheck::Data), want(data_oracle(&recs)), "data {:?}", recs);
        prop_assert_eq!(verdict(DdpCheck::Progress), want(progress_oracle(&recs)), "progress {:?}", recs);
    }
}

/// The generator covers both verdicts of every check (so the agreement above is tested
/// on valid and on invalid histories alike).
#[test]
fn the_generator_yields_valid_and_invalid_histories_for_each_check() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeSet<(&str, bool)> = BTreeSet::new();
    for _ in 0..2000 {
        let recs = histories().new_tree(&mut runner).unwrap().current();
        seen.insert(("replicas", replicas_oracle(&recs)));
        seen.insert(("data", data_oracle(&recs)));
        seen.insert(("progress", progress_oracle(&recs)));
    }
    assert_eq!(seen.len(), 6, "{seen:?}");
}
