//! `splitbrain bench online`: what checking while the test runs costs. The same kv run at
//! `--rate 0` (register workload, no faults, seed 1), with online checking and with
//! `--no-online-check`, alternating, each a child `splitbrain test` whose CPU and memory
//! are measured from outside: tree CPU (user + sys of splitbrain and its reaped nodes,
//! from `wait4`), splitbrain's own CPU and resident set (`/proc`, sampled every second,
//! the resident set shown every `sample_every`), the peak RSS of the tree (`wait4`'s
//! `ru_maxrss`: its largest process), and the ok ops the history holds.

use splitbrain_checkers::table::Table;
use std::fmt::Write as _;
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One measured run.
#[derive(Debug, Clone)]
pub struct OnlineRun {
    /// Online checking was on.
    pub online: bool,
    /// user + sys seconds of the tree.
    pub tree_cpu_s: f64,
    /// splitbrain's own user + sys seconds at its last sample.
    pub own_cpu_s: f64,
    /// ok completions in the history.
    pub ok_ops: u64,
    /// The tree's largest resident set, bytes.
    pub peak_rss: u64,
    /// (seconds into the run, splitbrain's resident set in bytes), every `sample_every`
    /// and the last sample.
    pub rss: Vec<(f64, u64)>,
    /// The run's exit code.
    pub code: Option<i32>,
    /// /proc/loadavg's first three fields before and after.
    pub load: (String, String),
}

impl OnlineRun {
    /// Tree CPU seconds per 1,000 ok ops.
    pub fn tree_per_k(&self) -> f64 {
        self.tree_cpu_s * 1000.0 / self.ok_ops.max(1) as f64
    }
    /// splitbrain's CPU seconds per 1,000 ok ops.
    pub fn own_per_k(&self) -> f64 {
        self.own_cpu_s * 1000.0 / self.ok_ops.max(1) as f64
    }
}

/// The load averages (1, 5, 15 min).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// user + sys seconds and the resident set (bytes) of `pid`, from /proc.
fn sample(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in its parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after the name.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((ticks / hz, rss_kib * 1024))
}

/// The ok completions of a JSON Lines history.
fn ok_ops(history: &Path) -> u64 {
    let Ok(f) = std::fs::File::open(history) else {
        return 0;
    };
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains(r#""type":"ok""#))
        .count() as u64
}

/// Runs one `splitbrain test` child (`exe`) for `duration`, its store under `dir`.
pub fn run_once(
    exe: &Path,
    dir: &Path,
    duration: Duration,
    online: bool,
    sample_every: Duration,
) -> anyhow::Result<OnlineRun> {
    let store = dir.join(if online { "on" } else { "off" });
    let _ = std::fs::remove_dir_all(&store);
    std::fs::create_dir_all(&store)?;
    let limit = format!("{}", duration.as_secs_f64());
    let mut cmd = Command::new(exe);
    cmd.args([
        "test",
        "--target",
        "kv",
        "--workload",
        "register",
        "--no-progress",
    ])
    .args(["--rate", "0", "--nemesis", "none", "--seed", "1"])
    .args(["--time-limit", &limit])
    .arg("--store")
    .arg(&store)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.join("stderr.txt"))?);
    if !online {
        cmd.arg("--no-online-check");
    }
    let load_before = load_average();
    let started = Instant::now();
    let child = cmd.spawn()?;
    let pid = child.id();
    let mut rss = Vec::new();
    let mut own_cpu_s = 0.0;
    let mut next_shown = sample_every;
    let mut last: Option<(f64, u64)> = None;
    // Bounded by the child: it ends within its time limit plus its heal and check.
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value; wait4 writes only into `status`
        // and `usage`, both live for the call.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let reaped =
            unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid as libc::pid_t {
            break (status, usage);
        }
        if reaped < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let at = started.elapsed();
        if let Some((cpu, bytes)) = sample(pid) {
            own_cpu_s = cpu;
            last = Some((at.as_secs_f64(), bytes));
            if at >= next_shown {
                rss.push((at.as_secs_f64(), bytes));
                next_shown += sample_every;
            }
        }
        std::thread::sleep(Duration::from_millis(1000).min(sample_every));
    };
    if let Some(l) = last {
        if rss.last().map(|r| r.0) != Some(l.0) {
            rss.push(l);
        }
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let ok = ok_ops(&store.join("latest").join("history.jsonl"));
    let _ = std::fs::remove_dir_all(&store);
    if ok == 0 {
        let errors = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
        anyhow::bail!(
            "the {} run recorded no ok op (exit {code:?}): {}",
            if online {
                "online"
            } else {
                "--no-online-check"
            },
            errors.trim()
        );
    }
    Ok(OnlineRun {
        online,
        tree_cpu_s: secs(usage.ru_utime) + secs(usage.ru_stime),
        own_cpu_s,
        ok_ops: ok,
        // ru_maxrss is in KiB on Linux.
        peak_rss: usage.ru_maxrss.max(0) as u64 * 1024,
        rss,
        code,
        load: (load_before, load_average()),
    })
}

/// `rounds` rounds of one run with online checking and one without, the first of each
/// round alternating; `progress` hears of each run as it ends.
pub fn run_bench(
    exe: &Path,
    dir: &Path,
    duration: Duration,
    rounds: usize,
    sample_every: Duration,
    progress: &dyn Fn(&OnlineRun),
) -> anyhow::Result<Vec<OnlineRun>> {
    let mut runs = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for online in order {
            let r = run_once(exe, dir, duration, online, sample_every)?;
            progress(&r);
            runs.push(r);
        }
    }
    Ok(runs)
}

/// The tables (Markdown): one row per run, the ratio of the sums (on / off), and
/// splitbrain's resident set over time.
pub fn table(runs: &[OnlineRun], duration: Duration) -> String {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kv register --rate 0 --nemesis none --seed 1, {} s per run",
        duration.as_secs_f64()
    );
    let mut t = Table::new([
        "online",
        "exit",
        "ok ops",
        "tree CPU s",
        "per 1k ok ops",
        "splitbrain CPU s",
        "per 1k ok ops",
        "peak RSS MiB",
        "per 1M ok ops",
        "load before",
        "load after",
    ]);
    for r in runs {
        t.row([
            if r.online { "on" } else { "off" }.to_string(),
            r.code.map_or("-".to_string(), |c| c.to_string()),
            r.ok_ops.to_string(),
            format!("{:.1}", r.tree_cpu_s),
            format!("{:.3}", r.tree_per_k()),
            format!("{:.1}", r.own_cpu_s),
            format!("{:.3}", r.own_per_k()),
            format!("{:.0}", mib(r.peak_rss)),
            format!("{:.0}", mib(r.peak_rss) * 1e6 / r.ok_ops.max(1) as f64),
            r.load.0.to_string(),
            r.load.1.to_string(),
        ]);
    }
    out.push_str(&t.markdown());
    let sum = |online: bool, f: &dyn Fn(&OnlineRun) -> f64| -> f64 {
        runs.iter().filter(|r| r.online == online).map(f).sum()
    };
    let ops = |online| sum(online, &|r| r.ok_ops as f64).max(1.0);
    let per_k = |online, f: &dyn Fn(&OnlineRun) -> f64| sum(online, f) * 1000.0 / ops(online);
    let n = |online: bool| runs.iter().filter(|r| r.online == online).count().max(1) as f64;
    if runs.iter().any(|r| r.online) && runs.iter().any(|r| !r.online) {
        let tree = per_k(true, &|r| r.tree_cpu_s) / per_k(false, &|r| r.tree_cpu_s);
        let own = per_k(true, &|r| r.own_cpu_s) / per_k(false, &|r| r.own_cpu_s);
        let peak = (sum(true, &|r| r.peak_rss as f64) / n(true))
            / (sum(false, &|r| r.peak_rss as f64) / n(false));
        // The recorder keeps the whole history for the final check, so memory grows with
        // the ops recorded whether online checking is on or not: per op is the comparison.
        let peak_per_op =
            per_k(true, &|r| r.peak_rss as f64) / per_k(false, &|r| r.peak_rss as f64);
        let _ = writeln!(
            out,
            "\non / off: tree CPU per 1k ok ops {:.3} ({:+.1} %), splitbrain CPU per 1k ok ops {:.3} ({:+.1} %), peak RSS {:.3} ({:+.1} %), peak RSS per ok op {:.3} ({:+.1} %)",
            tree,
            (tree - 1.0) * 100.0,
            own,
            (own - 1.0) * 100.0,
            peak,
            (peak - 1.0) * 100.0,
            peak_per_op,
            (peak_per_op - 1.0) * 100.0
        );
    }
    let _ = writeln!(
        out,
        "\nsplitbrain's resident set, MiB (s into the run: MiB)"
    );
    for r in runs {
        let samples: Vec<String> = r
            .rss
            .iter()
            .map(|(t, b)| format!("{t:.0}: {:.0}", mib(*b)))
            .collect();
        let _ = writeln!(
            out,
            "- {}: {}",
            if r.online { "on " } else { "off" },
            samples.join(", ")
        );
    }
    out
}
