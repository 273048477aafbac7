//! DDP checks following an elastic group (issue 12): rank 2 is left out of steps 3–5
//! (the group shrank to ranks 0 and 1, which take the rest of epoch 0 between them) and
//! is back from step 6. The checks must accept that run and still catch a member that
//! skips a step, a report from a non-member, and members named differently.

use serde_json::{json, Value};
use splitbrain_checkers::ddp::{ddp_checkers, DdpCheck, DdpChecker, DdpOptions};
use splitbrain_checkers::history::{History, Op, OpType, Process};
use splitbrain_checkers::{CheckResult, Checker, Validity};

const BATCH: u64 = 2;
const N: u64 = 24;
const STEPS: u64 = 9;

/// The members of a step: all three ranks but for steps 3–5.
fn members(step: u64) -> Vec<u64> {
    if (3..=5).contains(&step) {
        vec![0, 1]
    } else {
        vec![0, 1, 2]
    }
}

/// Epoch and first position of each step's global batch, by the re-split rule (each step
/// takes `members × batch` positions of the epoch; the permutation is the identity here).
fn positions() -> Vec<(u64, u64)> {
    let (mut epoch, mut offset) = (0, 0);
    let mut out = vec![(0, 0)];
    for step in 1..=STEPS {
        out.push((epoch, offset));
        offset += members(step).len() as u64 * BATCH;
        if offset >= N {
            epoch += 1;
            offset = 0;
        }
    }
    out
}

fn record(rank: u64, step: u64, members: &[u64]) -> Value {
    let (epoch, start) = positions()[step as usize];
    let n = members.len() as u64;
    let index = members.iter().position(|m| *m == rank).unwrap_or(0) as u64;
    let samples: Vec<u64> = (0..BATCH).map(|b| start + index + b * n).collect();
    json!({"rank": rank, "step": step, "epoch": epoch, "gen": if step < 3 { 1 } else if step < 6 { 2 } else { 3 },
           "digest": format!("d{step}"), "loss": 2.0 - step as f64 * 0.1, "samples": samples,
           "members": members, "world": n})
}

/// Every member's record of every step (rank r is process r), through `edit`.
fn history(edit: impl Fn(u64, u64, Value) -> Option<Value>) -> History {
    let mut ops = Vec::new();
    let mut time = 0;
    for step in 1..=STEPS {
        for rank in 0..3 {
            let m = members(step);
            if !m.contains(&rank) {
                continue;
            }
            let Some(v) = edit(rank, step, record(rank, step, &m)) else {
                continue;
            };
            for (t, value) in [(OpType::Invoke, Value::Null), (OpType::Ok, v)] {
                let mut op = Op::new(Process::Client(rank), t, "step", value);
                time += 10_000_000;
                op.time = time;
                ops.push(op);
            }
        }
    }
    History::new(ops).expect("well-formed")
}

fn options() -> DdpOptions {
    DdpOptions {
        dataset_size: Some(N),
        reference: Some((1..=STEPS).map(|s| (s, format!("d{s}"))).collect()),
    }
}

fn run(check: DdpCheck, h: &History) -> CheckResult {
    DdpChecker::new(check, options()).check(h)
}

#[test]
fn a_shrink_and_grow_run_is_valid_on_every_check() {
    let h = history(|_, _, v| Some(v));
    for c in ddp_checkers(&options()) {
        let r = c.check(&h);
        assert_eq!(r.valid, Validity::Valid, "{}: {}", r.checker, r.explanation);
    }
    let p = run(DdpCheck::Progress, &h);
    assert_eq!(p.details["steps_skipped_as_non_member"], 3, "{}", p.details);
    let d = run(DdpCheck::Data, &h);
    assert_eq!(
        d.details["complete_epochs_checked_for_gaps"], 1,
        "{}",
        d.details
    );
    let r = run(DdpCheck::Replicas, &h);
    assert_eq!(r.details["steps_with_fewer_members"], 3, "{}", r.details);
}

/// Without the member lists the same run has a gap: the skip is allowed only because the
/// reports say rank 2 was not in the group.
#[test]
fn the_skip_needs_the_member_lists() {
    let h = history(|_, _, mut v| {
        v.as_object_mut().map(|o| o.remove("members"));
        Some(v)
    });
    let p = run(DdpCheck::Progress, &h);
    assert_eq!(p.valid, Validity::Invalid, "{}", p.explanation);
    assert_eq!(p.anomaly_types, vec!["step-gap"]);
}

#[test]
fn a_member_that_skips_a_step_is_a_gap() {
    let h = history(|rank, step, v| (rank != 2 || step != 7).then_some(v));
    let p = run(DdpCheck::Progress, &h);
    assert_eq!(p.valid, Validity::Invalid, "{}", p.explanation);
    assert_eq!(p.anomaly_types, vec!["step-gap"]);
}

#[test]
fn reports_outside_the_group_and_differing_members_are_caught() {
    // Rank 1 claims step 4 was run by all three.
    let h = history(|rank, step, v| {
        if rank == 1 && step == 4 {
            Some(record(1, 4, &[0, 1, 2]))
        } else {
            Some(v)
        }
    });
    let r = run(DdpCheck::Replicas, &h);
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert!(
        r.anomaly_types.contains(&"member-divergence".to_string()),
        "{:?}",
        r.anomaly_types
    );
    // Rank 2 reports step 4 of the group without it.
    let h = history(|rank, step, v| {
        if rank == 0 && step == 4 {
            let mut w = v.clone();
            w["rank"] = json!(2);
            Some(w)
        } else {
            Some(v)
        }
    });
    let r = run(DdpCheck::Replicas, &h);
    assert!(
        r.anomaly_types.contains(&"non-member-report".to_string()),
        "{:?}",
        r.anomaly_types
    );
}

/// A restarted rank serving a step from its checkpoint before it rejoined a group names
/// no members (`"members": [], "world": 0`, seen in a `ddp/correct` run under kills): no
/// membership claim, so no anomaly; its digest is still compared with the others'.
#[test]
fn a_report_naming_no_members_claims_no_membership_but_its_digest_still_counts() {
    let h = history(|rank, step, v| {
        if rank == 0 && step == 4 {
            let mut w = v.clone();
            w["members"] = json!([]);
            w["world"] = json!(0);
            Some(w)
        } else {
            Some(v)
        }
    });
    let r = run(DdpCheck::Replicas, &h);
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
    let h = history(|rank, step, v| {
        if rank == 0 && step == 4 {
            let mut w = v.clone();
            w["members"] = json!([]);
            w["digest"] = json!("not-the-others");
            Some(w)
        } else {
            Some(v)
        }
    });
    let r = run(DdpCheck::Replicas, &h);
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert_eq!(r.anomaly_types, ["replica-divergence"], "{}", r.explanation);
}

/// The average of a shrunk group divided by the old world size (`shrink-without-rescale`):
/// the digests from step 3 on differ from the replay of the same member sequence, which
/// only `ddp-reference` can see (the replicas agree, the data is right).
#[test]
fn a_wrong_average_after_a_shrink_is_a_reference_mismatch_only() {
    let h = history(|_, step, mut v| {
        if step >= 3 {
            v["digest"] = json!(format!("x{step}"));
        }
        Some(v)
    });
    for c in ddp_checkers(&options()) {
        let r = c.check(&h);
        let want = if r.checker == "ddp-reference" {
            Validity::Invalid
        } else {
            Validity::Valid
        };
        assert_eq!(r.valid, want, "{}: {}", r.checker, r.explanation);
    }
}
