//! The node thread: the runtime's driver ([`splitbrain_target_runtime::node`]) over a
//! [`Core`] and its [`Store`].
//!
//! Each turn (every few milliseconds, or when events arrive): feed the core every queued
//! event and a tick; take its effects; append the log records (and install checkpoints)
//! and fsync once; only then send its messages and answer clients. One fsync per turn
//! batches many writes.

use crate::core::{Core, Effect, Reply, Request, Status};
use crate::peer::PeerNet;
use crate::storage::{StorageError, Store};
use crate::types::Message;
use splitbrain_target_runtime::node::{self as driver, NodeCore, NodeSpec, Outgoing};
use splitbrain_target_runtime::turns::TurnLimits;
use splitbrain_target_runtime::OffsetClock;
use std::time::Duration;

/// A turn: up to 5 ms idle (the timers' precision), at most 1024 events.
const SPEC: NodeSpec = NodeSpec {
    program: "splitbrain-bayou",
    thread: "bayou-core",
    limits: TurnLimits {
        tick: Duration::from_millis(5),
        max_batch: 1024,
    },
};

/// The replica's core and its store, driven by the runtime.
pub struct Replica {
    core: Core,
    store: Store,
}

/// Input of the node thread.
pub type Event = driver::Event<Replica>;
/// How other tasks reach the node thread.
pub type NodeHandle = driver::NodeHandle<Replica>;

/// Starts the node thread over an already recovered core and open store.
pub fn spawn(
    core: Core,
    store: Store,
    clock: OffsetClock,
    net: PeerNet,
) -> Result<NodeHandle, std::io::Error> {
    driver::spawn(Replica { core, store }, clock, net, SPEC)
}

impl NodeCore for Replica {
    type Message = Message;
    type Request = Request;
    type Reply = Reply;
    type Status = Status;
    type Effect = Effect;
    type Error = StorageError;

    fn receive(&mut self, from: u64, msg: Message, now_ms: i64) {
        self.core.receive(from, msg, now_ms);
    }

    fn client(&mut self, req: u64, request: Request, now_ms: i64) {
        self.core.client(req, request, now_ms);
    }

    fn tick(&mut self, now_ms: i64) {
        self.core.tick(now_ms);
    }

    fn status(&self) -> Status {
        self.core.status()
    }

    fn take_effects(&mut self) -> Vec<Effect> {
        self.core.take_effects()
    }

    fn persist(&mut self, effects: &[Effect]) -> Result<(), StorageError> {
        for effect in effects {
            match effect {
                Effect::Append(record) => self.store.append(record, true)?,
                Effect::Note(record) => self.store.append(record, false)?,
                Effect::Checkpoint { checkpoint, log } => self.store.replace(checkpoint, log)?,
                _ => {}
            }
        }
        self.store.sync()
    }

    fn outgoing(effect: Effect) -> Outgoing<Message, Reply> {
        match effect {
            Effect::Append(_) | Effect::Note(_) | Effect::Checkpoint { .. } => Outgoing::Nothing,
            Effect::Send { to, msg } => Outgoing::Send { to, msg },
            Effect::Reply { req, reply } => Outgoing::Reply { req, reply },
        }
    }
}
