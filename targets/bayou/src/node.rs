//! The node thread: drives a [`Core`] with real time, the disk and the network.
//!
//! Each turn (every few milliseconds, or when events arrive): feed the core every queued
//! event and a tick; take its effects; append the log records (and install checkpoints)
//! and fsync once; only then send its messages and answer clients. One fsync per turn
//! batches many writes.

use crate::core::{Core, Effect, Reply, Request, Status};
use crate::peer::PeerNet;
use crate::storage::{StorageError, Store};
use crate::types::{Message, ReplicaId};
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
        from: ReplicaId,
        /// The message.
        msg: Message,
    },
    /// A client request; the answer goes to `reply`.
    Client {
        /// The request.
        request: Request,
        /// Where the answer goes.
        reply: oneshot::Sender<Reply>,
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

/// Starts the node thread over an already recovered core and open store.
pub fn spawn(
    core: Core,
    store: Store,
    clock: OffsetClock,
    net: PeerNet,
) -> Result<NodeHandle, std::io::Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    let status = Arc::new(Mutex::new(core.status()));
    let mut runner = Runner {
        core,
        store,
        clock,
        net,
        rx,
        clients: BTreeMap::new(),
        next_req: 1,
        status: status.clone(),
    };
    std::thread::Builder::new()
        .name("bayou-core".into())
        .spawn(move || runner.run())?;
    Ok(NodeHandle { tx, status })
}

struct Runner {
    core: Core,
    store: Store,
    clock: OffsetClock,
    net: PeerNet,
    rx: Receiver<Event>,
    clients: BTreeMap<u64, oneshot::Sender<Reply>>,
    next_req: u64,
    status: Arc<Mutex<Status>>,
}

fn fatal(e: &StorageError) -> ! {
    storage_failure("splitbrain-bayou", e)
}

impl TurnTaker for Runner {
    type Event = Event;

    fn inbound(&self) -> &Receiver<Event> {
        &self.rx
    }

    fn end_turn(&mut self) {
        self.core.tick(self.clock.now_ms());
        self.flush_effects();
        if let Ok(mut st) = self.status.lock() {
            *st = self.core.status();
        }
    }

    fn handle(&mut self, ev: Event) {
        let now = self.clock.now_ms();
        match ev {
            Event::Peer { from, msg } => self.core.receive(from, msg, now),
            Event::Client { request, reply } => {
                let req = self.next_req;
                self.next_req += 1;
                self.clients.insert(req, reply);
                self.core.client(req, request, now);
            }
        }
    }
}

impl Runner {
    fn run(&mut self) {
        // Recovery output (a primary's re-commits, a checkpoint) goes out first.
        self.flush_effects();
        run_turns(self, LIMITS);
    }

    /// Disk first (one fsync), then messages and replies.
    fn flush_effects(&mut self) {
        let effects = self.core.take_effects();
        for effect in &effects {
            let done = match effect {
                Effect::Append(record) => self.store.append(record, true),
                Effect::Note(record) => self.store.append(record, false),
                Effect::Checkpoint { checkpoint, log } => self.store.replace(checkpoint, log),
                _ => Ok(()),
            };
            if let Err(e) = done {
                fatal(&e);
            }
        }
        if let Err(e) = self.store.sync() {
            fatal(&e);
        }
        for effect in effects {
            match effect {
                Effect::Append(_) | Effect::Note(_) | Effect::Checkpoint { .. } => {}
                Effect::Send { to, msg } => self.net.send(to, msg),
                Effect::Reply { req, reply } => {
                    if let Some(client) = self.clients.remove(&req) {
                        let _ = client.send(reply);
                    }
                }
            }
        }
    }
}
