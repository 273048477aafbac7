//! The node thread: drives a [`Core`] with real time, the WAL and the network.
//!
//! Each turn (every few milliseconds, or when events arrive): feed the core every queued
//! event and a tick; take its outputs; append the log records and fsync once if any was
//! forced; only then send its messages and answer clients. One fsync per turn batches
//! many txns.

use crate::core::{Core, Output, Status};
use crate::peer::PeerNet;
use crate::storage::{StorageError, Wal};
use crate::types::{Message, NodeId, Op, TxnReply};
use splitbrain_target_runtime::turns::{run_turns, storage_failure, TurnLimits, TurnTaker};
use splitbrain_target_runtime::OffsetClock;
use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// A turn: up to 5 ms idle (the timers' precision), at most 1024 events.
const LIMITS: TurnLimits = TurnLimits {
    tick: Duration::from_millis(5),
    max_batch: 1024,
};

/// Input of the node thread.
#[derive(Debug)]
pub enum Event {
    /// A message from a peer.
    Peer {
        /// Sender.
        from: NodeId,
        /// The message.
        msg: Message,
    },
    /// A client txn; the answer goes to `reply`.
    Client {
        /// The ops.
        ops: Vec<Op>,
        /// Where the answer goes.
        reply: oneshot::Sender<TxnReply>,
    },
}

/// How other tasks reach the node thread.
#[derive(Clone, Debug)]
pub struct NodeHandle {
    /// The thread's event queue.
    pub tx: Sender<Event>,
    /// Latest counters, refreshed every turn.
    pub status: Arc<Mutex<Status>>,
}

/// Starts the node thread over an already replayed core and open WAL.
pub fn spawn(
    core: Core,
    wal: Wal,
    clock: OffsetClock,
    net: PeerNet,
) -> Result<NodeHandle, std::io::Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    let status = Arc::new(Mutex::new(core.status()));
    let mut runner = Runner {
        core,
        wal,
        clock,
        net,
        rx,
        clients: BTreeMap::new(),
        next_req: 1,
        status: status.clone(),
    };
    std::thread::Builder::new()
        .name("txn-core".into())
        .spawn(move || runner.run())?;
    Ok(NodeHandle { tx, status })
}

struct Runner {
    core: Core,
    wal: Wal,
    clock: OffsetClock,
    net: PeerNet,
    rx: Receiver<Event>,
    clients: BTreeMap<u64, oneshot::Sender<TxnReply>>,
    next_req: u64,
    status: Arc<Mutex<Status>>,
}

fn fatal(e: &StorageError) -> ! {
    storage_failure("splitbrain-txn", e)
}

impl TurnTaker for Runner {
    type Event = Event;

    fn inbound(&self) -> &Receiver<Event> {
        &self.rx
    }

    fn end_turn(&mut self) {
        self.core.tick(self.clock.now_ms());
        self.flush_outputs();
        if let Err(e) = self.wal.maybe_flush() {
            fatal(&e);
        }
        if let Ok(mut st) = self.status.lock() {
            *st = self.core.status();
        }
    }

    fn handle(&mut self, ev: Event) {
        let now = self.clock.now_ms();
        match ev {
            Event::Peer { from, msg } => self.core.receive(from, msg, now),
            Event::Client { ops, reply } => {
                let req = self.next_req;
                self.next_req += 1;
                self.clients.insert(req, reply);
                self.core.client_txn(req, ops, now);
            }
        }
    }
}

impl Runner {
    fn run(&mut self) {
        // The Boot record (and any recovery output) goes out before anything else.
        self.flush_outputs();
        run_turns(self, LIMITS);
    }

    /// Log first (one fsync), then messages and replies.
    fn flush_outputs(&mut self) {
        let outputs = self.core.take_outputs();
        for out in &outputs {
            if let Output::Log { record, force } = out {
                if let Err(e) = self.wal.append(record, *force) {
                    fatal(&e);
                }
            }
        }
        if let Err(e) = self.wal.sync() {
            fatal(&e);
        }
        for out in outputs {
            match out {
                Output::Log { .. } => {}
                Output::Send { to, msg } => self.net.send(to, msg),
                Output::Reply { req, reply } => {
                    if let Some(client) = self.clients.remove(&req) {
                        let _ = client.send(reply);
                    }
                }
            }
        }
    }
}
