//! The node thread: the runtime's driver ([`splitbrain_target_runtime::node`]) over a
//! [`Core`] and its [`Wal`].
//!
//! Each turn (every few milliseconds, or when events arrive): feed the core every queued
//! event and a tick; take its outputs; append the log records and fsync once if any was
//! forced; only then send its messages and answer clients. One fsync per turn batches
//! many txns.

use crate::core::{Core, Output, Status};
use crate::peer::PeerNet;
use crate::storage::{StorageError, Wal};
use crate::types::{Message, Op, TxnReply};
use splitbrain_target_runtime::node::{self as driver, NodeCore, NodeSpec, Outgoing};
use splitbrain_target_runtime::turns::TurnLimits;
use splitbrain_target_runtime::OffsetClock;
use std::time::Duration;

/// A turn: up to 5 ms idle (the timers' precision), at most 1024 events.
const SPEC: NodeSpec = NodeSpec {
    program: "splitbrain-txn",
    thread: "txn-core",
    limits: TurnLimits {
        tick: Duration::from_millis(5),
        max_batch: 1024,
    },
};

/// The node's core and its WAL, driven by the runtime.
pub struct TxnNode {
    core: Core,
    wal: Wal,
}

/// Input of the node thread.
pub type Event = driver::Event<TxnNode>;
/// How other tasks reach the node thread.
pub type NodeHandle = driver::NodeHandle<TxnNode>;

/// Starts the node thread over an already replayed core and open WAL.
pub fn spawn(
    core: Core,
    wal: Wal,
    clock: OffsetClock,
    net: PeerNet,
) -> Result<NodeHandle, std::io::Error> {
    driver::spawn(TxnNode { core, wal }, clock, net, SPEC)
}

impl NodeCore for TxnNode {
    type Message = Message;
    type Request = Vec<Op>;
    type Reply = TxnReply;
    type Status = Status;
    type Effect = Output;
    type Error = StorageError;

    fn receive(&mut self, from: u64, msg: Message, now_ms: i64) {
        self.core.receive(from, msg, now_ms);
    }

    fn client(&mut self, req: u64, ops: Vec<Op>, now_ms: i64) {
        self.core.client_txn(req, ops, now_ms);
    }

    fn tick(&mut self, now_ms: i64) {
        self.core.tick(now_ms);
    }

    fn status(&self) -> Status {
        self.core.status()
    }

    fn take_effects(&mut self) -> Vec<Output> {
        self.core.take_outputs()
    }

    fn persist(&mut self, outputs: &[Output]) -> Result<(), StorageError> {
        for out in outputs {
            if let Output::Log { record, force } = out {
                self.wal.append(record, *force)?;
            }
        }
        self.wal.sync()
    }

    /// The `no-prepare-fsync` bug's buffer is written out about once a second.
    fn after_turn(&mut self) -> Result<(), StorageError> {
        self.wal.maybe_flush()
    }

    fn outgoing(out: Output) -> Outgoing<Message, TxnReply> {
        match out {
            Output::Log { .. } => Outgoing::Nothing,
            Output::Send { to, msg } => Outgoing::Send { to, msg },
            Output::Reply { req, reply } => Outgoing::Reply { req, reply },
        }
    }
}
