//! `splitbrain shrink RUN_DIR`: replays a stored failing run against a live cluster to
//! find the smallest fault plan and the shortest, lightest run that still fail the same
//! way (`crate::schedule_shrink`), then shrinks the history of its last failing
//! replay as `shrink --history` does. Everything goes to `RUN_DIR/shrunk/`.

use super::checker_selection::{load, select_checkers};
use super::report::render_run_report;
use super::shrink::{shrink_first_failure, ShrinkArgs};
use super::test::run_blocking;
use super::{usage, verdict_code};
use crate::check_options::CheckOptions;
use crate::run::spec::TestSpec;
use crate::schedule_shrink::{
    plan_of_spec, shrink_schedule, steps_table, Candidate, Outcome, Replay, Replayer,
    ScheduleBounds,
};
use anyhow::Context;
use splitbrain_checkers::shrink::FailureClass;
use splitbrain_checkers::{CheckResult, Checker, Validity};
use splitbrain_reports::{repeat_command, RunSummary};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Replays candidates of a stored run: its test.json with the candidate's plan and sizes,
/// run by the controller as `splitbrain test` runs it, into a store under `shrunk/`.
struct LiveReplayer {
    base: TestSpec,
    check: CheckOptions,
    class: FailureClass,
    dir: PathBuf,
    count: usize,
}

impl Replayer for LiveReplayer {
    fn replay(&mut self, candidate: &Candidate) -> anyhow::Result<Replay> {
        self.count += 1;
        let plan_file = self.dir.join(format!("plan-{:03}.json", self.count));
        std::fs::write(&plan_file, serde_json::to_vec_pretty(&candidate.plan)?)
            .with_context(|| format!("writing {}", plan_file.display()))?;
        let mut spec = candidate.apply(&self.base, &plan_file);
        spec.store = self.dir.clone();
        // Every replay is bounded: past twice its time limit and a minute for starting,
        // healing and checking, it is cancelled (clients stop, faults heal, nodes go).
        let bound = Duration::from_secs_f64(candidate.time_limit_s * 2.0 + 60.0);
        let cancel = CancellationToken::new();
        let (done, finished) = mpsc::channel::<()>();
        let watchdog = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(bound) {
                    cancel.cancel();
                }
            })
        };
        let started = Instant::now();
        let outcome = run_blocking(&spec, &self.check, false, &cancel);
        drop(done);
        let _ = watchdog.join();
        let seconds = started.elapsed().as_secs_f64();
        let outcome = outcome?;
        let s = &outcome.summary;
        let mut verdict = s.valid.label().to_string();
        if cancel.is_cancelled() {
            verdict.push_str(&format!(" (cancelled after {} s)", bound.as_secs()));
        }
        Ok(Replay {
            same_failure: s.results.iter().any(|r| self.class.matches(r)),
            verdict,
            run_dir: Some(outcome.run_dir.path.clone()),
            ops: s.stats.ops,
            seconds,
        })
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

pub(crate) fn cmd_shrink_schedule(run: &Path, a: &ShrinkArgs) -> anyhow::Result<u8> {
    if !run.join("test.json").is_file() || !run.join("results.json").is_file() {
        return Err(usage(format!(
            "{} is not a stored run (test.json and results.json); `shrink --history FILE` shrinks a bare history",
            run.display()
        )));
    }
    let spec: TestSpec = read_json(&run.join("test.json"))?;
    let summary: RunSummary = read_json(&run.join("results.json"))?;
    let Some(class) = FailureClass::of_results(&summary.results, a.shrink.anomaly.as_deref())
    else {
        eprintln!(
            "nothing to shrink: no checker of {} found it invalid{}",
            run.display(),
            a.shrink
                .anomaly
                .as_deref()
                .map(|x| format!(" with the anomaly {x}"))
                .unwrap_or_default()
        );
        return Ok(verdict_code(summary.valid));
    };
    // Replays are checked as the run was (its consistency model and init, unless the
    // flags say otherwise).
    let (_, _, check) = load(run, &a.check)?;
    let original = Candidate::of_spec(&spec, plan_of_spec(&spec)?);
    let out = a.shrink.out.clone().unwrap_or_else(|| run.join("shrunk"));
    let replays = out.join("replays");
    std::fs::create_dir_all(&replays).with_context(|| format!("creating {}", replays.display()))?;
    let bounds = ScheduleBounds {
        replays: a.schedule.replays.max(1),
        confirm: a.schedule.confirm,
        budget: Duration::from_secs(a.schedule.budget),
        ..ScheduleBounds::default()
    };
    println!(
        "shrinking the schedule of {} for {class}: {}; up to {} replays a candidate, {} to confirm, budget {} s",
        run.display(),
        original.label(),
        bounds.replays,
        bounds.confirm,
        a.schedule.budget
    );
    let mut replayer = LiveReplayer {
        base: spec.clone(),
        check,
        class: class.clone(),
        dir: replays,
        count: 0,
    };
    let shrunk = shrink_schedule(&original, &mut replayer, &bounds, &mut |line| {
        eprintln!("{line}")
    });
    println!();
    print!("{}", steps_table(&shrunk.steps));
    if let Some(why) = &shrunk.stopped_by {
        if shrunk.reproduced {
            println!("stopped by {why}; the result is the smallest candidate found by then");
        } else {
            println!("stopped by {why}");
        }
    }
    let plan_path = out.join("plan.json");
    std::fs::write(&plan_path, serde_json::to_vec_pretty(&shrunk.after.plan)?)
        .with_context(|| format!("writing {}", plan_path.display()))?;
    let after_spec = shrunk.after.apply(&spec, &plan_path);
    let command = repeat_command(&serde_json::to_value(&after_spec)?);
    std::fs::write(out.join("command.txt"), format!("{command}\n"))
        .with_context(|| format!("writing {}", out.join("command.txt").display()))?;
    let failing = shrunk.failing_replay.as_ref();
    let (b, f) = (&shrunk.before, &shrunk.after);
    let mut record = serde_json::json!({
        "run": run.display().to_string(),
        "failure": class.to_string(),
        "reproduced": shrunk.reproduced,
        "outcome": shrunk.outcome,
        "events_before": b.plan.len(), "events_after": f.plan.len(),
        "plan_before": b.plan, "plan_after": f.plan,
        "time_limit_s_before": b.time_limit_s, "time_limit_s_after": f.time_limit_s,
        "concurrency_before": b.concurrency, "concurrency_after": f.concurrency,
        "active_keys_before": b.active_keys, "active_keys_after": f.active_keys,
        "rate_before": b.rate, "rate_after": f.rate,
        "ops_before": summary.stats.ops,
        "ops_after": failing.map(|r| r.ops),
        "failing_replay": failing.and_then(|r| r.run_dir.as_ref()).map(|d| d.display().to_string()),
        "replays_per_candidate": bounds.replays,
        "replay_rate": {"failed": shrunk.confirm_failed, "runs": shrunk.confirm_runs,
            "asked": shrunk.confirm_asked, "cut_by_budget": shrunk.confirm_cut},
        "stopped_by": shrunk.stopped_by,
        "steps": shrunk.steps,
        "seconds": shrunk.seconds,
        "command": command,
    });
    println!(
        "fault events {} -> {}; run length {} s -> {} s; clients {} -> {}; keys {} -> {}; rate {} -> {}",
        b.plan.len(),
        f.plan.len(),
        b.time_limit_s,
        f.time_limit_s,
        b.concurrency,
        f.concurrency,
        b.active_keys,
        f.active_keys,
        b.rate,
        f.rate
    );
    if shrunk.reproduced {
        println!(
            "ops {} -> {} (the last failing replay); {}; {:.0} s",
            summary.stats.ops,
            failing.map_or_else(|| "?".to_string(), |r| r.ops.to_string()),
            shrunk.conclusion(&class.to_string()),
            shrunk.seconds
        );
    } else {
        println!(
            "{}; {:.0} s",
            shrunk.conclusion(&class.to_string()),
            shrunk.seconds
        );
    }
    // The history of the last failing replay, shrunk for the same checker and anomaly.
    if let Some(dir) = failing.and_then(|r| r.run_dir.clone()) {
        let left_s = (a.schedule.budget as f64 - shrunk.seconds).max(0.0) as u64;
        match shrink_replay_history(&dir, &out, &class, a, left_s) {
            Ok(Some((before, after))) => {
                record["history_ops_before"] = before.into();
                record["history_ops_after"] = after.into();
            }
            Ok(None) => eprintln!(
                "the failing replay's history no longer fails as {class} when checked again; no history shrink"
            ),
            Err(e) => eprintln!("shrinking the failing replay's history: {e:#}"),
        }
    }
    std::fs::write(
        out.join("schedule.json"),
        serde_json::to_vec_pretty(&record)?,
    )
    .with_context(|| format!("writing {}", out.join("schedule.json").display()))?;
    // The run's own report links to what was found (a custom --out is linked only when
    // it is the run's shrunk/).
    if out == run.join("shrunk") {
        let html = render_run_report(run)?;
        std::fs::write(run.join("report.html"), html)
            .with_context(|| format!("writing {}", run.join("report.html").display()))?;
    }
    println!("reproduction: {command}");
    println!("written to {}", out.display());
    // Invalid when a replay failed the same way: a kept candidate, or the original
    // measured when the budget left no search.
    Ok(
        if shrunk.outcome != Outcome::NotReproduced && shrunk.confirm_failed > 0 {
            verdict_code(Validity::Invalid)
        } else {
            verdict_code(Validity::Unknown)
        },
    )
}

/// The least time the history shrink of the failing replay gets when the schedule shrink
/// has spent its budget: 30 s shrink most histories 1-minimal (all 23 bundled bugs' in
/// under 3 s), and a shrink stopped by its bound still writes a failing history.
const HISTORY_SHRINK_MIN_S: u64 = 30;

/// Shrinks the history of the replay in `dir` for `class`'s checker into `out`, in what is
/// left of the budget (`left_s`, at least [`HISTORY_SHRINK_MIN_S`], at most
/// `--max-seconds`); the ops before and after, or `None` when that checker no longer
/// finds it failing that way.
fn shrink_replay_history(
    dir: &Path,
    out: &Path,
    class: &FailureClass,
    a: &ShrinkArgs,
    left_s: u64,
) -> anyhow::Result<Option<(usize, usize)>> {
    let (stored, history, check) = load(dir, &a.check)?;
    let (_, checkers) = select_checkers(&a.selection, &history, &stored, &check)?;
    let checkers: Vec<Box<dyn Checker>> = checkers
        .into_iter()
        .filter(|c| c.name() == class.checker)
        .collect();
    let results: Vec<CheckResult> = checkers.iter().map(|c| c.check(&history)).collect();
    let mut flags = a.shrink.clone();
    flags.out = Some(out.to_path_buf());
    flags.max_seconds = flags.max_seconds.min(left_s.max(HISTORY_SHRINK_MIN_S));
    flags.anomaly = class.anomaly.clone();
    Ok(
        shrink_first_failure(dir, &stored, &history, &checkers, &results, &flags)?
            .map(|s| (s.ops_before, s.ops_after)),
    )
}
