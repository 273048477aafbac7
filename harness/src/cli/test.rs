//! `splitbrain test`: run a test against a real cluster and check it.

use super::{runtime, usage, verdict_code, EXIT_COULD_NOT_RUN};
use crate::check_options::CheckOptions;
use crate::run::controller::RunOutcome;
use crate::run::entry::{resolve, run, TestFlags};
use crate::run::spec::TestSpec;
use splitbrain_reports::summary_table;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(crate) fn cmd_test(a: TestFlags) -> anyhow::Result<u8> {
    let check = a.check.options();
    let spec = resolve(&a.request, &check).map_err(|e| usage(e.0))?;
    let show = !a.no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let outcome = run_blocking(&spec, &check, show, &CancellationToken::new())?;
    let s = &outcome.summary;
    if a.format == "json" {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        println!("{}", summary_table(s));
        println!("report: {}", outcome.run_dir.report().display());
    }
    if s.incomplete.is_some() {
        return Ok(EXIT_COULD_NOT_RUN);
    }
    Ok(verdict_code(s.valid))
}

/// [`run`] on a runtime of its own; Ctrl-C (or `cancel`) stops the clients, heals and
/// tears down.
pub(crate) fn run_blocking(
    spec: &TestSpec,
    check: &CheckOptions,
    show: bool,
    cancel: &CancellationToken,
) -> anyhow::Result<RunOutcome> {
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let c = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nsplitbrain: interrupted; stopping clients, healing, tearing down...");
                c.cancel();
            }
        });
        run(spec, check, cancel.clone(), show).await
    })?;
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(outcome)
}
