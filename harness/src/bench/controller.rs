//! `splitbrain bench controller`: how many ops per second the controller can record with
//! an in-process no-op client (no network), i.e. the harness's own ceiling.

use crate::run::recorder::HistoryRecorder;
use crate::run::worker::{RateLimiter, Worker};
use crate::systems::{BoxFuture, Client, Completion, Invocation};
use crate::workload::{register::RegisterWorkload, Workload, WorkloadOptions};
use splitbrain_checkers::table::Table;
use splitbrain_checkers::OpType;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A client that completes every op `ok` at once.
struct NoopClient;

impl Client for NoopClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            Completion {
                op_type: OpType::Ok,
                value: op.value.clone(),
                node: None,
                error: None,
            }
        })
    }
}

/// Result of one controller benchmark run.
#[derive(Debug, Clone, Copy)]
pub struct ControllerBench {
    /// Client processes.
    pub processes: usize,
    /// Completed operations (invoke + completion each).
    pub ops: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl ControllerBench {
    /// Operations recorded per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds
    }
}

/// Runs `processes` workers with the no-op client for `duration`, recording the
/// register workload's history to `history` (a real file, flushed as in a test).
pub async fn controller_throughput(
    processes: usize,
    duration: Duration,
    history: &Path,
) -> std::io::Result<ControllerBench> {
    let start = Instant::now();
    let recorder = HistoryRecorder::create(history, start, false)?;
    let generator = Arc::new(Mutex::new(RegisterWorkload.generator(WorkloadOptions {
        active_keys: 64,
        ops_per_key: 1000,
    })));
    let cancel = CancellationToken::new();
    let deadline = Instant::now() + duration;
    let mut set = tokio::task::JoinSet::new();
    for slot in 0..processes {
        let w = Worker {
            slot,
            concurrency: processes,
            make_client: Arc::new(|_| Box::new(NoopClient) as Box<dyn Client>),
            generator: generator.clone(),
            recorder: recorder.clone(),
            limiter: Arc::new(RateLimiter::new(0.0, 0)),
            op_timeout: Duration::from_secs(1),
            seed: 1,
        };
        set.spawn(w.run(deadline, cancel.clone()));
    }
    while set.join_next().await.is_some() {}
    let ops = recorder
        .counts
        .ok
        .load(std::sync::atomic::Ordering::Relaxed);
    recorder.finish()?;
    Ok(ControllerBench {
        processes,
        ops,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// One cell of `bench linearizable --scale`: a generated keyed cas-register history
/// checked by a `splitbrain check` child process.
#[derive(Debug, Clone)]
pub struct ScaleCell {
    /// Nominal size in ops: the generator ran for three times as many steps (an invoke,
    /// a linearization point and a completion per op); `ops` is how many the history holds.
    pub size: usize,
    /// Ops in the generated history.
    pub ops: u64,
    /// Percentage of ops ending `info`.
    pub info_percent: f64,
    /// One ok read returns a value never written: the verdict must be invalid.
    pub corrupt: bool,
    /// The child's wall time: reading the file and checking it (generation excluded).
    pub seconds: f64,
    /// Of which the linearizability checker's preparing of the parts (parsing each op's
    /// text, translating it), from the child's `SPLITBRAIN_LIN_PROFILE` line; `None` when
    /// the line was missing.
    pub prepare_seconds: Option<f64>,
    /// And its search of the parts (same line).
    pub search_seconds: Option<f64>,
    /// The child's peak resident set (its own `wait4` rusage), bytes.
    pub max_rss: u64,
    /// The linearizability verdict: `valid`, `INVALID` or `unknown`.
    pub verdict: String,
    /// The verdict's explanation.
    pub explanation: String,
}

/// Generates a keyed cas-register history (100 keys, 50 processes, seed 1) of about
/// `size` ops with `info_percent` % of them ending `info` (one corrupt read if `corrupt`)
/// into `dir`, checks it with `exe check ... --model cas-register` in a child process, and
/// deletes it.
pub fn linearizable_scale_cell(
    exe: &Path,
    dir: &Path,
    size: usize,
    info_percent: f64,
    corrupt: bool,
) -> anyhow::Result<ScaleCell> {
    let path = dir.join(format!("cas-{size}-{info_percent}-{corrupt}.jsonl"));
    let errors = dir.join("check.stderr");
    let checked = generate_and_check(exe, &path, &errors, size, info_percent, corrupt);
    let _ = std::fs::remove_file(&path);
    let (output, seconds) = checked?;
    let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
    let _ = std::fs::remove_file(&errors);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        anyhow::anyhow!(
            "`splitbrain check` printed no JSON ({e}); its stderr: {}",
            stderr.trim()
        )
    })?;
    let result = &json["results"][0];
    let verdict = match result["valid"].as_bool() {
        Some(true) => "valid",
        Some(false) => "INVALID",
        None => "unknown",
    };
    let (prepare_seconds, search_seconds) = profile_phases(&stderr);
    Ok(ScaleCell {
        size,
        ops: json["stats"]["ops"].as_u64().unwrap_or(0),
        info_percent,
        corrupt,
        seconds,
        prepare_seconds,
        search_seconds,
        max_rss: output.max_rss,
        verdict: verdict.to_string(),
        explanation: result["explanation"].as_str().unwrap_or("").to_string(),
    })
}

/// Writes the history to `path` and checks it in a child (stderr to `errors`): its output
/// and wall time.
fn generate_and_check(
    exe: &Path,
    path: &Path,
    errors: &Path,
    size: usize,
    info_percent: f64,
    corrupt: bool,
) -> anyhow::Result<(ChildOutput, f64)> {
    splitbrain_checkers::linearizability::write_keyed_cas_history(
        path,
        1,
        3 * size,
        100,
        50,
        info_percent / 100.0,
        corrupt,
    )?;
    let started = Instant::now();
    let child = std::process::Command::new(exe)
        .arg("check")
        .arg(path)
        .args(["--model", "cas-register", "--format", "json"])
        .args(["--check-time-limit", "600"])
        .env("SPLITBRAIN_LIN_PROFILE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(errors)?)
        .spawn()?;
    let output = wait_with_output_and_rusage(child)?;
    Ok((output, started.elapsed().as_secs_f64()))
}

/// The prepare and search seconds of a `linearizability profile: prepare X s (...), search
/// Y s` line.
fn profile_phases(stderr: &str) -> (Option<f64>, Option<f64>) {
    let Some(line) = stderr
        .lines()
        .find(|l| l.starts_with("linearizability profile: prepare "))
    else {
        return (None, None);
    };
    let number_after = |tag: &str| {
        line.split_once(tag)
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
    };
    (number_after("prepare "), number_after(", search "))
}

/// A child's stdout and peak resident set.
pub(crate) struct ChildOutput {
    pub stdout: Vec<u8>,
    pub max_rss: u64,
}

/// Reads the child's stdout to its end, then reaps it with `wait4`, which reports that
/// child's own peak RSS (`RUSAGE_CHILDREN` would be the largest of all children).
pub(crate) fn wait_with_output_and_rusage(
    mut child: std::process::Child,
) -> std::io::Result<ChildOutput> {
    use std::io::Read as _;
    let mut stdout = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_end(&mut stdout)?;
    }
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value, and wait4 writes only into `status`
    // and `usage`, both live for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        return Err(std::io::Error::last_os_error());
    }
    // ru_maxrss is in KiB on Linux.
    Ok(ChildOutput {
        stdout,
        max_rss: (usage.ru_maxrss.max(0) as u64) * 1024,
    })
}

/// The scale table (Markdown): one row per cell, then per info rate (corrupt cells aside)
/// the growth of the check time from the smallest size to the largest, then the corrupt
/// cells' explanations.
pub fn scale_table(cells: &[ScaleCell], load: &str) -> String {
    use std::fmt::Write as _;
    let secs = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{s:.2}"));
    let mut out = String::new();
    let _ = writeln!(out, "load before the run: {load}");
    let mut t = Table::new([
        "ops",
        "info %",
        "history",
        "check s (read + check)",
        "of which prepare s",
        "search s",
        "peak RSS MB",
        "verdict",
    ]);
    for c in cells {
        t.row([
            c.ops.to_string(),
            c.info_percent.to_string(),
            if c.corrupt {
                "one corrupt read"
            } else {
                "generated"
            }
            .to_string(),
            format!("{:.2}", c.seconds),
            secs(c.prepare_seconds),
            secs(c.search_seconds),
            format!("{:.0}", c.max_rss as f64 / 1e6),
            c.verdict.to_string(),
        ]);
    }
    out.push_str(&t.markdown());
    let mut rates: Vec<f64> = Vec::new();
    for c in cells.iter().filter(|c| !c.corrupt) {
        if !rates.contains(&c.info_percent) {
            rates.push(c.info_percent);
        }
    }
    for rate in rates {
        let row: Vec<&ScaleCell> = cells
            .iter()
            .filter(|c| !c.corrupt && c.info_percent == rate)
            .collect();
        let smallest = row.iter().min_by_key(|c| c.size);
        let largest = row.iter().max_by_key(|c| c.size);
        if let (Some(s), Some(l)) = (smallest, largest) {
            if l.size > s.size && s.seconds > 0.0 {
                let _ = writeln!(
                    out,
                    "info {rate} %: time({}) / time({}) = {:.1} for {:.1}x the ops",
                    l.size,
                    s.size,
                    l.seconds / s.seconds,
                    l.size as f64 / s.size as f64
                );
            }
        }
    }
    for c in cells.iter().filter(|c| c.corrupt) {
        let _ = writeln!(
            out,
            "corrupt read, {} ops, {} % info: {}: {}",
            c.size, c.info_percent, c.verdict, c.explanation
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(size: usize, info_percent: f64, seconds: f64, corrupt: bool) -> ScaleCell {
        ScaleCell {
            size,
            ops: size as u64 + 7,
            info_percent,
            corrupt,
            seconds,
            prepare_seconds: Some(seconds / 2.0),
            search_seconds: None,
            max_rss: 50_000_000,
            verdict: if corrupt { "INVALID" } else { "valid" }.into(),
            explanation: if corrupt {
                "read 6 at k1".into()
            } else {
                String::new()
            },
        }
    }

    #[test]
    fn scale_table_has_a_row_per_cell_and_a_growth_per_rate() {
        let cells = [
            cell(1000, 0.0, 1.0, false),
            cell(10_000, 0.0, 9.0, false),
            cell(1000, 5.0, 2.0, false),
            cell(10_000, 5.0, 30.0, false),
            cell(1000, 5.0, 4.0, true),
            cell(10_000, 5.0, 400.0, true),
        ];
        let table = scale_table(&cells, "0.5 0.4 0.3");
        assert!(table.starts_with("load before the run: 0.5 0.4 0.3\n"));
        // The rows, with the table's padding folded to single spaces.
        let folded = table.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            folded.contains("| 10007 | 5 | generated | 30.00 | 15.00 | - | 50 | valid |"),
            "{table}"
        );
        assert!(folded.contains("| 1007 | 5 | one corrupt read | 4.00 | 2.00 | - | 50 | INVALID |"));
        assert!(table.contains("info 0 %: time(10000) / time(1000) = 9.0 for 10.0x the ops"));
        // The corrupt cells are not part of the growth.
        assert!(table.contains("info 5 %: time(10000) / time(1000) = 15.0 for 10.0x the ops"));
        assert!(table.contains("corrupt read, 10000 ops, 5 % info: INVALID: read 6 at k1"));
    }

    #[test]
    fn profile_phases_reads_the_checkers_line() {
        let stderr = "x\nlinearizability profile: prepare 1.250 s (100 parts, 9 ops, 1 unsure), \
                      search 0.500 s\n";
        assert_eq!(profile_phases(stderr), (Some(1.25), Some(0.5)));
        assert_eq!(profile_phases("nothing"), (None, None));
    }
}
