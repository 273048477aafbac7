//! `--nemesis-search guided` through the runner against a cluster that only keeps count:
//! the schedule the search made is a plan file that `NemesisSpec::from_plan_file` reads
//! and that replays the same faults, and a cluster without a status falls back to states
//! made of the active faults alone, saying so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use splitbrain_nemesis::{
    ClusterControl, Nemesis, NemesisError, NemesisRecorder, NemesisSpec, NodeStatus, Search,
};

/// Five nodes that obey every fault at once; with `status`, node `k` leads during the
/// k-th stretch of eight status calls (a leader change about every two seconds).
struct Counting {
    status: bool,
    calls: AtomicU64,
}

impl Counting {
    fn new(status: bool) -> Counting {
        Counting {
            status,
            calls: AtomicU64::new(0),
        }
    }
}

impl ClusterControl for Counting {
    fn node_count(&self) -> usize {
        5
    }
    async fn kill(&self, _i: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn restart(&self, _i: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn pause(&self, _i: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn resume(&self, _i: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn leaders(&self) -> Vec<usize> {
        if self.status {
            vec![(self.calls.load(Ordering::Relaxed) / 8 % 5) as usize]
        } else {
            Vec::new()
        }
    }
    async fn status(&self) -> Option<Vec<Option<NodeStatus>>> {
        if !self.status {
            return None;
        }
        let c = self.calls.fetch_add(1, Ordering::Relaxed);
        let (leader, term) = ((c / 8 % 5) as usize, c / 8 + 1);
        Some(
            (0..5)
                .map(|i| {
                    Some(NodeStatus {
                        leads: Some(i == leader),
                        term: Some(term),
                        progress: Some(c * 10 - (i == 4) as u64 * (c * 10).min(50)),
                        pending: None,
                    })
                })
                .collect(),
        )
    }
    async fn set_clock_offset(&self, _i: usize, _offset_ms: i64) -> Result<(), NemesisError> {
        Ok(())
    }
}

#[derive(Default)]
struct Log(Mutex<Vec<(String, Value)>>);

impl NemesisRecorder for Log {
    fn record(&self, f: &str, value: Value) {
        self.0.lock().unwrap().push((f.to_string(), value));
    }
}

impl Log {
    /// The fault starts recorded, with the nodes of those not resolved at run time.
    fn starts(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(f, _)| {
                matches!(
                    f.as_str(),
                    "kill" | "pause" | "start-clock" | "start-partition" | "start-slow"
                )
            })
            .map(|(f, v)| {
                let resolved_late = matches!(v["target"].as_str(), Some("leader" | "follower"));
                if resolved_late {
                    format!("{f} {}", v["target"])
                } else {
                    format!("{f} {}", v["nodes"])
                }
            })
            .collect()
    }
}

fn guided(faults: &str, seed: u64) -> NemesisSpec {
    let mut spec = NemesisSpec::parse(faults, Duration::from_millis(300), seed).unwrap();
    spec.search = Search::Guided;
    spec
}

#[tokio::test]
async fn a_guided_runs_schedule_is_a_plan_file_that_replays_the_same_faults() {
    let nemesis = Nemesis::new(guided("kill,pause,clock", 5));
    let log = Log::default();
    let cluster = Counting::new(true);
    nemesis
        .run_with(&cluster, &log, Duration::from_secs(3), None)
        .await
        .unwrap();
    nemesis.heal(&cluster, &log).await.unwrap();
    let made = nemesis.plan_made().expect("a guided run makes a plan");
    assert!(made.len() >= 3, "only {} faults in 3 s", made.len());
    let cov = nemesis.coverage();
    assert_eq!(cov.search, "guided");
    assert!(cov.signals.starts_with("node status"), "{}", cov.signals);
    assert!(cov.states.keys().all(|s| s.contains("leaders=")));
    assert!(!cov.pairs.is_empty());
    let started: u64 = cov.pairs.values().sum();
    assert_eq!(started as usize, made.len());

    // The plan file as the harness writes it, read by the plan parser.
    let dir = std::env::temp_dir().join(format!("guided-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nemesis-plan.json");
    let file = serde_json::json!({"search": "guided", "seed": 5, "faults": made});
    std::fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    let replay_spec = NemesisSpec::from_plan_file(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(replay_spec.plan.as_ref(), Some(&made));

    // Replayed (a little longer, so a fault started just before the end is not lost to
    // the deadline on a loaded machine), the same faults start in the same order.
    let replay = Nemesis::new(replay_spec);
    let again = Log::default();
    let fresh = Counting::new(true);
    replay
        .run(&fresh, &again, Duration::from_secs(4))
        .await
        .unwrap();
    replay.heal(&fresh, &again).await.unwrap();
    assert_eq!(log.starts(), again.starts());
    assert_eq!(replay.plan_made(), None);
    assert_eq!(replay.coverage().search, "plan");
}

#[tokio::test]
async fn a_clock_fault_timed_with_the_next_cut_starts_inside_a_leader_cut() {
    // A cold chooser tries the coordinated clock arm first: it waits for the next
    // partition that isolates the leader and starts while that partition lasts.
    let nemesis = Nemesis::new(guided("partition-leader,clock", 11));
    let log = Log::default();
    let cluster = Counting::new(true);
    nemesis
        .run_with(&cluster, &log, Duration::from_secs(4), None)
        .await
        .unwrap();
    nemesis.heal(&cluster, &log).await.unwrap();
    let cov = nemesis.coverage();
    let timed: u64 = cov
        .pairs
        .iter()
        .filter(|(p, _)| p.ends_with("clock leader with-next-cut"))
        .map(|(_, n)| n)
        .sum();
    assert!(timed >= 1, "pairs: {:?}", cov.pairs);
    let made = nemesis.plan_made().unwrap();
    let cuts: Vec<(u64, u64)> = made
        .iter()
        .filter(|f| matches!(f.action, splitbrain_nemesis::FaultAction::Partition { .. }))
        .map(|f| (f.at_ms, f.at_ms + f.for_ms))
        .collect();
    let inside = made
        .iter()
        .filter(|f| {
            matches!(
                f.action,
                splitbrain_nemesis::FaultAction::Clock {
                    target: splitbrain_nemesis::Target::Leader,
                    ..
                }
            )
        })
        .filter(|f| cuts.iter().any(|&(a, b)| a <= f.at_ms && f.at_ms < b))
        .count();
    assert!(
        inside as u64 >= timed,
        "{inside} inside a cut, {timed} timed: {made:?}"
    );
}

#[tokio::test]
async fn without_a_status_the_search_sees_faults_only_and_says_so() {
    let nemesis = Nemesis::new(guided("kill,partition", 9));
    let log = Log::default();
    let cluster = Counting::new(false);
    nemesis
        .run_with(&cluster, &log, Duration::from_secs(2), None)
        .await
        .unwrap();
    nemesis.heal(&cluster, &log).await.unwrap();
    let cov = nemesis.coverage();
    assert!(
        cov.signals.contains("no node status"),
        "signals: {}",
        cov.signals
    );
    assert!(cov.samples > 0);
    for state in cov.states.keys() {
        assert!(state.starts_with("faults="), "{state}");
    }
    let made = nemesis.plan_made().unwrap();
    assert!(!made.is_empty(), "no fault chosen without a status");
    assert!(cov.pairs.keys().all(|p| !p.contains("after-leader-change")));
    assert_eq!(cov.leader_changes, 0);
}

#[tokio::test]
async fn a_random_run_records_coverage_too_and_makes_no_plan() {
    let spec = NemesisSpec::parse("kill,pause", Duration::from_millis(300), 4).unwrap();
    let nemesis = Nemesis::new(spec);
    let log = Log::default();
    let cluster = Counting::new(true);
    nemesis
        .run_with(&cluster, &log, Duration::from_secs(2), None)
        .await
        .unwrap();
    nemesis.heal(&cluster, &log).await.unwrap();
    let cov = nemesis.coverage();
    assert_eq!(cov.search, "random");
    assert!(cov.samples > 0 && !cov.states.is_empty());
    assert!(!cov.pairs.is_empty());
    assert_eq!(nemesis.plan_made(), None);
}
