//! Command line: node identity, addresses, read mode, timing and deliberate bugs.

use crate::core::CoreBugs;
use clap::{Parser, ValueEnum};
use splitbrain_target_runtime::cli::NodeArgs;

/// How reads are served. See the README for what each one guarantees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReadMode {
    /// Reads go through the Raft log like writes: linearizable, slowest.
    Log,
    /// The leader confirms leadership with a heartbeat quorum, waits until its commit
    /// index is applied, then answers (Raft §6.4): linearizable.
    ReadIndex,
    /// The leader answers locally while its lease holds: linearizable only while clock
    /// drift stays within --max-drift-ms.
    Lease,
    /// Any replica answers from its local state: fast, stale, NOT linearizable.
    Follower,
    /// Any replica serves, linearizably: a follower asks the leader for a read index and
    /// answers once it has applied that index. The leader gives it at once while its lease
    /// holds (linearizable while clock drift stays within --max-drift-ms, as `lease`), else
    /// after a heartbeat quorum (or always so, with --read-index-quorum). The client sends
    /// each read to one replica.
    ReplicaRead,
    /// Served as replica-read; the client sends a second request to another replica
    /// when the first is slower than its own running p95, and cancels the loser.
    Hedged,
    /// Served as replica-read; the client asks every replica at once and takes the
    /// first answer (for comparison: fast, and N requests per read).
    ReadAll,
}

impl ReadMode {
    /// The mode's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            ReadMode::Log => "log",
            ReadMode::ReadIndex => "read-index",
            ReadMode::Lease => "lease",
            ReadMode::Follower => "follower",
            ReadMode::ReplicaRead => "replica-read",
            ReadMode::Hedged => "hedged",
            ReadMode::ReadAll => "read-all",
        }
    }

    /// True when any replica serves reads linearizably (via a read index from the
    /// leader); the modes differ only in how the client spreads its requests.
    pub fn any_replica(self) -> bool {
        matches!(
            self,
            ReadMode::ReplicaRead | ReadMode::Hedged | ReadMode::ReadAll
        )
    }
}

/// Deliberate bugs, for proving that the harness catches them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Bug {
    /// The leader serves reads locally without confirming it still leads (and never
    /// steps down for lack of a quorum). Breaks linearizability of reads. Fault: a
    /// partition isolating the leader; it keeps answering with stale values.
    StaleRead,
    /// The leader acknowledges writes once in its own log, before a quorum has them (and,
    /// in no hurry, replicates them with the next heartbeat). Loses acknowledged writes.
    /// Fault: partition or kill of the leader.
    AckBeforeCommit,
    /// Nothing is fsync'd and writes stay in a user-space buffer for seconds; a node
    /// acknowledges votes and appends it has not persisted. Loses acknowledged writes and
    /// can elect two leaders in one term. Fault: kill -9.
    NoFsync,
    /// Votes are granted without the log up-to-dateness check (Raft §5.4.1): a stale node
    /// can win and overwrite committed entries. Fault: partitions plus kills.
    VoteWithoutLogCheck,
    /// Entries of earlier terms are committed by counting replicas (Raft §5.4.2, figure
    /// 8), and new leaders append no no-op. Fault: repeated leader kills/partitions.
    CommitOldTerm,
    /// Lease reads with no allowance for clock drift: the lease runs a whole election
    /// timeout from when acks arrive, and a clock jumping backwards stretches it. Implies
    /// --read-mode lease unless another mode is given. Fault: clock bumps/strobes on the
    /// leader while a partition isolates it.
    LeaseNoMargin,
}

impl Bug {
    /// The bug's command-line name.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// splitbrain-kv: a sharded key-value store; each shard is a Raft group of 3 replicas.
///
/// Clients speak HTTP/JSON on --client-listen: `GET /health`, `GET /status`,
/// `POST /kv {"f":"read"|"write"|"cas"|"append","key":..,"value":..}`,
/// `GET|POST /admin/clock {"offset_ms":..}`. Nodes speak newline-delimited JSON over TCP on
/// --peer-listen. State lives in --data-dir; a killed node restarts from it.
#[derive(Parser, Debug, Clone)]
#[command(name = "splitbrain-kv", version, verbatim_doc_comment)]
pub struct Args {
    /// `--id`, `--client-listen`, `--peer-listen`, `--peer`, `--data-dir`.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Number of shards (keys map by FNV-1a 64 of the key mod this).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub shards: u32,
    /// How reads are served [default: read-index, or lease with --bug lease-no-margin].
    #[arg(long = "read-mode", value_enum)]
    pub read_mode_arg: Option<ReadMode>,
    /// Turn on a deliberate bug (repeatable).
    #[arg(long = "bug", value_enum)]
    pub bugs: Vec<Bug>,
    /// Minimum election timeout; each timeout is random in [t, 2t).
    #[arg(long, default_value_t = 300)]
    pub election_timeout_ms: i64,
    /// Leader heartbeat interval.
    #[arg(long, default_value_t = 50)]
    pub heartbeat_ms: i64,
    /// How long the server waits for a write to commit before answering "info timeout".
    #[arg(long, default_value_t = 1000)]
    pub request_timeout_ms: u64,
    /// Leader lease length (lease mode; capped at the election timeout).
    #[arg(long, default_value_t = 200)]
    pub lease_ms: i64,
    /// Clock drift the lease allows for (subtracted from it).
    #[arg(long, default_value_t = 50)]
    pub max_drift_ms: i64,
    /// Replica-read modes: give every read index after a heartbeat round, never from the
    /// leader's lease (slower when a follower is slow to ack; no reliance on clocks).
    #[arg(long)]
    pub read_index_quorum: bool,
    /// Seed for election-timeout randomness (default: derived from the id).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl Args {
    /// The read mode in force: as given, else `lease` when the `lease-no-margin` bug is on
    /// (the bug only exists in lease reads), else `read-index`.
    pub fn read_mode(&self) -> ReadMode {
        match self.read_mode_arg {
            Some(mode) => mode,
            None if self.has_bug(Bug::LeaseNoMargin) => ReadMode::Lease,
            None => ReadMode::ReadIndex,
        }
    }

    /// True if `bug` was turned on.
    pub fn has_bug(&self, bug: Bug) -> bool {
        self.bugs.contains(&bug)
    }

    /// The bugs that live in the consensus core.
    pub fn core_bugs(&self) -> CoreBugs {
        CoreBugs {
            vote_without_log_check: self.has_bug(Bug::VoteWithoutLogCheck),
            commit_old_term: self.has_bug(Bug::CommitOldTerm),
            lease_no_margin: self.has_bug(Bug::LeaseNoMargin),
            no_check_quorum: self.has_bug(Bug::StaleRead),
            lazy_replication: self.has_bug(Bug::AckBeforeCommit),
        }
    }

    /// Number of nodes in the cluster.
    pub fn nodes(&self) -> u64 {
        self.node.nodes()
    }
}
