//! `splitbrain bench limit FILE`: how close `check` comes to the machine's limit on one
//! history file. In one run: the raw read bandwidth (the file read once), a bare parse
//! (every line parsed by serde_json into `IgnoredAny`, touching every byte and value, on
//! one thread and on all), and `splitbrain check` of the file in a child process with its
//! phases (from `SPLITBRAIN_CHECK_PROFILE`, `SPLITBRAIN_LIN_PROFILE` and Elle's
//! `phase-ms`), wall time and peak RSS, and the ratio check ÷ bare parse.

use super::controller::{wait_with_output_and_rusage, ChildOutput};
use rayon::prelude::*;
use splitbrain_checkers::table::Table;
use std::io::Read as _;
use std::path::Path;
use std::time::Instant;

/// The history `--generate` writes before measuring.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Generated {
    /// Keyed cas-register (100 keys, 50 processes), `info` % of ops ending `info`:
    /// `size` ops (three generator steps an op).
    Cas {
        /// Percentage of ops ending `info`.
        info: f64,
        /// One `ok` read near the middle returns a value never written (not linearizable).
        corrupt: bool,
    },
    /// Strict-serializable list-append (1-5 micro-ops, 1000 rotating keys), `size`
    /// transactions over `processes` processes; with one injected G1c when `g1c`;
    /// rw-register micro-ops instead of appends when `rw_register`.
    Append {
        /// Client processes.
        processes: usize,
        /// Inject one G1c.
        g1c: bool,
        /// Writes and register reads instead of appends and list reads.
        rw_register: bool,
    },
}

/// Writes the `kind` history of `size` ops or transactions to `path`.
pub fn generate(path: &Path, kind: Generated, size: usize) -> std::io::Result<()> {
    match kind {
        Generated::Cas { info, corrupt } => {
            splitbrain_checkers::linearizability::write_keyed_cas_history(
                path,
                1,
                3 * size,
                100,
                50,
                info / 100.0,
                corrupt,
            )
        }
        Generated::Append {
            processes,
            g1c,
            rw_register,
        } => {
            let mut cfg =
                splitbrain_checkers::elle::bench::GenConfig::new(1, size, 1000, processes);
            cfg.g1c = g1c;
            cfg.rw_register = rw_register;
            splitbrain_checkers::elle::bench::write_list_append_history(path, &cfg)
        }
    }
}

/// Bytes per read of the raw-read and bare-parse passes.
const BLOCK: usize = 16 << 20;

/// Reads `path` once in blocks (touching every byte): (bytes, seconds).
pub fn raw_read(path: &Path) -> std::io::Result<(u64, f64)> {
    let started = Instant::now();
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; BLOCK];
    let (mut bytes, mut sum) = (0u64, 0u64);
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        // Touch every byte, so the pass cannot be a copy the CPU never looks at.
        sum = buf[..n].chunks(8).fold(sum, |s, c| {
            s.wrapping_add(c.iter().map(|&b| b as u64).sum())
        });
    }
    std::hint::black_box(sum);
    Ok((bytes, started.elapsed().as_secs_f64()))
}

/// Reads `path` in blocks and parses every line with serde_json into `IgnoredAny` (every
/// byte and value looked at, nothing kept), the lines of a block on `threads` threads:
/// (lines, seconds). A line that is not JSON is an error.
pub fn bare_parse(path: &Path, threads: usize) -> anyhow::Result<(u64, f64)> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()?;
    let started = Instant::now();
    let mut file = std::fs::File::open(path)?;
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK * 2);
    let mut lines = 0u64;
    let mut done = false;
    while !done {
        let have = buf.len();
        buf.resize(have + BLOCK, 0);
        let n = file.read(&mut buf[have..])?;
        buf.truncate(have + n);
        done = n == 0;
        // Parse up to the last newline (everything at the end), keep the rest.
        let end = if done {
            buf.len()
        } else {
            match buf.iter().rposition(|&b| b == b'\n') {
                Some(p) => p + 1,
                None => continue,
            }
        };
        let block = &buf[..end];
        let parsed: Result<u64, serde_json::Error> = pool.install(|| {
            block
                .par_split(|&b| b == b'\n')
                .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                .map(|l| serde_json::from_slice::<serde::de::IgnoredAny>(l).map(|_| 1u64))
                .try_reduce(|| 0, |a, b| Ok(a + b))
        });
        lines += parsed.map_err(|e| anyhow::anyhow!("{}: not JSON Lines: {e}", path.display()))?;
        buf.drain(..end);
    }
    Ok((lines, started.elapsed().as_secs_f64()))
}

/// One `splitbrain check` of the file.
#[derive(Debug, Clone)]
pub struct CheckRun {
    /// The child's wall time.
    pub seconds: f64,
    /// The child's peak RSS, bytes.
    pub max_rss: u64,
    /// Phases in order: (name, seconds).
    pub phases: Vec<(String, f64)>,
    /// Per checker: (name, verdict label, anomaly types).
    pub verdicts: Vec<(String, String, Vec<String>)>,
    /// The first checker's explanation.
    pub explanation: String,
}

/// Runs `exe check path args.. --format json` with the profiles on.
pub fn check(exe: &Path, path: &Path, args: &[String], scratch: &Path) -> anyhow::Result<CheckRun> {
    let errors = scratch.join("limit-check.stderr");
    let started = Instant::now();
    let child = std::process::Command::new(exe)
        .arg("check")
        .arg(path)
        .args(args)
        .args(["--format", "json"])
        .env("SPLITBRAIN_LIN_PROFILE", "1")
        .env("SPLITBRAIN_CHECK_PROFILE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&errors)?)
        .spawn()?;
    let ChildOutput { stdout, max_rss } = wait_with_output_and_rusage(child)?;
    let seconds = started.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&errors).unwrap_or_default();
    let _ = std::fs::remove_file(&errors);
    let json: serde_json::Value = serde_json::from_slice(&stdout).map_err(|e| {
        anyhow::anyhow!(
            "`splitbrain check` printed no JSON ({e}); its stderr: {}",
            stderr.trim()
        )
    })?;
    Ok(CheckRun {
        seconds,
        max_rss,
        phases: phases(&stderr, &json),
        verdicts: json["results"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| {
                        let verdict = match r["valid"].as_bool() {
                            Some(true) => "valid",
                            Some(false) => "INVALID",
                            None => "unknown",
                        };
                        let types = r["anomaly_types"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|t| t.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (
                            r["checker"].as_str().unwrap_or("").to_string(),
                            verdict.to_string(),
                            types,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        explanation: json["results"][0]["explanation"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    })
}

/// The check's phases: `check profile:` lines (read, check, output), with the check
/// phase split into the linearizability checker's prepare/search or Elle's `phase-ms`
/// where present.
fn phases(stderr: &str, json: &serde_json::Value) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    let number_after = |line: &str, tag: &str| {
        line.split_once(tag)
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
    };
    let mut inner: Vec<(String, f64)> = Vec::new();
    if let Some(line) = stderr
        .lines()
        .find(|l| l.starts_with("linearizability profile: prepare "))
    {
        if let Some(s) = number_after(line, "prepare ") {
            inner.push(("prepare".into(), s));
        }
        if let Some(s) = number_after(line, ", search ") {
            inner.push(("search".into(), s));
        }
    }
    // Elle's phases, in the order it runs them (the JSON object's keys are sorted).
    const ELLE: [&str; 6] = [
        "intern",
        "infer",
        "edges",
        "graph",
        "cycles",
        "cycle-exists",
    ];
    for r in json["results"].as_array().into_iter().flatten() {
        if let Some(ms) = r["details"]["phase-ms"].as_object() {
            let mut named: Vec<(&String, &serde_json::Value)> = ms.iter().collect();
            named.sort_by_key(|(n, _)| ELLE.iter().position(|e| e == n).unwrap_or(ELLE.len()));
            for (name, v) in named {
                inner.push((name.clone(), v.as_f64().unwrap_or(0.0) / 1000.0));
            }
        }
    }
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("check profile: ") else {
            continue;
        };
        let Some((name, _)) = rest.split_once(' ') else {
            continue;
        };
        let Some(s) = number_after(rest, &format!("{name} ")) else {
            continue;
        };
        if name == "check" && !inner.is_empty() {
            let known: f64 = inner.iter().map(|(_, s)| s).sum();
            out.append(&mut inner);
            out.push(("check, rest".into(), (s - known).max(0.0)));
        } else {
            out.push((name.to_string(), s));
        }
    }
    out
}

/// What `bench limit` measured.
pub struct LimitReport {
    /// The file's size.
    pub bytes: u64,
    /// Seconds of the raw read.
    pub read_s: f64,
    /// Lines the bare parse parsed.
    pub lines: u64,
    /// Seconds of the bare parse on one thread.
    pub parse1_s: f64,
    /// And on `threads`.
    pub parse_all_s: f64,
    /// Threads of the parallel bare parse (rayon's).
    pub threads: usize,
    /// The check.
    pub check: CheckRun,
}

impl LimitReport {
    /// Markdown: one table of the passes, the check's phases, the verdicts.
    pub fn markdown(&self, file: &str, load: &str) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let mb = self.bytes as f64 / 1e6;
        let _ = writeln!(
            out,
            "{file}: {mb:.0} MB, {} lines; load before the run: {load}",
            self.lines
        );
        let mut t = Table::new(["pass", "seconds", "MB/s", "peak RSS MB"]);
        let row = |t: &mut Table, what: &str, s: f64, rss: String| {
            t.row([
                what.to_string(),
                format!("{s:.2}"),
                format!("{:.0}", mb / s.max(1e-9)),
                rss,
            ]);
        };
        row(&mut t, "raw read", self.read_s, "-".into());
        row(
            &mut t,
            "bare parse (serde_json IgnoredAny), 1 thread",
            self.parse1_s,
            "-".into(),
        );
        row(
            &mut t,
            &format!("bare parse, {} threads", self.threads),
            self.parse_all_s,
            "-".into(),
        );
        row(
            &mut t,
            "splitbrain check",
            self.check.seconds,
            format!("{:.0}", self.check.max_rss as f64 / 1e6),
        );
        for (name, s) in &self.check.phases {
            t.row([format!("- {name}"), format!("{s:.2}")]);
        }
        out.push_str(&t.markdown());
        let _ = writeln!(
            out,
            "check ÷ bare parse: {:.1}x ({} threads), {:.1}x (1 thread)",
            self.check.seconds / self.parse_all_s.max(1e-9),
            self.threads,
            self.check.seconds / self.parse1_s.max(1e-9)
        );
        for (checker, verdict, types) in &self.check.verdicts {
            let _ = writeln!(
                out,
                "{checker}: {verdict}{}",
                if types.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", types.join(", "))
                }
            );
        }
        if !self.check.explanation.is_empty() {
            let e: String = self.check.explanation.chars().take(300).collect();
            let _ = writeln!(out, "explanation: {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_parse_counts_every_line_across_blocks_and_refuses_non_json() {
        let dir = std::env::temp_dir().join(format!("sb-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.jsonl");
        generate(
            &path,
            Generated::Append {
                processes: 10,
                g1c: true,
                rw_register: false,
            },
            2000,
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = text.lines().count() as u64;
        assert_eq!(bare_parse(&path, 2).unwrap().0, lines);
        assert_eq!(raw_read(&path).unwrap().0, text.len() as u64);
        std::fs::write(&path, format!("{text}{{\"index\": 1,\n")).unwrap();
        assert!(bare_parse(&path, 1).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cas_corrupt_differs_from_cas_by_one_read_of_a_value_never_written() {
        let dir = std::env::temp_dir().join(format!("sb-limit-cas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let read = |corrupt: bool| {
            let path = dir.join(format!("cas-{corrupt}.jsonl"));
            generate(&path, Generated::Cas { info: 5.0, corrupt }, 2000).unwrap();
            std::fs::read_to_string(&path).unwrap()
        };
        let (valid, corrupt) = (read(false), read(true));
        let _ = std::fs::remove_dir_all(&dir);
        let differing: Vec<(&str, &str)> = valid
            .lines()
            .zip(corrupt.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(valid.lines().count(), corrupt.lines().count());
        assert_eq!(differing.len(), 1, "{differing:?}");
        let line: serde_json::Value = serde_json::from_str(differing[0].1).unwrap();
        assert_eq!(line["type"], "ok");
        assert_eq!(line["f"], "read");
        // The generator writes 1-5 only.
        let value = line["value"].as_i64().unwrap();
        assert!(!(1..=5).contains(&value), "{value}");
    }

    #[test]
    fn phases_split_the_check_into_the_checkers_own() {
        let stderr = "check profile: read 2.000 s, peak RSS 10 MiB\n\
                      linearizability profile: prepare 1.500 s (1 parts, 2 ops, 0 unsure), search 0.250 s\n\
                      check profile: check 2.000 s, peak RSS 20 MiB\n\
                      check profile: output 0.010 s, peak RSS 20 MiB\n";
        let p = phases(stderr, &serde_json::json!({}));
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["read", "prepare", "search", "check, rest", "output"]
        );
        assert_eq!(p[3].1, 0.25);
        let json = serde_json::json!({"results": [{"details": {"phase-ms": {"intern": 500, "cycles": 100, "graph": 200}}}]});
        let p = phases("check profile: check 1.000 s, peak RSS 1 MiB\n", &json);
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["intern", "graph", "cycles", "check, rest"]);
        assert!((p[3].1 - 0.2).abs() < 1e-9, "{p:?}");
    }
}
