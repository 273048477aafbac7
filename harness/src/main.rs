//! The `splitbrain` command line: `test`, `check`, `shrink`, `list`, `bench`, `compare`, `serve`,
//! `suite`, `report` (one file per command under the library's `cli/`; this file only
//! parses, sets SIGPIPE for filters and maps the result to an exit code, so the binary is a
//! link step in the build).
//!
//! Exit codes (DESIGN.md): 0 valid, 1 invalid, 2 usage error, 3 unknown, 4 the harness or
//! the system under test could not run.

use clap::Parser;
use splitbrain::cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if args.is_filter() {
        // SAFETY: called before any thread starts; restores the default disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli::try_main(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("splitbrain: error: {e:#}");
            ExitCode::from(cli::exit_code_for(&e))
        }
    }
}
