//! `--target exec`: any server, in any language, that follows the HTTP contract of
//! `docs/http-contract.md`, described by a TOML spec file (`--target-spec FILE.toml`).
//!
//! The spec says how to start node `{id}` (a command template with placeholders), which
//! workloads the server performs, and how to pass it a read mode and bugs. The harness
//! starts, kills, pauses and partitions such nodes exactly as its own: they are ordinary
//! [`crate::run::cluster::Cluster`] processes, and they dial each other at the addresses of
//! `{peers}`, which are the proxy mesh's, so a partition cuts them. The harness speaks to
//! them with the bundled targets' own clients — the KV store's for `POST /kv` workloads,
//! the 2PC database's for `POST /txn` ones — so an answer means the same whoever gave it.

use super::{
    every_node_ready, kv, poll_until, post_clock_offset, request_timeout_ms, txn, BoxFuture,
    BugInfo, Client, ClockSource, Profile, Target, TargetOptions,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// Why a target spec file cannot be used. Every variant names the file; those about one
/// value name its line too.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read the target spec {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, or not a spec's shape (toml's message names the line and column).
    #[error("target spec {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What was wrong and where.
        message: String,
    },
    /// Well-formed, but a value makes no sense.
    #[error("target spec {path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line of the offending value.
        line: usize,
        /// What was expected.
        message: String,
    },
}

/// The spec file as written. Unknown keys are refused, so a misspelt one is an error
/// rather than silently ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    description: Option<String>,
    command: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    each_peer: Vec<Spanned<String>>,
    #[serde(default)]
    bug_args: Vec<Spanned<String>>,
    #[serde(default)]
    read_mode_args: Vec<Spanned<String>>,
    workloads: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    read_modes: Vec<Spanned<String>>,
    bugs: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    status: bool,
    clock: Option<Spanned<ClockField>>,
}

/// `clock` as written: `true` or `"endpoint"` (the server serves `POST /admin/clock`),
/// `"faketime"` (the harness preloads libfaketime into each node and moves its wall
/// clock through an offset file), `false` (its clock cannot be moved).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ClockField {
    Flag(bool),
    Named(String),
}

/// Placeholders every template may use (see [`ExecTarget::node_args`]).
const NODE_PLACEHOLDERS: &[&str] = &[
    "id",
    "name",
    "nodes",
    "client_addr",
    "peer_addr",
    "peers",
    "data_dir",
    "shards",
    "request_timeout_ms",
    "spec_dir",
];
/// Further placeholders of `each_peer`, one expansion per other node.
const PEER_PLACEHOLDERS: &[&str] = &["peer_id", "peer_name", "dial_addr"];

/// Which endpoint performs a workload's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    /// `POST /kv`, as `targets/kv`.
    Kv,
    /// `POST /txn`, as `targets/txn`.
    Txn,
}

/// The endpoint a workload needs: that of the bundled target whose client performs it,
/// so the two stay in step when a bundled client learns a workload.
fn endpoint_of(workload: &str) -> Option<Endpoint> {
    if kv::KvTarget.workloads().contains(&workload) {
        Some(Endpoint::Kv)
    } else if txn::TxnTarget.workloads().contains(&workload) {
        Some(Endpoint::Txn)
    } else {
        None
    }
}

/// A server described by a target spec file.
#[derive(Debug, Clone)]
pub struct ExecTarget {
    path: PathBuf,
    spec_dir: PathBuf,
    description: String,
    program: String,
    args: Vec<String>,
    each_peer: Vec<String>,
    bug_args: Vec<String>,
    read_mode_args: Vec<String>,
    workloads: Vec<String>,
    read_modes: Vec<String>,
    bugs: Vec<(String, String)>,
    status: bool,
    clock: ClockSource,
}

impl ExecTarget {
    /// Reads and validates the spec file at `path`.
    pub fn from_file(path: &Path) -> Result<ExecTarget, SpecError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            path: shown.clone(),
            source,
        })?;
        // Relative programs and `{spec_dir}` resolve against the file's directory, so a
        // spec works from any working directory.
        let abs = std::path::absolute(path).map_err(|source| SpecError::Read {
            path: shown.clone(),
            source,
        })?;
        let spec_dir = abs.parent().map(Path::to_path_buf).unwrap_or_default();
        ExecTarget::parse(&text, &shown, abs, spec_dir)
    }

    /// Parses a spec's `text`; `shown` names it in errors.
    fn parse(
        text: &str,
        shown: &str,
        path: PathBuf,
        spec_dir: PathBuf,
    ) -> Result<ExecTarget, SpecError> {
        let file: SpecFile = toml::from_str(text).map_err(|e| SpecError::Parse {
            path: shown.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |span: std::ops::Range<usize>, message: String| SpecError::Invalid {
            path: shown.to_string(),
            line: crate::text::line_of(text, span.start),
            message,
        };
        let clock = match file.clock.as_ref().map(|c| (c.span(), c.get_ref())) {
            None | Some((_, ClockField::Flag(false))) => ClockSource::Unsupported,
            Some((_, ClockField::Flag(true))) => ClockSource::Endpoint,
            Some((_, ClockField::Named(n))) if n == "endpoint" => ClockSource::Endpoint,
            Some((_, ClockField::Named(n))) if n == "faketime" => ClockSource::Faketime,
            Some((span, ClockField::Named(n))) => {
                return Err(invalid(
                    span,
                    format!(
                        "`clock = {n:?}`: expected true or \"endpoint\" (POST /admin/clock), \"faketime\" (libfaketime preloaded into each node) or false"
                    ),
                ))
            }
        };
        let command_span = file.command.span();
        let command = file.command.into_inner();
        let Some((program, args)) = command.split_first() else {
            return Err(invalid(
                command_span,
                "`command` is empty; expected the program and its arguments, e.g. \
                 [\"python3\", \"{spec_dir}/server.py\", \"--listen\", \"{client_addr}\"]"
                    .into(),
            ));
        };
        let extra = |names: &'static [&'static str]| -> Vec<&'static str> {
            NODE_PLACEHOLDERS.iter().chain(names).copied().collect()
        };
        let templates = [
            ("command", &command, extra(&[])),
            ("each_peer", &file.each_peer, extra(PEER_PLACEHOLDERS)),
            ("bug_args", &file.bug_args, extra(&["bug"])),
            (
                "read_mode_args",
                &file.read_mode_args,
                extra(&["read_mode"]),
            ),
        ];
        for (key, words, allowed) in &templates {
            for word in words.iter() {
                if let Some(bad) = placeholders(word.get_ref()).find(|p| !allowed.contains(p)) {
                    return Err(invalid(
                        word.span(),
                        format!(
                            "unknown placeholder {{{bad}}} in `{key}`; it may use {}",
                            allowed
                                .iter()
                                .map(|p| format!("{{{p}}}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
            }
        }
        let workloads_span = file.workloads.span();
        let mut workloads = Vec::new();
        let mut endpoints = Vec::new();
        for w in file.workloads.into_inner() {
            let Some(endpoint) = endpoint_of(w.get_ref()) else {
                return Err(invalid(
                    w.span(),
                    format!(
                        "unknown workload {:?}; an exec target can serve {} (POST /kv) and {} (POST /txn)",
                        w.get_ref(),
                        kv::KvTarget.workloads().join(", "),
                        txn::TxnTarget.workloads().join(", ")
                    ),
                ));
            };
            endpoints.push(endpoint);
            workloads.push(w.into_inner());
        }
        if workloads.is_empty() {
            return Err(invalid(
                workloads_span,
                "`workloads` is empty; expected the workloads the server performs, e.g. [\"register\"]"
                    .into(),
            ));
        }
        let bugs = file.bugs.filter(|b| !b.get_ref().is_empty());
        if let Some(bugs) = bugs.as_ref().filter(|_| file.bug_args.is_empty()) {
            return Err(invalid(
                bugs.span(),
                "`bugs` are listed but there is no `bug_args` template to pass one to a node, \
                 e.g. bug_args = [\"--bug\", \"{bug}\"]"
                    .into(),
            ));
        }
        if let Some(first) = file.read_modes.first() {
            if file.read_mode_args.is_empty() {
                return Err(invalid(
                    first.span(),
                    "`read_modes` are listed but there is no `read_mode_args` template to pass \
                     one to a node, e.g. read_mode_args = [\"--read-mode\", \"{read_mode}\"]"
                        .into(),
                ));
            }
        }
        let program = resolve_program(program.get_ref(), &spec_dir);
        let strings = |v: &[Spanned<String>]| v.iter().map(|s| s.get_ref().clone()).collect();
        Ok(ExecTarget {
            description: file
                .description
                .unwrap_or_else(|| format!("the server described by {}", path.display())),
            program,
            args: strings(args),
            each_peer: strings(&file.each_peer),
            bug_args: strings(&file.bug_args),
            read_mode_args: strings(&file.read_mode_args),
            workloads,
            read_modes: strings(&file.read_modes),
            bugs: bugs
                .map(|b| b.into_inner().into_iter().collect())
                .unwrap_or_default(),
            status: file.status,
            clock,
            path,
            spec_dir,
        })
    }

    /// The spec file it was read from (absolute).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the spec says how to move its clock (`clock = true`, `"endpoint"` or
    /// `"faketime"`); without that the clock nemesis cannot run.
    pub fn serves_clock(&self) -> bool {
        self.clock != ClockSource::Unsupported
    }

    /// Expands `template` with `vars` (name, value) into `out`.
    fn expand_into(out: &mut Vec<String>, template: &[String], vars: &[(&str, String)]) {
        out.extend(template.iter().map(|t| expand(t, vars)));
    }
}

/// The program of `command`: with `{spec_dir}` filled in; a relative path containing `/`
/// taken from the spec's directory; a bare name left for the usual search (beside
/// splitbrain, then PATH).
fn resolve_program(program: &str, spec_dir: &Path) -> String {
    let program = expand(program, &[("spec_dir", spec_dir.display().to_string())]);
    if program.contains('/') && Path::new(&program).is_relative() {
        spec_dir.join(&program).display().to_string()
    } else {
        program
    }
}

/// The names of the `{name}` placeholders in `word` (lower-case letters and `_` between
/// braces; other braces are literal text, so JSON in an argument passes through).
fn placeholders(word: &str) -> impl Iterator<Item = &str> {
    word.split('{').skip(1).filter_map(|rest| {
        let name = &rest[..rest.find('}')?];
        (!name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .then_some(name)
    })
}

/// `word` with every `{name}` of `vars` replaced by its value.
fn expand(word: &str, vars: &[(&str, String)]) -> String {
    let mut out = word.to_string();
    for (name, value) in vars {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

impl Target for ExecTarget {
    fn profile(&self) -> Profile<'_> {
        Profile {
            bugs: self
                .bugs
                .iter()
                .map(|(name, description)| BugInfo { name, description })
                .collect(),
            read_modes: self.read_modes.iter().map(String::as_str).collect(),
            workloads: self.workloads.iter().map(String::as_str).collect(),
            ..Profile::new("exec", &self.description, &self.program)
        }
    }

    fn clock_source(&self) -> ClockSource {
        self.clock
    }

    /// The spec's `command` (without the program), then `each_peer` once per other node,
    /// `read_mode_args` when a read mode is chosen and `bug_args` once per bug, each with
    /// its placeholders filled in.
    fn node_args(
        &self,
        i: usize,
        client_addr: SocketAddr,
        peer_listen: SocketAddr,
        peer_addrs: &[SocketAddr],
        data_dir: &Path,
        opts: &TargetOptions,
    ) -> Vec<String> {
        let others: Vec<(usize, SocketAddr)> = peer_addrs
            .iter()
            .copied()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .collect();
        let peers = others
            .iter()
            .map(|(j, a)| format!("{}={a}", j + 1))
            .collect::<Vec<_>>()
            .join(",");
        let vars = vec![
            ("id", (i + 1).to_string()),
            ("name", format!("n{}", i + 1)),
            ("nodes", peer_addrs.len().to_string()),
            ("client_addr", client_addr.to_string()),
            ("peer_addr", peer_listen.to_string()),
            ("peers", peers),
            ("data_dir", data_dir.display().to_string()),
            ("shards", opts.shards.to_string()),
            (
                "request_timeout_ms",
                request_timeout_ms(opts.op_timeout, 100).to_string(),
            ),
            ("spec_dir", self.spec_dir.display().to_string()),
        ];
        let mut out = Vec::new();
        Self::expand_into(&mut out, &self.args, &vars);
        for (j, addr) in others {
            let mut peer_vars = vars.clone();
            peer_vars.extend([
                ("peer_id", (j + 1).to_string()),
                ("peer_name", format!("n{}", j + 1)),
                ("dial_addr", addr.to_string()),
            ]);
            Self::expand_into(&mut out, &self.each_peer, &peer_vars);
        }
        if let Some(mode) = &opts.read_mode {
            let mut mode_vars = vars.clone();
            mode_vars.push(("read_mode", mode.clone()));
            Self::expand_into(&mut out, &self.read_mode_args, &mode_vars);
        }
        for bug in &opts.bugs {
            let mut bug_vars = vars.clone();
            bug_vars.push(("bug", bug.clone()));
            Self::expand_into(&mut out, &self.bug_args, &bug_vars);
        }
        out
    }

    /// With `status = true`, until some node reports a leader for every shard (as the
    /// bundled KV store); otherwise until every node answers `GET /health`.
    fn wait_formed<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        bound: Duration,
    ) -> BoxFuture<'a, Result<(), ()>> {
        if self.status {
            Box::pin(poll_until(bound, move || kv::all_shards_led(http, addrs)))
        } else {
            every_node_ready(self, http, addrs, bound)
        }
    }

    /// The nodes whose `GET /status` names them leader of a shard; none without `status`.
    fn leaders<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        if self.status {
            Box::pin(kv::status_leaders(http, addrs))
        } else {
            Box::pin(async { Vec::new() })
        }
    }

    fn set_clock_offset<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addr: SocketAddr,
        offset_ms: i64,
    ) -> BoxFuture<'a, Result<(), String>> {
        let path = self.path.display().to_string();
        Box::pin(async move {
            match self.clock {
                ClockSource::Endpoint => post_clock_offset(http, addr, offset_ms).await,
                ClockSource::Faketime => Err(format!(
                    "the target spec {path} moves clocks through libfaketime, not POST /admin/clock"
                )),
                ClockSource::Unsupported => Err(format!(
                    "the target spec {path} declares no POST /admin/clock (clock = false)"
                )),
            }
        })
    }

    /// The KV client for `register` and `append`, the transaction client for the rest.
    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        match endpoint_of(&opts.workload) {
            Some(Endpoint::Txn) => txn::txn_client(addrs, home, opts),
            // Validation admits only known workloads; the KV client answers any other op
            // with the node's own refusal.
            _ => kv::kv_client(addrs, home, opts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ExecTarget, SpecError> {
        ExecTarget::parse(
            text,
            "t.toml",
            PathBuf::from("/specs/t.toml"),
            PathBuf::from("/specs"),
        )
    }

    const GOOD: &str = r#"
description = "a test server"
command = ["./srv", "--id", "{id}", "--listen", "{client_addr}", "--peer-listen", "{peer_addr}",
           "--peers", "{peers}", "--dir", "{data_dir}", "--timeout", "{request_timeout_ms}",
           "--json", "{\"a\": 1}"]
each_peer = ["--peer", "{peer_id}={dial_addr}"]
bug_args = ["--bug", "{bug}"]
read_mode_args = ["--read-mode={read_mode}"]
workloads = ["register", "list-append"]
read_modes = ["safe", "fast"]
status = true

[bugs]
stale-read = "followers answer reads from a cache (fault: none needed)"
"#;

    fn opts(read_mode: Option<&str>, bugs: &[&str]) -> TargetOptions {
        TargetOptions {
            shards: 1,
            read_mode: read_mode.map(str::to_string),
            bugs: bugs.iter().map(|b| b.to_string()).collect(),
            op_timeout: Duration::from_millis(1000),
            hedge_delay: Duration::from_millis(2),
            workload: "register".into(),
            wait: None,
            read_from: None,
            replication: None,
            transport: None,
        }
    }

    #[test]
    fn a_spec_fills_every_placeholder_per_node() {
        let t = parse(GOOD).unwrap();
        assert_eq!(t.binary_name(), "/specs/./srv");
        assert_eq!(t.workloads(), vec!["register", "list-append"]);
        assert_eq!(t.read_modes(), vec!["safe", "fast"]);
        assert_eq!(t.bugs()[0].name, "stale-read");
        let a = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let args = t.node_args(
            1,
            a(7002),
            a(8002),
            &[a(9021), a(8002), a(9023)],
            Path::new("/run/n2/data"),
            &opts(Some("fast"), &["stale-read"]),
        );
        assert_eq!(
            args,
            [
                "--id",
                "2",
                "--listen",
                "127.0.0.1:7002",
                "--peer-listen",
                "127.0.0.1:8002",
                "--peers",
                "1=127.0.0.1:9021,3=127.0.0.1:9023",
                "--dir",
                "/run/n2/data",
                "--timeout",
                "900",
                "--json",
                "{\"a\": 1}",
                "--peer",
                "1=127.0.0.1:9021",
                "--peer",
                "3=127.0.0.1:9023",
                "--read-mode=fast",
                "--bug",
                "stale-read",
            ]
        );
    }

    #[test]
    fn workloads_go_to_the_endpoint_of_the_bundled_client_that_performs_them() {
        assert_eq!(endpoint_of("register"), Some(Endpoint::Kv));
        assert_eq!(endpoint_of("append"), Some(Endpoint::Kv));
        assert_eq!(endpoint_of("list-append"), Some(Endpoint::Txn));
        assert_eq!(endpoint_of("bank"), Some(Endpoint::Txn));
        assert_eq!(endpoint_of("set"), None);
    }

    #[test]
    fn programs_resolve_against_the_spec_directory_unless_bare_or_absolute() {
        let dir = Path::new("/specs");
        assert_eq!(resolve_program("python3", dir), "python3");
        assert_eq!(resolve_program("/usr/bin/srv", dir), "/usr/bin/srv");
        assert_eq!(resolve_program("bin/srv", dir), "/specs/bin/srv");
        assert_eq!(resolve_program("{spec_dir}/srv", dir), "/specs/srv");
    }

    /// The message of a spec that must be refused, with the line it names.
    fn refused(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bad_specs_name_the_file_the_line_and_what_was_expected() {
        let e = refused("command = [\"srv\"]\nworkloads = [\"register\",\n  \"set\"]\n");
        assert!(
            e.starts_with("target spec t.toml:3: unknown workload \"set\""),
            "{e}"
        );
        assert!(e.contains("register, append (POST /kv)"), "{e}");
        let e = refused("workloads = [\"register\"]\ncommand = [\"srv\", \"{port}\"]\n");
        assert!(
            e.starts_with("target spec t.toml:2: unknown placeholder {port}"),
            "{e}"
        );
        assert!(e.contains("{client_addr}"), "{e}");
        let e = refused("workloads = [\"register\"]\ncommand = []\n");
        assert!(
            e.starts_with("target spec t.toml:2: `command` is empty"),
            "{e}"
        );
        let e = refused("workloads = [\"register\"]\n");
        assert!(
            e.contains("t.toml") && e.contains("missing field `command`"),
            "{e}"
        );
        let e = refused("command = [\"srv\"]\nworkloads = [\"register\"]\nstatus = \"yes\"\n");
        assert!(e.contains("line 3"), "{e}");
        let e = refused("command = [\"srv\"]\nworkloads = [\"register\"]\nwokloads = []\n");
        assert!(
            e.contains("line 3") && e.contains("unknown field `wokloads`"),
            "{e}"
        );
        let e = refused("command = [\"srv\"]\nworkloads = [\"register\"]\n[bugs]\nx = \"y\"\n");
        assert!(e.contains("no `bug_args`"), "{e}");
        let e = refused("command = [\"srv\"]\nworkloads = [\"register\"]\nread_modes = [\"a\"]\n");
        assert!(
            e.starts_with("target spec t.toml:3:") && e.contains("read_mode_args"),
            "{e}"
        );
        let e = refused(
            "command = [\"srv\"]\nworkloads = [\"register\"]\nbug_args = [\"--bug={bugs}\"]\n",
        );
        assert!(
            e.contains("unknown placeholder {bugs} in `bug_args`"),
            "{e}"
        );
    }

    #[test]
    fn clock_says_how_the_clock_moves_and_anything_else_is_refused_with_its_line() {
        let with = |clock: &str| {
            parse(&format!(
                "command = [\"srv\"]\nworkloads = [\"register\"]\n{clock}\n"
            ))
        };
        let source = |clock: &str| with(clock).unwrap().clock_source();
        assert_eq!(source(""), ClockSource::Unsupported);
        assert_eq!(source("clock = false"), ClockSource::Unsupported);
        assert_eq!(source("clock = true"), ClockSource::Endpoint);
        assert_eq!(source("clock = \"endpoint\""), ClockSource::Endpoint);
        assert_eq!(source("clock = \"faketime\""), ClockSource::Faketime);
        assert!(with("clock = \"faketime\"").unwrap().serves_clock());
        assert!(!with("clock = false").unwrap().serves_clock());
        let e = match with("clock = \"sundial\"") {
            Ok(_) => panic!("clock = \"sundial\" accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.starts_with("target spec t.toml:3:") && e.contains("\"faketime\""),
            "{e}"
        );
    }

    #[test]
    fn placeholders_are_lower_case_words_in_braces_and_other_braces_are_text() {
        let names: Vec<&str> = placeholders("{a_b}x{C}{}{\"k\":1}{id").collect();
        assert_eq!(names, ["a_b"]);
        assert_eq!(
            expand("{id}/{id}-{x}", &[("id", "3".into())]),
            "3/3-{x}".to_string()
        );
    }
}
