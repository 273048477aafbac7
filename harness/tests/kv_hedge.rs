//! Hedged reads of the bundled KV store under a slow client link, end to end: a real
//! 3-node cluster (the `splitbrain-kv` binary must be built beside the test binaries),
//! one follower's answers delayed 50 ms by the nemesis for the whole run.

use splitbrain::check_options::CheckOptions;
use splitbrain::run::entry::{resolve, run, TestRequest};
use splitbrain::systems::kv::ReadCounters;
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::Validity;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedged_reads_under_a_slow_client_link_stay_valid_and_rarely_hedge() {
    let store = tempfile::tempdir().unwrap();
    let plan = store.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"[{"at_ms":0,"for_ms":60000,"f":"slow-client","target":"follower","delay_ms":50}]"#,
    )
    .unwrap();
    let request = TestRequest {
        name: Some("kv-hedge".into()),
        nemesis: Some("none".into()),
        nemesis_interval: 10.0,
        nemesis_plan: Some(plan),
        nodes: Some(3),
        concurrency: 6,
        rate: 150.0,
        time_limit: 6.0,
        seed: Some(5),
        read_mode: Some("hedged".into()),
        quiesce: 0.5,
        store: store.path().to_path_buf(),
        ..TestRequest::default()
    };
    let check = CheckOptions::default();
    let spec = resolve(&request, &check).expect("a valid request");
    let before = ReadCounters::now();
    let outcome = run(&spec, &check, CancellationToken::new(), false)
        .await
        .expect("the run completes (is splitbrain-kv built?)");
    let counts = ReadCounters::now().since(before);
    assert_eq!(
        outcome.summary.valid,
        Validity::Valid,
        "{:?}",
        outcome.summary
    );
    assert!(counts.reads > 100, "{counts:?}");
    // The slow replica is put on probation after a few hedges: only a small share of
    // reads needs a second request.
    let share = counts.hedges as f64 / counts.reads as f64;
    assert!(share < 0.2, "hedged {share:.3} of reads: {counts:?}");
    assert!(counts.requests >= counts.reads + counts.hedges);
    // The fault is in the history, with its stop.
    let history = read_path(&outcome.run_dir.history()).unwrap();
    let fs: Vec<String> = history.nemesis_ops().map(|op| op.f.to_string()).collect();
    assert!(fs.iter().any(|f| f == "start-slow-client"), "{fs:?}");
    assert!(fs.iter().any(|f| f == "stop-slow-client"), "{fs:?}");
}
