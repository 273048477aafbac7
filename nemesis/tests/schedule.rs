//! Schedules: determinism per seed, partition shapes, plan files.

use std::collections::BTreeSet;
use std::time::Duration;

use splitbrain_nemesis::{
    FaultAction, Nemesis, NemesisError, NemesisSpec, NodeNames, PlannedFault, Target,
};

fn plan(list: &str, seed: u64, n: usize) -> Vec<PlannedFault> {
    let spec = NemesisSpec::parse(list, Duration::from_secs(2), seed).unwrap();
    Nemesis::new(spec).schedule(n, Duration::from_secs(300))
}

const ALL: &str = "partition,kill,pause,clock,slow,loss,slow-client,strobe-pause";

#[test]
fn same_seed_gives_same_schedule() {
    let a = plan(ALL, 42, 5);
    let b = plan(ALL, 42, 5);
    assert!(
        a.len() > 50,
        "300 s at a 2 s interval should give many faults, got {}",
        a.len()
    );
    assert_eq!(a, b);
    // and the serialized form (what test.json stores) is identical too
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn different_seed_gives_different_schedule() {
    assert_ne!(plan(ALL, 42, 5), plan(ALL, 43, 5));
    assert_ne!(plan(ALL, 1, 5), plan(ALL, 2, 5));
}

#[test]
fn schedule_respects_duration_kinds_and_nodes() {
    for seed in 0..20 {
        let p = plan("partition,kill", seed, 5);
        let mut last_end = [0u64; 2];
        for f in &p {
            assert!(f.at_ms < 300_000);
            let class = usize::from(matches!(f.action, FaultAction::Partition { .. }));
            assert!(
                f.at_ms >= last_end[class],
                "faults of one class must not overlap"
            );
            last_end[class] = f.at_ms + f.for_ms;
            assert!(matches!(
                f.action,
                FaultAction::Partition { .. } | FaultAction::Kill { .. }
            ));
            f.validate().unwrap();
            let json = serde_json::to_value(f).unwrap();
            for name in json["nodes"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap();
                assert!(NodeNames::FROM_ONE.index(name, 5).is_some(), "{name}");
            }
        }
        assert!(
            p.windows(2).all(|w| w[0].at_ms <= w[1].at_ms),
            "plan sorted by start"
        );
        // a fault starts about once per interval (2 s) over 300 s, all classes together
        assert!((100..=200).contains(&p.len()), "{} faults", p.len());
    }
    assert!(plan("none", 1, 5).is_empty());
    assert!(plan("kill", 1, 0).is_empty());
    assert!(matches!(
        NemesisSpec::parse("kill,explode", Duration::from_secs(1), 0),
        Err(NemesisError::UnknownFault(_))
    ));
}

#[test]
fn clock_faults_strike_leaders_cut_off_by_partitions() {
    for seed in 0..20 {
        let p = plan("partition,clock", seed, 5);
        let parts: Vec<(u64, u64)> = p
            .iter()
            .filter(|f| matches!(f.action, FaultAction::Partition { .. }))
            .map(|f| (f.at_ms, f.at_ms + f.for_ms))
            .collect();
        let clocks: Vec<&PlannedFault> = p
            .iter()
            .filter(|f| matches!(f.action, FaultAction::Clock { .. }))
            .collect();
        // clock faults still never overlap one another
        for w in clocks.windows(2) {
            assert!(
                w[0].at_ms + w[0].for_ms <= w[1].at_ms,
                "seed {seed}: overlap"
            );
        }
        let aligned: Vec<&&PlannedFault> = clocks
            .iter()
            .filter(|f| {
                matches!(f.action, FaultAction::Clock { target: Target::Leader, offset_ms, .. }
                    if offset_ms <= -1000)
                    && parts
                        .iter()
                        .any(|&(s, e)| f.at_ms > s && f.at_ms <= s + 100 && f.at_ms + f.for_ms == e)
            })
            .collect();
        // three in four partitions carry one; 300 s at 2 s gives dozens of partitions
        assert!(
            aligned.len() * 4 >= parts.len() && aligned.len() < parts.len(),
            "seed {seed}: {} aligned clock faults for {} partitions",
            aligned.len(),
            parts.len()
        );
    }
    // without partitions the clock class is left as drawn
    let alone = plan("clock", 3, 5);
    assert!(alone
        .iter()
        .all(|f| matches!(f.action, FaultAction::Clock { .. })));
}

#[test]
fn every_partition_shape_appears_and_blocks_something() {
    let mut shapes = BTreeSet::new();
    for seed in 0..10 {
        for f in plan("partition", seed, 5) {
            let FaultAction::Partition {
                shape,
                groups,
                blocked,
                ..
            } = f.action
            else {
                panic!("only partitions were asked for");
            };
            if shape == "isolate-leader" {
                // resolved when the fault starts, from who leads then
                assert!(groups.is_empty() && blocked.is_empty());
                shapes.insert(shape);
                continue;
            }
            assert!(groups.len() >= 2, "{shape}: {groups:?}");
            if shape == "majorities-ring" {
                // every node still hears from a majority (itself included), and no two
                // nodes hear the same set
                let mut views = BTreeSet::new();
                for node in 1..=5 {
                    let me = format!("n{node}");
                    let deaf: BTreeSet<&String> = blocked
                        .iter()
                        .filter(|(_, to)| *to == me)
                        .map(|(f, _)| f)
                        .collect();
                    assert!(5 - deaf.len() >= 3, "n{node} hears a minority: {blocked:?}");
                    views.insert(deaf);
                }
                assert_eq!(views.len(), 5);
            }
            if shape == "one-way" {
                let back = blocked
                    .iter()
                    .filter(|(a, b)| blocked.contains(&(b.clone(), a.clone())));
                assert_eq!(back.count(), 0, "one-way cuts must not be symmetric");
            }
            shapes.insert(shape);
        }
    }
    let want = [
        "halves",
        "random-halves",
        "isolate",
        "majority-minority",
        "majorities-ring",
        "bridge",
        "one-way",
    ];
    for s in want {
        assert!(shapes.contains(s), "shape {s} never scheduled: {shapes:?}");
    }
}

#[test]
fn process_targets_have_the_right_sizes() {
    for seed in 0..10 {
        for f in plan("kill,pause", seed, 5) {
            let (target, nodes) = match f.action {
                FaultAction::Kill { target, nodes } | FaultAction::Pause { target, nodes } => {
                    (target, nodes)
                }
                _ => unreachable!(),
            };
            let ok = match target {
                Target::One => nodes.len() == 1,
                Target::Minority => (1..=2).contains(&nodes.len()),
                Target::Majority => nodes.len() == 3,
                Target::All => nodes.len() == 5,
                Target::Leader | Target::Follower => nodes.is_empty(),
                Target::Nodes => false,
            };
            assert!(ok, "{target:?} with {nodes:?}");
        }
    }
}

#[test]
fn plan_file_round_trip_and_errors() {
    let dir = std::env::temp_dir().join(format!("sb-nemesis-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let generated = plan(ALL, 9, 3);
    let path = dir.join("plan.json");
    std::fs::write(&path, serde_json::to_string_pretty(&generated).unwrap()).unwrap();
    let spec = NemesisSpec::from_plan_file(&path).unwrap();
    assert_eq!(
        Nemesis::new(spec).schedule(3, Duration::from_secs(1)),
        generated
    );

    let hand = r#"{"faults": [
        {"at_ms": 1000, "for_ms": 5000, "f": "kill", "nodes": ["n2"]},
        {"at_ms": 7000, "for_ms": 5000, "f": "partition", "shape": "isolate",
         "groups": [["n1"], ["n2", "n3"]]},
        {"at_ms": 9000, "for_ms": 1000, "f": "clock", "mode": "bump", "nodes": ["n3"], "offset_ms": -2500}
    ]}"#;
    std::fs::write(&path, hand).unwrap();
    let spec = NemesisSpec::from_plan_file(&path).unwrap();
    assert_eq!(spec.faults, vec!["kill", "partition", "clock"]);
    assert_eq!(spec.plan.as_ref().map(Vec::len), Some(3));

    std::fs::write(
        &path,
        r#"[{"at_ms": 0, "for_ms": 1, "f": "kill", "nodes": ["node-2"]}]"#,
    )
    .unwrap();
    let err = NemesisSpec::from_plan_file(&path).unwrap_err().to_string();
    assert!(err.contains("node-2"), "{err}");
    std::fs::write(&path, r#"[{"at_ms": 0, "f": "teleport"}]"#).unwrap();
    assert!(NemesisSpec::from_plan_file(&path).is_err());
    assert!(NemesisSpec::from_plan_file(&dir.join("missing.json")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn leader_churn_is_a_partition_resolved_at_run_time() {
    let p = plan("leader-churn", 5, 5);
    assert!(!p.is_empty());
    for f in &p {
        match &f.action {
            FaultAction::Partition { shape, groups, .. } => {
                assert_eq!(shape, "leader-churn");
                assert!(groups.is_empty(), "groups are chosen when it runs");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // it shares the network class: never overlaps a partition
    let mixed = plan("partition,leader-churn", 2, 5);
    for w in mixed.windows(2) {
        assert!(w[0].at_ms + w[0].for_ms <= w[1].at_ms);
    }
}

/// `kill-one` kills exactly one node per fault, never overlapping another process fault.
#[test]
fn kill_one_kills_a_single_node_at_a_time() {
    for seed in 0..20 {
        let p = plan("kill-one", seed, 4);
        assert!(p.len() > 50, "{} faults", p.len());
        let mut last_end = 0;
        let mut victims = BTreeSet::new();
        for f in &p {
            let FaultAction::Kill { target, nodes } = &f.action else {
                panic!("kill-one planned {f:?}");
            };
            assert_eq!(*target, Target::One);
            assert_eq!(nodes.len(), 1, "{f:?}");
            victims.insert(nodes[0].clone());
            assert!(f.at_ms >= last_end, "kills must not overlap");
            last_end = f.at_ms + f.for_ms;
        }
        assert_eq!(victims.len(), 4, "every node is a victim at some point");
    }
}

/// `partition-leader` always plans the isolate-leader shape, resolved when it starts.
#[test]
fn partition_leader_always_isolates_the_leader() {
    let p = plan("partition-leader", 7, 5);
    assert!(p.len() > 50, "{} faults", p.len());
    for f in &p {
        let FaultAction::Partition { shape, groups, .. } = &f.action else {
            panic!("partition-leader planned {f:?}");
        };
        assert_eq!(shape, "isolate-leader");
        assert!(groups.is_empty(), "groups are resolved at run time");
    }
    assert!(
        plan("partition-leader", 7, 1).is_empty(),
        "one node cannot be cut off"
    );
}

/// `figure-8` plans partitions resolved at run time: alone, one that lasts from its start
/// to the end of the run (a stop would cut a round off midway); beside other network
/// faults, each long enough for two rounds, never overlapping the others.
#[test]
fn figure_8_faults_are_long_partitions_resolved_at_run_time() {
    let p = plan("figure-8", 3, 3);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].at_ms < 2_000, "{p:?}");
    assert_eq!(p[0].at_ms + p[0].for_ms, 300_000, "{p:?}");
    let mixed = plan("partition,figure-8", 2, 3);
    for f in p.iter().chain(mixed.iter().filter(
        |f| matches!(&f.action, FaultAction::Partition { shape, .. } if shape == "figure-8"),
    )) {
        let FaultAction::Partition { shape, groups, .. } = &f.action else {
            panic!("figure-8 planned {f:?}");
        };
        assert_eq!(shape, "figure-8");
        assert!(groups.is_empty(), "rounds are staged when it runs");
        assert!(f.for_ms >= 9_000, "{f:?}");
    }
    assert!(mixed
        .iter()
        .any(|f| matches!(&f.action, FaultAction::Partition { shape, .. } if shape == "figure-8")));
    for w in mixed.windows(2) {
        assert!(w[0].at_ms + w[0].for_ms <= w[1].at_ms);
    }
    assert!(
        plan("figure-8", 3, 1).is_empty(),
        "one node has no figure 8"
    );
}

/// Kinds sharing a timeline are dealt like cards: each comes once before any comes twice,
/// so every kind asked for is exercised in the shortest run that has room for them all.
#[test]
fn every_kind_of_a_timeline_comes_before_any_repeats() {
    let kind = |f: &PlannedFault| serde_json::to_value(f).unwrap()["f"].clone();
    for seed in 0..50 {
        let p = plan("kill,pause,strobe-pause", seed, 5);
        let first: BTreeSet<String> = p
            .iter()
            .take(3)
            .map(|f| kind(f).as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            first.len(),
            3,
            "seed {seed}: the first three were {first:?}"
        );
    }
}

/// Every node name a planned fault carries (nodes, groups, blocked flows).
fn names_in(f: &PlannedFault) -> Vec<String> {
    let v = serde_json::to_value(f).unwrap();
    let mut out = Vec::new();
    for key in ["nodes", "groups", "blocked"] {
        let mut todo = vec![v[key].clone()];
        while let Some(x) = todo.pop() {
            match x {
                serde_json::Value::String(s) => out.push(s),
                serde_json::Value::Array(a) => todo.extend(a),
                _ => {}
            }
        }
    }
    out
}

#[test]
fn a_maelstrom_schedule_names_n0_to_n4() {
    let spec = NemesisSpec::parse(ALL, Duration::from_secs(2), 7).unwrap();
    let nemesis = Nemesis::new(spec).with_node_names(NodeNames::FROM_ZERO);
    let zero = nemesis.schedule(5, Duration::from_secs(300));
    let mut seen = std::collections::BTreeSet::new();
    for f in &zero {
        for name in names_in(f) {
            assert!(
                NodeNames::FROM_ZERO.index(&name, 5).is_some(),
                "{name} in {f:?}"
            );
            seen.insert(name);
        }
    }
    assert!(seen.contains("n0"), "{seen:?}");
    assert!(!seen.contains("n5"), "{seen:?}");
    // The same seed picks the same nodes at the same times: only the names differ.
    let ours = plan(ALL, 7, 5);
    assert_eq!(ours.len(), zero.len());
    for (a, b) in ours.iter().zip(&zero) {
        assert_eq!(
            (a.at_ms, a.for_ms, a.action.kind()),
            (b.at_ms, b.for_ms, b.action.kind())
        );
        let renamed: Vec<String> = names_in(a)
            .iter()
            .map(|name| NodeNames::FROM_ZERO.name(NodeNames::FROM_ONE.index(name, 5).unwrap()))
            .collect();
        assert_eq!(renamed, names_in(b));
    }
    assert_eq!(nemesis.check_plan(5), Ok(()));
}

#[test]
fn a_plan_file_for_a_maelstrom_run_names_n0_and_n1_to_n5_is_refused() {
    let dir = std::env::temp_dir().join(format!("sb-nemesis-plan0-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.json");
    std::fs::write(
        &path,
        r#"[{"at_ms": 1000, "for_ms": 5000, "f": "partition", "shape": "isolate",
             "groups": [["n0"], ["n1", "n2", "n3", "n4"]]},
            {"at_ms": 7000, "for_ms": 1000, "f": "kill", "nodes": ["n4"]}]"#,
    )
    .unwrap();
    let spec = NemesisSpec::from_plan_file(&path).unwrap();
    let maelstrom = Nemesis::new(spec.clone()).with_node_names(NodeNames::FROM_ZERO);
    assert_eq!(maelstrom.check_plan(5), Ok(()));
    let ours = Nemesis::new(spec).with_node_names(NodeNames::FROM_ONE);
    let err = ours.check_plan(5).unwrap_err();
    assert!(
        err.contains("entry 0") && err.contains("\"n0\"") && err.contains("n1..n5"),
        "{err}"
    );

    std::fs::write(
        &path,
        r#"[{"at_ms": 0, "for_ms": 1000, "f": "kill", "nodes": ["n5"]}]"#,
    )
    .unwrap();
    let spec = NemesisSpec::from_plan_file(&path).unwrap();
    let err = Nemesis::new(spec)
        .with_node_names(NodeNames::FROM_ZERO)
        .check_plan(5)
        .unwrap_err();
    assert!(err.contains("\"n5\"") && err.contains("n0..n4"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
