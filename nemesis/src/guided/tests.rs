use super::arms::node_of;
use super::*;
use std::collections::BTreeSet;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::plan::{ClockMode, FaultAction, NodeNames, Target};

fn state(active: u8, leaders: Option<u8>) -> AbstractState {
    AbstractState {
        leaders,
        leader_changed: false,
        lagging: None,
        silent: None,
        pending: None,
        active,
        clients: ClientClass::Healthy,
    }
}

fn kinds(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_chooser_tries_every_unseen_pair_before_repeating_one() {
    let arms = arms(&kinds(&["kill"]), 5, true)[0].clone();
    assert_eq!(arms.len(), 5 * 2 * 2);
    let s = state(0, Some(1));
    let mut c = Chooser::new(7);
    let mut seen = BTreeSet::new();
    for _ in 0..arms.len() {
        let a = c.choose(&s, &arms).unwrap();
        assert!(
            seen.insert(a.clone()),
            "{a} chosen twice before all were tried"
        );
    }
    assert_eq!(seen.len(), arms.len());
    // In another state, every pair is unseen again, and arms tried least anywhere
    // come first: after one more in the first state, that arm is last in line.
    let again = c.choose(&s, &arms).unwrap();
    let other = state(2, Some(2));
    let first = c.choose(&other, &arms).unwrap();
    assert_ne!(first, again);
}

#[test]
fn the_chooser_is_deterministic_for_a_seed_and_differs_across_seeds() {
    let arms = arms(&kinds(&["kill", "pause"]), 5, true)[0].clone();
    let run = |seed| {
        let mut c = Chooser::new(seed);
        (0..30)
            .map(|i| {
                let s = state((i % 3) as u8, Some((i % 2) as u8));
                let a = c.choose(&s, &arms).unwrap();
                c.reward(&s, &a, (i % 4) as f64);
                a.to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn once_every_pair_was_tried_the_rewarded_arm_is_preferred() {
    let arms = arms(&kinds(&["partition-leader"]), 5, false)[1].clone();
    assert_eq!(arms.len(), 2);
    let s = state(0, Some(1));
    let mut c = Chooser::new(3);
    for _ in 0..2 {
        let a = c.choose(&s, &arms).unwrap();
        let r = if a.long { 5.0 } else { 0.0 };
        c.reward(&s, &a, r);
    }
    let picks: Vec<bool> = (0..10)
        .map(|_| {
            let a = c.choose(&s, &arms).unwrap();
            let r = if a.long { 5.0 } else { 0.0 };
            c.reward(&s, &a, r);
            a.long
        })
        .collect();
    let long = picks.iter().filter(|&&l| l).count();
    assert!(long >= 7, "rewarded arm chosen {long}/10: {picks:?}");
}

#[test]
fn without_status_the_state_is_faults_and_clients_only() {
    let mut ab = Abstractor::default();
    let sample = Sample {
        nodes: None,
        clients: ClientCounts {
            ok: 10,
            timed: 10,
            latency_us: 10_000,
            ..Default::default()
        },
    };
    let st = ab.state(&sample, 0b010);
    assert_eq!(st.leaders, None);
    assert_eq!(st.lagging, None);
    assert_eq!(st.silent, None);
    assert_eq!(st.to_string(), "faults=net clients=healthy");
    // and no arm waits for a leader change that cannot be seen
    let all = arms(&kinds(&["kill", "partition"]), 5, false);
    assert!(all.iter().flatten().all(|a| a.timing == Timing::Now));
    assert!(all
        .iter()
        .flatten()
        .all(|a| !a.to_string().contains("after")));
}

#[test]
fn status_gives_leaders_changes_lag_and_silent_nodes() {
    let node = |leads, term, progress| {
        Some(NodeStatus {
            leads: Some(leads),
            term: Some(term),
            progress: Some(progress),
            pending: None,
        })
    };
    let mut ab = Abstractor::default();
    let one = Sample {
        nodes: Some(vec![node(true, 1, 100), node(false, 1, 100), None]),
        clients: ClientCounts {
            ok: 5,
            ..Default::default()
        },
    };
    let st = ab.state(&one, 0);
    assert_eq!(st.leaders, Some(1));
    assert!(!st.leader_changed);
    assert_eq!(st.silent, Some(1));
    assert_eq!(st.lagging, Some(0));
    let two = Sample {
        nodes: Some(vec![
            node(true, 1, 100),
            node(true, 2, 200),
            node(false, 2, 150),
        ]),
        clients: ClientCounts {
            ok: 5,
            info: 1,
            ..Default::default()
        },
    };
    let st = ab.state(&two, 0b001);
    assert_eq!(st.leaders, Some(2));
    assert!(st.leader_changed);
    // the most advanced node went 100 further since the sample before: a node 100
    // behind is one sample period behind, not lagging; 50 behind neither
    assert_eq!(st.lagging, Some(0));
    assert_eq!(st.clients, ClientClass::Timeouts);
    assert_eq!(ab.leader_changes, 1);
    assert_eq!(
        st.to_string(),
        "leaders=2+ changed lagging=0 silent=0 faults=process clients=timeouts"
    );
    // then it goes 10 further: 100 and 150 are far behind it now
    let three = Sample {
        nodes: Some(vec![
            node(false, 2, 100),
            node(true, 2, 210),
            node(false, 2, 150),
        ]),
        clients: ClientCounts {
            ok: 10,
            info: 1,
            ..Default::default()
        },
    };
    let st = ab.state(&three, 0b001);
    assert_eq!(st.lagging, Some(2));
    assert!(st.leader_changed);
    assert_eq!(st.leaders, Some(1));
}

#[test]
fn an_arm_becomes_a_plan_entry_and_a_plan_entry_its_arm() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let all = arms(&kinds(&["kill", "partition", "clock", "slow"]), 5, true);
    for arm in all.iter().flatten() {
        let f = concretize(arm, NodeNames::FROM_ONE, 5, 8_000, 100, &mut rng);
        assert_eq!(f.validate(), Ok(()), "{arm}");
        assert_eq!(f.check_nodes(NodeNames::FROM_ONE, 5), Ok(()), "{arm}");
        let back = arm_of(&f, 8_000);
        assert_eq!(back.kind, arm.kind, "{arm}");
        assert_eq!(back.whom, arm.whom, "{arm}");
        assert_eq!(back.long, arm.long, "{arm}");
    }
}

#[test]
fn without_leaders_slow_and_loss_name_each_node() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let all = arms(&kinds(&["slow", "loss"]), 5, false);
    let whoms: BTreeSet<&str> = all[1].iter().map(|a| a.whom.as_str()).collect();
    let want: BTreeSet<&str> = ["all", "node1", "node2", "node3", "node4", "node5"]
        .into_iter()
        .collect();
    assert_eq!(whoms, want);
    // slow: six whoms, short or long, mild or not; loss: six whoms, short or long
    assert_eq!(all[1].len(), 6 * 2 * 2 + 6 * 2);
    assert_eq!(all[1].iter().filter(|a| a.mild).count(), 6 * 2);
    assert!(all[1].iter().filter(|a| a.mild).all(|a| a.kind == "slow"));
    for arm in &all[1] {
        let f = concretize(arm, NodeNames::FROM_ONE, 5, 8_000, 100, &mut rng);
        assert_eq!(f.validate(), Ok(()), "{arm}");
        let nodes = match &f.action {
            FaultAction::Slow {
                nodes, delay_ms, ..
            } => {
                let top = if arm.mild { 60 } else { 200 };
                assert!((20..=top).contains(delay_ms), "{arm}: {delay_ms} ms");
                nodes.clone()
            }
            FaultAction::Loss { nodes, .. } => nodes.clone(),
            other => panic!("{arm}: {other:?}"),
        };
        match node_of(&arm.whom, 5) {
            // that node, every time
            Some(i) => assert_eq!(nodes, vec![format!("n{}", i + 1)], "{arm}"),
            None => assert_eq!(nodes.len(), 5, "{arm}"),
        }
        // for coverage it counts as the random schedule's `one` / `all`
        let back = arm_of(&f, 8_000);
        let whom = if arm.whom == "all" { "all" } else { "one" };
        assert_eq!(
            (back.kind.as_str(), back.whom.as_str()),
            (arm.kind.as_str(), whom)
        );
    }
    // with leaders, a random one as before, and no mild variant
    let led = arms(&kinds(&["slow"]), 5, true);
    assert!(led[1].iter().all(|a| a.whom == "one" || a.whom == "all"));
    assert!(led[1].iter().all(|a| !a.mild));
    // a memory written before the field reads as not mild; a mild arm says so
    let old: Arm =
        serde_json::from_str(r#"{"kind":"slow","whom":"node2","long":true,"timing":"now"}"#)
            .unwrap();
    assert!(!old.mild);
    let mild = all[1].iter().find(|a| a.mild).unwrap();
    assert!(mild.to_string().contains(" mild "), "{mild}");
    assert!(serde_json::to_string(mild)
        .unwrap()
        .contains("\"mild\":true"));
    assert!(!serde_json::to_string(&old).unwrap().contains("mild"));
}

#[test]
fn with_clock_and_leader_cuts_one_clock_arm_waits_for_the_next_cut() {
    let all = arms(&kinds(&["partition-leader", "clock"]), 5, true);
    let timed: Vec<&Arm> = all[2]
        .iter()
        .filter(|a| a.timing == Timing::WithNextCut)
        .collect();
    assert_eq!(timed.len(), 1);
    assert_eq!(timed[0].to_string(), "clock leader with-next-cut");
    assert!(all[1].iter().all(Arm::isolates_leader));
    // only where a cut can isolate the leader, and the leader is known
    let none = |k: &[&str], known| {
        arms(&kinds(k), 5, known)
            .iter()
            .flatten()
            .all(|a| a.timing != Timing::WithNextCut)
    };
    assert!(none(&["partition-leader", "clock"], false));
    assert!(none(&["slow", "clock"], true));
    assert!(none(&["clock"], true));
    let shapes = arms(&kinds(&["partition", "clock"]), 5, true);
    assert!(shapes[2].iter().any(|a| a.timing == Timing::WithNextCut));
    let isolating: Vec<String> = shapes[1]
        .iter()
        .filter(|a| a.isolates_leader())
        .map(|a| a.whom.clone())
        .collect();
    assert!(!isolating.is_empty());
    assert!(isolating.iter().all(|w| w == "isolate-leader"));
    // it concretizes to a jump back on whoever leads
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let f = concretize(timed[0], NodeNames::FROM_ONE, 5, 4_000, 50, &mut rng);
    match f.action {
        FaultAction::Clock {
            mode,
            target,
            offset_ms,
            ..
        } => {
            assert_eq!(mode, ClockMode::Bump);
            assert_eq!(target, Target::Leader);
            assert!((-5_000..=-1_000).contains(&offset_ms), "{offset_ms}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_cold_chooser_tries_the_coordinated_clock_arm_first_and_again() {
    let clock = arms(&kinds(&["partition-leader", "clock"]), 5, true)[2].clone();
    assert_eq!(clock.len(), 13);
    for seed in 1..=5 {
        let mut c = Chooser::new(seed);
        let picks: Vec<Timing> = (0..3)
            .map(|i| {
                let s = state(0, Some(i as u8 % 3));
                let a = c.choose(&s, &clock).unwrap();
                // what a fault earns from new states, not an anomaly
                c.reward(&s, &a, 3.0);
                a.timing
            })
            .collect();
        assert_eq!(picks, [Timing::WithNextCut; 3], "seed {seed}");
        // and once it keeps finding nothing, the arms never tried come next
        let s = state(0, Some(1));
        let next = c.choose(&s, &clock).unwrap();
        assert_ne!(next.timing, Timing::WithNextCut, "seed {seed}");
    }
}

fn memory_of(pairs: &[(AbstractState, &Arm, u64, f64)]) -> Memory {
    Memory {
        version: MEMORY_VERSION,
        key: "test".into(),
        runs: 3,
        pairs: pairs
            .iter()
            .map(|(s, a, tries, reward)| Remembered {
                state: *s,
                arm: (*a).clone(),
                tries: *tries,
                reward: *reward,
                pair: String::new(),
            })
            .collect(),
    }
}

#[test]
fn a_memory_round_trips_through_json_and_the_chooser() {
    let all = arms(&kinds(&["kill", "partition-leader", "clock"]), 5, true);
    let s = state(0b010, Some(1));
    let t = AbstractState {
        lagging: Some(2),
        silent: Some(1),
        pending: Some(true),
        leader_changed: true,
        clients: ClientClass::Timeouts,
        ..state(0b101, Some(2))
    };
    let mem = memory_of(&[
        (s, &all[0][3], 2, 7.5),
        (t, &all[1][1], 1, 20.0),
        (t, all[2].last().unwrap(), 4, 1.25),
    ]);
    let text = serde_json::to_string(&mem).unwrap();
    let back: Memory = serde_json::from_str(&text).unwrap();
    assert_eq!(back, mem);
    assert_eq!(back.validate(), Ok(()));
    // through a chooser: what it leaves is what it started from (in its order)
    let c = Chooser::with_memory(1, &back);
    let mut left = c.memory("test", 3);
    for p in &mut left.pairs {
        p.pair.clear();
    }
    let mut want = mem.pairs.clone();
    want.sort_by(|a, b| (a.state, &a.arm).cmp(&(b.state, &b.arm)));
    assert_eq!(left.pairs, want);
    // and a try there adds to it
    let mut c = Chooser::with_memory(1, &back);
    let a = c.choose(&s, &all[0][3..4]).unwrap();
    c.reward(&s, &a, 1.0);
    let left = c.memory("test", 4);
    let p = left.pairs.iter().find(|p| p.state == s).unwrap();
    assert_eq!((p.tries, p.reward), (3, 8.5));
    assert!(p.pair.contains(" | kill"), "{}", p.pair);
    // what serde cannot check is refused
    let mut bad = mem.clone();
    bad.pairs[0].tries = 0;
    assert!(bad.validate().is_err());
    let mut bad = mem;
    bad.pairs[1].reward = f64::NAN;
    assert!(bad.validate().is_err());
    assert!(serde_json::from_str::<Memory>("{\"runs\": \"x\"}").is_err());
}

#[test]
fn an_anomaly_is_credited_to_the_faults_active_while_its_ops_ran() {
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    // 0: 0-1000 ms, stopped; 1: 1250-3000 ms, stopped; 2: from 3250 ms, running
    let faults = [
        (at(0), Some(at(1000))),
        (at(1250), Some(at(3000))),
        (at(3250), None),
    ];
    // ops within the second fault: it alone, not the one that ended before
    assert_eq!(credited(&faults, (at(1500), at(1700))), vec![1]);
    // ops spanning the end of the first and the start of the second: both
    assert_eq!(credited(&faults, (at(900), at(1300))), vec![0, 1]);
    // the running fault, and one that started while the ops were running
    assert_eq!(credited(&faults, (at(3100), at(3400))), vec![2]);
    assert_eq!(credited(&faults, (at(5000), at(5100))), vec![2]);
    // no fault active then: the one that stopped last before it, within the aftermath
    let stopped = [(at(0), Some(at(1000))), (at(1250), Some(at(2000)))];
    assert_eq!(credited(&stopped, (at(2500), at(2600))), vec![1]);
    assert!(at(2000) + AFTERMATH < at(4100));
    assert_eq!(
        credited(&stopped, (at(4100), at(4200))),
        Vec::<usize>::new()
    );
    // ops before any fault started: nobody's
    let late = [(at(2000), None)];
    assert_eq!(credited(&late, (at(100), at(900))), Vec::<usize>::new());
}

#[test]
fn an_old_memory_without_a_version_is_read_and_a_newer_one_refused() {
    let all = arms(&kinds(&["kill"]), 5, true);
    let s = state(0b001, Some(1));
    let mem = memory_of(&[(s, &all[0][0], 2, 21.0)]);
    let mut v: serde_json::Value = serde_json::to_value(&mem).unwrap();
    assert_eq!(v["version"], MEMORY_VERSION);
    // as the tables written before the version field were
    v.as_object_mut().unwrap().remove("version");
    let old: Memory = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(old.version, 1);
    assert_eq!(old.validate(), Ok(()));
    assert_eq!(old.pairs, mem.pairs);
    // a chooser starts from it, and leaves a table of the current version
    let left = Chooser::with_memory(1, &old).memory("test", 4);
    assert_eq!(left.version, MEMORY_VERSION);
    assert_eq!((left.pairs[0].tries, left.pairs[0].reward), (2, 21.0));
    v["version"] = serde_json::json!(MEMORY_VERSION + 1);
    let newer: Memory = serde_json::from_value(v).unwrap();
    assert!(newer.validate().unwrap_err().contains("version"));
}

#[test]
fn a_memory_that_rewarded_an_arm_chooses_it_first_in_that_state() {
    let kills = arms(&kinds(&["kill"]), 5, true)[0].clone();
    let s = state(0, Some(1));
    let elsewhere = state(0b001, Some(0));
    for (i, rewarded) in kills.iter().enumerate() {
        // every arm tried before, in another state, earning what new states earn;
        // one of them, in `s`, found an anomaly
        let mut pairs: Vec<(AbstractState, &Arm, u64, f64)> =
            kills.iter().map(|a| (elsewhere, a, 1, 3.0)).collect();
        pairs.push((s, rewarded, 1, reward::ANOMALY + 2.0));
        let mem = memory_of(&pairs);
        for seed in [1, 2, 3] {
            let mut c = Chooser::with_memory(seed, &mem);
            assert_eq!(c.choose(&s, &kills).as_ref(), Some(rewarded), "arm {i}");
        }
    }
    // cold, the first choice is a seeded draw: not always the same arm
    let firsts: BTreeSet<Arm> = (1..=8)
        .map(|seed| Chooser::new(seed).choose(&s, &kills).unwrap())
        .collect();
    assert!(firsts.len() > 1);
    // and an empty memory is a cold start
    let empty = Memory::default();
    for seed in 1..=8 {
        assert_eq!(
            Chooser::with_memory(seed, &empty).choose(&s, &kills),
            Chooser::new(seed).choose(&s, &kills)
        );
    }
}

#[test]
fn arms_that_wait_for_a_leader_change_only_when_one_may_come() {
    let all = arms(&kinds(&["partition", "clock"]), 5, true);
    let quiet = state(0, Some(1));
    let waits = |v: &[Arm]| {
        v.iter()
            .filter(|a| a.timing == Timing::AfterLeaderChange)
            .count()
    };
    let none = BTreeSet::new();
    assert!(waits(&all[1]) > 0);
    assert_eq!(waits(&candidates(&all[1], &quiet, false, &none)), 0);
    let busy = state(0b100, Some(1));
    assert!(waits(&candidates(&all[1], &busy, false, &none)) > 0);
    assert!(waits(&candidates(&all[1], &state(0, Some(0)), false, &none)) > 0);
    assert!(waits(&candidates(&all[1], &state(0, Some(2)), false, &none)) > 0);
    // a clock fault waiting for the next cut: the links choose a leader cut, once a
    // partition that counts as `partition` has run
    let first = candidates(&all[1], &quiet, true, &none);
    assert!(!first.is_empty());
    assert!(first.iter().all(|a| !a.isolates_leader()));
    let covered = BTreeSet::from(["partition".to_string()]);
    let cut = candidates(&all[1], &quiet, true, &covered);
    assert!(!cut.is_empty());
    assert!(cut.iter().all(Arm::isolates_leader));
    // a class without such a partition chooses among all it has
    assert_eq!(
        candidates(&all[2], &quiet, true, &none).len(),
        all[2].len() - waits(&all[2])
    );
}

#[test]
fn every_kind_of_a_class_is_offered_before_any_kind_again() {
    let all = arms(&kinds(&["partition", "slow", "loss"]), 5, false);
    let quiet = state(0, None);
    let kinds_of = |v: &[Arm]| v.iter().map(|a| a.kind.clone()).collect::<BTreeSet<_>>();
    let mut started = BTreeSet::new();
    assert_eq!(
        kinds_of(&candidates(&all[1], &quiet, false, &started)).len(),
        3
    );
    started.insert("partition".to_string());
    let left = kinds_of(&candidates(&all[1], &quiet, false, &started));
    assert_eq!(left, ["loss", "slow"].map(String::from).into());
    started.insert("slow".to_string());
    started.insert("loss".to_string());
    // an isolate-leader partition counts as partition-leader, not as partition
    let shapes = arms(&kinds(&["partition"]), 5, false);
    let iso = shapes[1].iter().find(|a| a.isolates_leader()).unwrap();
    assert_eq!(coverage_kind(iso), "partition-leader");
    assert!(candidates(&shapes[1], &quiet, false, &BTreeSet::new())
        .iter()
        .all(|a| !a.isolates_leader()));
    // once each kind has run, every arm is offered again
    assert_eq!(
        candidates(&all[1], &quiet, false, &started).len(),
        all[1].len()
    );
}
