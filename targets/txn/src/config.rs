//! Command line: flags, isolation modes and bugs.

use crate::core::{Bugs, CoreConfig, Isolation};
use clap::{Parser, ValueEnum};
use splitbrain_target_runtime::cli::NodeArgs;

/// Isolation level on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// Strict two-phase locking (reads take shared locks held to commit).
    Serializable,
    /// Reads take no locks and see the last committed value.
    ReadCommitted,
}

/// A deliberate bug (see the README's bug table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Bug {
    /// Reads ignore exclusive locks and see other txns' uncommitted writes.
    DirtyRead,
    /// A participant releases its locks when it votes yes, before the decision.
    EarlyLockRelease,
    /// A prepared participant that hears no decision aborts on its own.
    UnilateralAbort,
    /// Prepare and participant commit records are not fsync'd (buffered ~1 s).
    NoPrepareFsync,
}

impl Bug {
    /// The bug's command-line name.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// splitbrain-txn: a transactional key-value database; each key has one owner node;
/// strict two-phase locking at the owners, two-phase commit (presumed abort) across them.
///
/// Start 3 nodes by hand (one shell each):
///   splitbrain-txn --id 1 --client-listen 127.0.0.1:8001 --peer-listen 127.0.0.1:9001 \
///     --peer 2=127.0.0.1:9002 --peer 3=127.0.0.1:9003 --data-dir /tmp/txn/n1
///   (likewise --id 2 / 3 with their own ports, peers and data dir)
/// then: curl -s localhost:8001/txn -d '{"ops":[["append",1,5],["r",2,null]]}'
///
/// Client API (HTTP/JSON on --client-listen): GET /health, GET /status,
/// POST /txn {"ops":[[f,key,value],..]} with f in r|w|append|add, GET|POST /admin/clock.
#[derive(Parser, Debug, Clone)]
#[command(name = "splitbrain-txn", version, verbatim_doc_comment)]
pub struct Args {
    /// `--id`, `--client-listen`, `--peer-listen`, `--peer`, `--data-dir`.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Isolation level.
    #[arg(long, value_enum, default_value = "serializable")]
    pub isolation: IsolationArg,
    /// Turn on a deliberate bug (repeatable).
    #[arg(long = "bug", value_enum)]
    pub bugs: Vec<Bug>,
    /// A txn with no commit decision after this long is aborted ("timeout"/"unavailable").
    #[arg(long, default_value_t = 1500)]
    pub request_timeout_ms: i64,
    /// Longest wait for a lock before the op (and its txn) is aborted.
    #[arg(long, default_value_t = 300)]
    pub lock_wait_ms: i64,
    /// A prepared participant with no decision asks its coordinator after this long.
    #[arg(long, default_value_t = 1000)]
    pub in_doubt_timeout_ms: i64,
    /// Seed (accepted for CLI symmetry with other targets; the protocol uses no randomness).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl Args {
    /// Number of nodes in the cluster.
    pub fn nodes(&self) -> u64 {
        self.node.nodes()
    }

    /// True if `bug` was turned on.
    pub fn has_bug(&self, bug: Bug) -> bool {
        self.bugs.contains(&bug)
    }

    /// The isolation level in force.
    pub fn isolation(&self) -> Isolation {
        match self.isolation {
            IsolationArg::Serializable => Isolation::Serializable,
            IsolationArg::ReadCommitted => Isolation::ReadCommitted,
        }
    }

    /// Names of the bugs turned on.
    pub fn bug_names(&self) -> Vec<String> {
        self.bugs.iter().map(|b| b.name()).collect()
    }

    /// The core's settings.
    pub fn core_config(&self) -> CoreConfig {
        let mut cfg = CoreConfig::new(self.node.id, self.nodes());
        cfg.isolation = self.isolation();
        cfg.bugs = Bugs {
            dirty_read: self.has_bug(Bug::DirtyRead),
            early_lock_release: self.has_bug(Bug::EarlyLockRelease),
            unilateral_abort: self.has_bug(Bug::UnilateralAbort),
            no_prepare_fsync: self.has_bug(Bug::NoPrepareFsync),
        };
        cfg.request_timeout_ms = self.request_timeout_ms.max(1);
        cfg.lock_wait_ms = self.lock_wait_ms.max(0);
        cfg.in_doubt_timeout_ms = self.in_doubt_timeout_ms.max(1);
        cfg
    }

    /// Checks the ids: `--id` and every `--peer` id in `1..=N`, distinct.
    pub fn validate(&self) -> Result<(), String> {
        self.node.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_command_line() {
        let args = Args::try_parse_from([
            "splitbrain-txn",
            "--id",
            "2",
            "--client-listen",
            "127.0.0.1:1",
            "--peer-listen",
            "127.0.0.1:2",
            "--peer",
            "1=127.0.0.1:3",
            "--peer",
            "3=127.0.0.1:4",
            "--data-dir",
            "/tmp/x",
            "--isolation",
            "read-committed",
            "--bug",
            "dirty-read",
            "--bug",
            "no-prepare-fsync",
        ])
        .unwrap();
        assert!(args.validate().is_ok());
        let cfg = args.core_config();
        assert_eq!((cfg.id, cfg.nodes), (2, 3));
        assert_eq!(cfg.isolation, Isolation::ReadCommitted);
        assert!(cfg.bugs.dirty_read && cfg.bugs.no_prepare_fsync && !cfg.bugs.unilateral_abort);
        assert_eq!(args.bug_names(), vec!["dirty-read", "no-prepare-fsync"]);
    }
}
