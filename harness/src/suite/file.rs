//! Suite files: TOML in, expanded cells out.
//!
//! ```toml
//! name = "mine"
//! seeds = [1, 2, 3]
//! [defaults]              # any cell field; each cell overrides
//! time_limit = 10
//! [[cell]]
//! name = "kv/stale-read"
//! target = "kv"
//! bugs = ["stale-read"]
//! nemesis = "partition"
//! expect = "invalid"
//! checkers = ["linearizable"]
//! min_detect = "2/3"
//! matrix = { nodes = [3, 5] }   # one cell per value (cartesian product over keys)
//! [[cell]]
//! target = "exec"
//! target_spec = "examples/http-contract/python/register.toml"   # any server, its spec
//! expect = "valid"
//! [[cell]]                # a program not in this repository, found through a variable:
//! target = "maelstrom"    # the cell is skipped, saying why, when it is unset or the
//! extra = ["--bin", "${MAELSTROM_DEMOS}/ruby/echo.rb"]       # file is absent
//! requires = ["${MAELSTROM_DEMOS}/ruby/echo.rb"]
//! expect = "valid"
//! ```

use super::expect::{Expectation, ExpectedVerdict, MinDetect};
use super::SuiteError;
use crate::run::entry::{TestFlags, TestRequest};
use crate::text::line_of;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use toml::Spanned;

/// A parsed suite: its cells, already expanded over their matrices.
#[derive(Debug, Clone, Serialize)]
pub struct Suite {
    /// The suite's name (the file's `name`, else the file name).
    pub name: String,
    /// What the suite is for.
    pub description: Option<String>,
    /// Where it came from (a path, or `built-in quick`), for messages.
    pub origin: String,
    /// Every cell, in file order.
    pub cells: Vec<Cell>,
}

/// One cell of the matrix: a test definition, the seeds it runs with, what it must give.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Unique within the suite (`kv/stale-read`, `kv/correct [nodes=3]`).
    pub name: String,
    /// 1-based line of the cell's table in the suite file.
    pub line: usize,
    /// The test's options.
    pub options: CellOptions,
    /// The seeds it runs with, one run each.
    pub seeds: Vec<u64>,
    /// What every run (or `min_detect` of them) must give.
    pub expect: Expectation,
    /// Why the cell cannot run here (a `${VAR}` it names is unset, a file it `requires`
    /// is absent): it is skipped, saying so, rather than failed.
    pub skip: Option<String>,
}

/// The options of one test, as `splitbrain test` takes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CellOptions {
    /// `--target`.
    pub target: String,
    /// `--target-spec` (an `exec` target's spec file, as written: relative paths are
    /// taken from the directory the suite runs in).
    pub target_spec: Option<String>,
    /// `--workload` (the target's default when absent).
    pub workload: Option<String>,
    /// `--read-mode` (for txn, the isolation level).
    pub read_mode: Option<String>,
    /// `--nodes`.
    pub nodes: Option<usize>,
    /// `--shards`.
    pub shards: Option<u32>,
    /// `--concurrency`.
    pub concurrency: Option<usize>,
    /// `--rate` (ops/s, 0 = as fast as possible).
    pub rate: Option<f64>,
    /// `--nemesis` (`none` for no faults).
    pub nemesis: Option<String>,
    /// `--nemesis-interval` in seconds.
    pub nemesis_interval: Option<f64>,
    /// `--time-limit` in seconds.
    pub time_limit: Option<f64>,
    /// `--bug`, each.
    pub bugs: Vec<String>,
    /// Any further `splitbrain test` flags, as separate arguments.
    pub extra: Vec<String>,
}

impl CellOptions {
    /// The `splitbrain test` flags for these options (without seed, name and store).
    pub fn flags(&self) -> Vec<String> {
        let mut out = vec!["--target".to_string(), self.target.clone()];
        let mut push = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push(flag.to_string());
                out.push(v);
            }
        };
        push("--target-spec", self.target_spec.clone());
        push("--workload", self.workload.clone());
        push("--read-mode", self.read_mode.clone());
        push("--nodes", self.nodes.map(|v| v.to_string()));
        push("--shards", self.shards.map(|v| v.to_string()));
        push("--concurrency", self.concurrency.map(|v| v.to_string()));
        push("--rate", self.rate.map(|v| v.to_string()));
        push("--nemesis", self.nemesis.clone());
        push(
            "--nemesis-interval",
            self.nemesis_interval.map(|v| v.to_string()),
        );
        push("--time-limit", self.time_limit.map(|v| v.to_string()));
        for b in &self.bugs {
            push("--bug", Some(b.clone()));
        }
        out.extend(self.extra.iter().cloned());
        out
    }
}

impl Cell {
    /// The name its runs get in the run store (a directory name: no `/` or spaces).
    pub fn store_name(&self) -> String {
        self.name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect::<String>()
            .split('-')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    }

    /// The test of one run of this cell, and how it is checked: the `splitbrain test`
    /// flags of its `extra`, its typed options over them, its seed, store name and store,
    /// and whether it stops early ([`Cell::stop_when_found`]). An option set both ways is
    /// an error, as it is given twice; so is a bad flag (clap's first line).
    pub fn request(
        &self,
        seed: u64,
        store: &str,
    ) -> Result<(TestRequest, crate::check::CheckOptions), String> {
        use clap::{Args, FromArgMatches};
        let first_line = |e: clap::Error| {
            let text = e.render().to_string();
            text.lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ")
                .to_string()
        };
        let cmd =
            TestFlags::augment_args(clap::Command::new("splitbrain test").no_binary_name(true));
        let matches = cmd
            .try_get_matches_from(&self.options.extra)
            .map_err(first_line)?;
        let flags = TestFlags::from_arg_matches(&matches).map_err(first_line)?;
        let o = &self.options;
        let typed = [
            ("target", true),
            ("target_spec", o.target_spec.is_some()),
            ("workload", o.workload.is_some()),
            ("read_mode", o.read_mode.is_some()),
            ("nodes", o.nodes.is_some()),
            ("shards", o.shards.is_some()),
            ("concurrency", o.concurrency.is_some()),
            ("rate", o.rate.is_some()),
            ("nemesis", o.nemesis.is_some()),
            ("nemesis_interval", o.nemesis_interval.is_some()),
            ("time_limit", o.time_limit.is_some()),
            ("seed", true),
            ("name", true),
            ("store", true),
        ];
        for (id, set) in typed {
            if set && matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
                return Err(format!(
                    "the argument '--{}' cannot be used multiple times (the cell sets it, and so does its extra)",
                    id.replace('_', "-")
                ));
            }
        }
        let mut r = flags.request;
        r.target = o.target.clone();
        r.target_spec = o.target_spec.as_ref().map(Into::into).or(r.target_spec);
        r.workload = o.workload.clone().or(r.workload);
        r.read_mode = o.read_mode.clone().or(r.read_mode);
        r.nodes = o.nodes.or(r.nodes);
        r.shards = o.shards.unwrap_or(r.shards);
        r.concurrency = o.concurrency.unwrap_or(r.concurrency);
        r.rate = o.rate.unwrap_or(r.rate);
        r.nemesis = o.nemesis.clone().or(r.nemesis);
        r.nemesis_interval = o.nemesis_interval.unwrap_or(r.nemesis_interval);
        r.time_limit = o.time_limit.unwrap_or(r.time_limit);
        r.bugs = o.bugs.iter().cloned().chain(r.bugs).collect();
        r.seed = Some(seed);
        r.name = Some(self.store_name());
        r.store = store.into();
        if let Some(found) = self.stop_when_found() {
            r.stop_on_anomaly = true;
            r.stop_when_found = found;
        }
        Ok((r, flags.check.options()))
    }

    /// A cell that expects `invalid` stops its runs as soon as the check alongside them
    /// has found everything the cell expects (`--stop-on-anomaly`, `--stop-when-found`
    /// for each expected checker and anomaly type: the names returned), when it can find
    /// all of them; `None` otherwise (a valid cell runs its course, and so does one expecting what only
    /// the final check can tell, e.g. `lost-appends` or convergence, and every cell of
    /// `suite --no-online-check`).
    pub fn stop_when_found(&self) -> Option<Vec<String>> {
        let o = &self.options;
        let remote_or_maelstrom = o.target == "maelstrom" || o.extra.iter().any(|a| a == "--hosts");
        if self.expect.verdict != ExpectedVerdict::Invalid
            || remote_or_maelstrom
            || o.extra
                .iter()
                .any(|a| a == "--stop-on-anomaly" || a == "--no-online-check")
        {
            return None;
        }
        let workload = o.workload.as_deref().unwrap_or("register");
        let checks_online = crate::workload::registry::by_name(workload)
            .and_then(|w| w.checkers(&crate::check::CheckOptions::default()).ok())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| crate::run::online::ONLINE_CHECKERS.contains(&c.name().as_str()))
            });
        let wanted: Vec<&String> = self
            .expect
            .checkers
            .iter()
            .chain(&self.expect.anomalies)
            .collect();
        if !checks_online || !wanted.iter().all(|n| crate::run::online::decides_online(n)) {
            return None;
        }
        Some(wanted.into_iter().cloned().collect())
    }

    /// [`Cell::stop_when_found`] as `splitbrain test` flags (none when it runs its course).
    pub fn stop_on_anomaly_flags(&self) -> Vec<String> {
        let Some(found) = self.stop_when_found() else {
            return Vec::new();
        };
        let mut flags = vec!["--stop-on-anomaly".to_string()];
        for name in found {
            flags.push("--stop-when-found".to_string());
            flags.push(name);
        }
        flags
    }

    /// The cell's flags as one shell-like line, for tables.
    pub fn flags_line(&self) -> String {
        self.options.flags().join(" ")
    }
}

/// Every field a cell (or `[defaults]`, or one `matrix` entry) may set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CellDef {
    name: Option<String>,
    target: Option<String>,
    target_spec: Option<String>,
    workload: Option<String>,
    read_mode: Option<String>,
    nodes: Option<usize>,
    shards: Option<u32>,
    concurrency: Option<usize>,
    rate: Option<f64>,
    nemesis: Option<String>,
    nemesis_interval: Option<f64>,
    time_limit: Option<f64>,
    bugs: Option<Vec<String>>,
    extra: Option<Vec<String>>,
    requires: Option<Vec<String>>,
    seeds: Option<Vec<u64>>,
    expect: Option<ExpectedVerdict>,
    anomalies: Option<Vec<String>>,
    checkers: Option<Vec<String>>,
    min_detect: Option<MinDetect>,
    matrix: Option<Spanned<BTreeMap<String, Vec<toml::Value>>>>,
}

impl CellDef {
    /// `self` with every field it leaves unset taken from `under`.
    fn over(self, under: &CellDef) -> CellDef {
        let u = under.clone();
        CellDef {
            name: self.name.or(u.name),
            target: self.target.or(u.target),
            target_spec: self.target_spec.or(u.target_spec),
            workload: self.workload.or(u.workload),
            read_mode: self.read_mode.or(u.read_mode),
            nodes: self.nodes.or(u.nodes),
            shards: self.shards.or(u.shards),
            concurrency: self.concurrency.or(u.concurrency),
            rate: self.rate.or(u.rate),
            nemesis: self.nemesis.or(u.nemesis),
            nemesis_interval: self.nemesis_interval.or(u.nemesis_interval),
            time_limit: self.time_limit.or(u.time_limit),
            bugs: self.bugs.or(u.bugs),
            extra: self.extra.or(u.extra),
            requires: self.requires.or(u.requires),
            seeds: self.seeds.or(u.seeds),
            expect: self.expect.or(u.expect),
            anomalies: self.anomalies.or(u.anomalies),
            checkers: self.checkers.or(u.checkers),
            min_detect: self.min_detect.or(u.min_detect),
            matrix: self.matrix.or(u.matrix),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDef {
    name: Option<String>,
    description: Option<String>,
    seeds: Option<Vec<u64>>,
    #[serde(default)]
    defaults: CellDef,
    #[serde(default, rename = "cell")]
    cells: Vec<Spanned<CellDef>>,
}

/// Parses a suite file. `origin` names it in messages (a path or `built-in quick`);
/// `default_name` is the suite's name when the file gives none.
pub fn parse_suite(text: &str, origin: &str, default_name: &str) -> Result<Suite, SuiteError> {
    let file: FileDef = toml::from_str(text).map_err(|e| SuiteError::Parse {
        origin: origin.to_string(),
        message: e.to_string().trim_end().to_string(),
    })?;
    if file.cells.is_empty() {
        return Err(SuiteError::Empty {
            origin: origin.to_string(),
        });
    }
    if file.defaults.name.is_some() || file.defaults.matrix.is_some() {
        return Err(SuiteError::Parse {
            origin: origin.to_string(),
            message: "[defaults] cannot set `name` or `matrix` (they belong to one cell)".into(),
        });
    }
    let suite_seeds = file.seeds.clone().unwrap_or_else(|| vec![1]);
    let mut cells = Vec::new();
    for spanned in file.cells {
        let line = line_of(text, spanned.span().start);
        let err = |message: String| SuiteError::Cell {
            origin: origin.to_string(),
            line,
            message,
        };
        let def = spanned.into_inner().over(&file.defaults);
        for (suffix, def) in expand_matrix(def, text).map_err(|(l, m)| SuiteError::Cell {
            origin: origin.to_string(),
            line: l,
            message: m,
        })? {
            cells.push(build_cell(def, suffix, &suite_seeds, line).map_err(err)?);
        }
    }
    let mut seen = BTreeSet::new();
    for c in &cells {
        if !seen.insert(c.name.clone()) {
            return Err(SuiteError::Cell {
                origin: origin.to_string(),
                line: c.line,
                message: format!(
                    "two cells are named {:?}; give each a distinct `name`",
                    c.name
                ),
            });
        }
    }
    Ok(Suite {
        name: file.name.unwrap_or_else(|| default_name.to_string()),
        description: file.description,
        origin: origin.to_string(),
        cells,
    })
}

/// The cells one definition stands for: itself, or one per combination of its matrix
/// values, each with a name suffix such as ` [nodes=3,shards=4]`.
fn expand_matrix(mut def: CellDef, text: &str) -> Result<Vec<(String, CellDef)>, (usize, String)> {
    let Some(matrix) = def.matrix.take() else {
        return Ok(vec![(String::new(), def)]);
    };
    let line = line_of(text, matrix.span().start);
    let mut combos: Vec<(Vec<String>, CellDef)> = vec![(Vec::new(), def)];
    for (key, values) in matrix.into_inner() {
        if values.is_empty() {
            return Err((line, format!("matrix key {key:?} has no values")));
        }
        let mut next = Vec::new();
        for (labels, base) in &combos {
            for v in &values {
                let mut one = toml::Table::new();
                one.insert(key.clone(), v.clone());
                let setting: CellDef =
                    toml::Value::Table(one)
                        .try_into()
                        .map_err(|e: toml::de::Error| {
                            (line, format!("matrix {key} = {v}: {}", e.message()))
                        })?;
                if setting.matrix.is_some() || setting.name.is_some() {
                    return Err((line, format!("matrix cannot vary {key:?}")));
                }
                let mut labels = labels.clone();
                labels.push(format!("{key}={}", value_label(v)));
                next.push((labels, setting.over(base)));
            }
        }
        combos = next;
    }
    Ok(combos
        .into_iter()
        .map(|(labels, d)| (format!(" [{}]", labels.join(",")), d))
        .collect())
}

fn value_label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) => a.iter().map(value_label).collect::<Vec<_>>().join("+"),
        other => other.to_string(),
    }
}

fn build_cell(
    def: CellDef,
    suffix: String,
    suite_seeds: &[u64],
    line: usize,
) -> Result<Cell, String> {
    let target = def
        .target
        .ok_or("the cell names no `target` (kv, txn, bayou, ddp, ...)")?;
    let verdict = def
        .expect
        .ok_or("the cell has no `expect` (\"valid\" or \"invalid\")")?;
    let anomalies = def.anomalies.unwrap_or_default();
    let checkers = def.checkers.unwrap_or_default();
    if verdict == ExpectedVerdict::Valid {
        if !anomalies.is_empty() || !checkers.is_empty() {
            return Err("`anomalies` and `checkers` apply only to expect = \"invalid\"".into());
        }
        if def.min_detect.is_some() {
            return Err("`min_detect` applies only to expect = \"invalid\" (a correct system must be valid on every seed)".into());
        }
    }
    let seeds = def.seeds.unwrap_or_else(|| suite_seeds.to_vec());
    if seeds.is_empty() {
        return Err("the cell has no seeds".into());
    }
    let bugs = def.bugs.unwrap_or_default();
    let base = match &def.name {
        Some(n) if !n.trim().is_empty() => n.trim().to_string(),
        Some(_) => return Err("`name` is empty".into()),
        None if bugs.is_empty() => format!("{target}/correct"),
        None => format!("{target}/{}", bugs.join("+")),
    };
    let mut unset = BTreeSet::new();
    let mut expand = |args: Option<Vec<String>>| -> Vec<String> {
        args.unwrap_or_default()
            .iter()
            .map(|a| expand_vars(a, &mut unset))
            .collect()
    };
    let extra = expand(def.extra);
    let requires = expand(def.requires);
    let skip = if !unset.is_empty() {
        let names: Vec<String> = unset.into_iter().collect();
        Some(format!("{} not set", names.join(", ")))
    } else {
        requires
            .iter()
            .find(|p| !std::path::Path::new(p).exists())
            .map(|p| format!("{p} is absent"))
    };
    Ok(Cell {
        name: format!("{base}{suffix}"),
        line,
        options: CellOptions {
            target,
            target_spec: def.target_spec,
            workload: def.workload,
            read_mode: def.read_mode,
            nodes: def.nodes,
            shards: def.shards,
            concurrency: def.concurrency,
            rate: def.rate,
            nemesis: def.nemesis,
            nemesis_interval: def.nemesis_interval,
            time_limit: def.time_limit,
            bugs,
            extra,
        },
        seeds,
        expect: Expectation {
            verdict,
            anomalies,
            checkers,
            min_detect: def.min_detect,
        },
        skip,
    })
}

/// `text` with every `${NAME}` replaced by that environment variable; the names of unset
/// (or empty) ones go into `unset` and expand to nothing.
fn expand_vars(text: &str, unset: &mut BTreeSet<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        out.push_str(&rest[..start]);
        let name = &rest[start + 2..start + 2 + len];
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => out.push_str(&v),
            _ => {
                unset.insert(name.to_string());
            }
        }
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
