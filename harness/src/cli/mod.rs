//! Command-line definitions and the commands behind them (in the library, so that the
//! binary is a thin `main`).
//!
//! One file per command (`test`, `check`, `bench`, `list`); the check flags that `test`
//! and `check` share are the library's `check_options::CheckFlags`.

mod bench;
mod check;
mod checker_selection;
mod compare;
mod list;
mod proxy_host;
mod report;
mod serve;
mod shrink;
mod shrink_schedule;
mod suite;
mod test;

use anyhow::Context;
use clap::{Parser, Subcommand};
use splitbrain_checkers::Validity;

/// Exit code: the harness or the system under test could not run.
pub const EXIT_COULD_NOT_RUN: u8 = 4;
/// Exit code: usage error.
pub const EXIT_USAGE: u8 = 2;

/// A usage error found after parsing (bad combination, unknown name).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

/// Maps an error to its exit code: usage errors 2, everything else 4.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() {
        EXIT_USAGE
    } else {
        EXIT_COULD_NOT_RUN
    }
}

pub(crate) fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// splitbrain: start a real cluster, drive clients while faults hit it, record every
/// operation, and check the history for linearizability, serializability and convergence.
#[derive(Parser, Debug)]
#[command(name = "splitbrain", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a test against a real cluster and check it.
    Test(Box<crate::run::entry::TestFlags>),
    /// Check a recorded history (a run directory or a history file in any format).
    Check(check::CheckArgs),
    /// List targets, workloads, models, nemeses and bugs.
    List,
    /// Runs side by side: options, verdicts, anomalies, availability, latency,
    /// throughput; with `--baseline`, the regressions (exit 1 when any).
    Compare(compare::CompareArgs),
    /// Browse the run store over HTTP (loopback by default): runs, reports, histories,
    /// node logs.
    Serve(serve::ServeArgs),
    /// Benchmarks: `controller`, `linearizable`, `elle`.
    Bench(bench::BenchArgs),
    /// Run a suite (a verification matrix: built-in `quick`, `full`, or a TOML file) and
    /// judge every cell against its expected verdict.
    Suite(suite::SuiteArgs),
    /// Shrink a failing run: `RUN_DIR` replays it against a live cluster to find the
    /// smallest fault plan and lightest run that still fail the same way, then shrinks
    /// the history; `--history` shrinks an invalid history only, to the smallest
    /// sub-history that still fails the same way (same checker, same anomaly), 1-minimal.
    Shrink(shrink::ShrinkArgs),
    /// Re-render a run directory's report.html from its history, results and test.json.
    Report(report::ReportArgs),
    /// The link proxy a remote run starts on each host (driven by the harness over SSH).
    #[command(hide = true)]
    ProxyHost(proxy_host::ProxyHostArgs),
}

impl Cli {
    /// Commands that only read files and print: for these a closed stdout (`| head -1`)
    /// ends the process quietly, as it does `cat`, instead of panicking in `println!`.
    /// Commands that open sockets keep Rust's ignored SIGPIPE (a peer that hangs up must
    /// be an error on that socket, not the end of the run).
    pub fn is_filter(&self) -> bool {
        matches!(
            self.command,
            Command::Check(_) | Command::List | Command::Compare(_) | Command::Report(_)
        )
    }
}

/// Runs the parsed command and returns the exit code.
pub fn try_main(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Test(a) => test::cmd_test(*a),
        Command::Check(a) => check::cmd_check(a),
        Command::List => {
            print!("{}", list::list_text());
            Ok(0)
        }
        Command::Compare(a) => compare::cmd_compare(a),
        Command::Serve(a) => serve::cmd_serve(a),
        Command::Bench(a) => bench::cmd_bench(a),
        Command::Suite(a) => suite::cmd_suite(a),
        Command::Report(a) => report::cmd_report(a),
        Command::ProxyHost(a) => proxy_host::cmd_proxy_host(a),
        Command::Shrink(a) => match a.run.clone() {
            Some(run) => shrink_schedule::cmd_shrink_schedule(&run, &a),
            None => shrink::cmd_shrink(a),
        },
    }
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

pub(crate) fn verdict_code(v: Validity) -> u8 {
    v.exit_code() as u8
}
