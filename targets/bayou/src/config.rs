//! Command line and bugs.

use crate::core::{Bugs, CoreConfig};
use crate::types::ReplicaId;
use clap::{Parser, ValueEnum};
use splitbrain_target_runtime::cli::NodeArgs;

/// A deliberate bug (see the README's bug table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Bug {
    /// Writes are applied in arrival order and never rolled back.
    NoRollback,
    /// Tentative writes are not persisted; acknowledged before any fsync.
    LoseTentative,
    /// A restarted primary re-assigns CSNs to already committed writes, in reverse.
    ReorderCommit,
    /// Anti-entropy sends no commit knowledge for writes the peer already holds.
    StaleCommitSync,
    /// The server ignores session vectors.
    StaleSession,
}

impl Bug {
    /// The bug's command-line name.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// splitbrain-bayou: a Bayou replica group. Every replica accepts writes (sets, counters,
/// meeting-room bookings) at any time; anti-entropy spreads them; the primary commits them
/// in a final order; tentative writes are rolled back and replayed as that order is learnt.
///
/// Start 3 replicas by hand (one shell each):
///   splitbrain-bayou --id 1 --client-listen 127.0.0.1:8101 --peer-listen 127.0.0.1:9101 \
///     --peer 2=127.0.0.1:9102 --peer 3=127.0.0.1:9103 --data-dir /tmp/bayou/n1
///   (likewise --id 2 / 3 with their own ports, peers and data dir)
/// then: curl -s localhost:8102/write -d '{"key":"s","op":{"type":"add","element":5}}'
///       curl -s localhost:8103/read -d '{"key":"s"}'
///
/// Client API (HTTP/JSON on --client-listen): GET /health, GET /status, POST /write,
/// POST /read, GET|POST /admin/clock.
#[derive(Parser, Debug, Clone)]
#[command(name = "splitbrain-bayou", version, verbatim_doc_comment)]
pub struct Args {
    /// `--id`, `--client-listen`, `--peer-listen`, `--peer`, `--data-dir`.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Turn on a deliberate bug (repeatable).
    #[arg(long = "bug", value_enum)]
    pub bugs: Vec<Bug>,
    /// The replica that commits writes (assigns CSNs).
    #[arg(long, default_value_t = 1)]
    pub primary: ReplicaId,
    /// Period of anti-entropy rounds.
    #[arg(long, default_value_t = 100)]
    pub anti_entropy_ms: i64,
    /// Longest wait for a session's vectors to be covered before `session-behind`.
    #[arg(long, default_value_t = 300)]
    pub session_wait_ms: i64,
    /// Fold the committed prefix into a checkpoint every N commits (the newest N committed
    /// writes stay in the log).
    #[arg(long, default_value_t = 500)]
    pub checkpoint_every: u64,
    /// Seed (accepted for CLI symmetry with other targets; peers are picked round-robin).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl Args {
    /// Number of replicas in the group.
    pub fn nodes(&self) -> u64 {
        self.node.nodes()
    }

    /// True if `bug` was turned on.
    pub fn has_bug(&self, bug: Bug) -> bool {
        self.bugs.contains(&bug)
    }

    /// Names of the bugs turned on.
    pub fn bug_names(&self) -> Vec<String> {
        self.bugs.iter().map(|b| b.name()).collect()
    }

    /// The core's settings.
    pub fn core_config(&self) -> CoreConfig {
        let mut cfg = CoreConfig::new(self.node.id, self.nodes());
        cfg.primary = self.primary;
        cfg.bugs = Bugs {
            no_rollback: self.has_bug(Bug::NoRollback),
            lose_tentative: self.has_bug(Bug::LoseTentative),
            reorder_commit: self.has_bug(Bug::ReorderCommit),
            stale_commit_sync: self.has_bug(Bug::StaleCommitSync),
            stale_session: self.has_bug(Bug::StaleSession),
        };
        cfg.anti_entropy_ms = self.anti_entropy_ms.max(1);
        cfg.session_wait_ms = self.session_wait_ms.max(0);
        cfg.checkpoint_every = self.checkpoint_every.max(1);
        cfg
    }

    /// Checks the ids: `--id`, `--primary` and every `--peer` id in `1..=N`, distinct.
    pub fn validate(&self) -> Result<(), String> {
        self.node.validate()?;
        let nodes = self.nodes();
        if self.primary == 0 || self.primary > nodes {
            return Err(format!("--primary must be in 1..={nodes}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_command_line() {
        let args = Args::try_parse_from([
            "splitbrain-bayou",
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
            "--primary",
            "3",
            "--bug",
            "stale-commit-sync",
            "--bug",
            "no-rollback",
            "--anti-entropy-ms",
            "50",
        ])
        .unwrap();
        assert!(args.validate().is_ok());
        let cfg = args.core_config();
        assert_eq!((cfg.id, cfg.nodes, cfg.primary), (2, 3, 3));
        assert_eq!(cfg.anti_entropy_ms, 50);
        assert!(cfg.bugs.stale_commit_sync && cfg.bugs.no_rollback && !cfg.bugs.stale_session);
        assert_eq!(args.bug_names(), vec!["stale-commit-sync", "no-rollback"]);
        let mut bad = args.clone();
        bad.primary = 4;
        assert!(bad.validate().is_err());
    }
}
