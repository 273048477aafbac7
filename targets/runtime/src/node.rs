//! The node driver for a target whose node is one sans-IO core on one thread (txn, bayou):
//! the core's thread and its event queue, the map from request numbers to waiting
//! clients, the status snapshot the HTTP front reads, and the peer frames
//! `{"from":..,"msg":..}` in and out.
//!
//! A target implements [`NodeCore`] for its core and storage together; [`spawn`] runs it
//! through [`crate::turns::run_turns`]. Each turn: feed every queued event to the core,
//! tick it, take its effects, let the target make their records durable (one fsync),
//! and only then send the messages and answer the clients. A storage error stops the
//! process ([`crate::turns::storage_failure`]).

use crate::turns::{run_turns, storage_failure, TurnLimits, TurnTaker};
use crate::OffsetClock;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// What an effect of the core asks of the driver once the turn's records are durable.
#[derive(Debug)]
pub enum Outgoing<M, R> {
    /// Send `msg` to node `to`.
    Send {
        /// The peer.
        to: u64,
        /// The message.
        msg: M,
    },
    /// Answer the client request numbered `req`.
    Reply {
        /// The request's number, as given to [`NodeCore::client`].
        req: u64,
        /// The answer.
        reply: R,
    },
    /// Nothing (a record, already persisted).
    Nothing,
}

/// A sans-IO core and its storage, as the driver sees them.
pub trait NodeCore: Send + 'static {
    /// A peer message.
    type Message: Serialize + DeserializeOwned + Send + 'static;
    /// A client request.
    type Request: Send + 'static;
    /// The answer to a client request.
    type Reply: Send + 'static;
    /// The counters `GET /status` shows.
    type Status: Send + 'static;
    /// What the core asks for: records to persist, messages, replies.
    type Effect;
    /// Why the disk failed.
    type Error: std::fmt::Display;

    /// A message from peer `from`.
    fn receive(&mut self, from: u64, msg: Self::Message, now_ms: i64);
    /// A client request, numbered `req` for its reply.
    fn client(&mut self, req: u64, request: Self::Request, now_ms: i64);
    /// Timers.
    fn tick(&mut self, now_ms: i64);
    /// The current counters.
    fn status(&self) -> Self::Status;
    /// The effects produced since the last call.
    fn take_effects(&mut self) -> Vec<Self::Effect>;
    /// Writes the effects' records and makes them durable (one fsync) before any of
    /// their messages or replies leaves.
    fn persist(&mut self, effects: &[Self::Effect]) -> Result<(), Self::Error>;
    /// At the end of every turn, after its messages and replies went out.
    fn after_turn(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// What the driver does with an effect once persisted.
    fn outgoing(effect: Self::Effect) -> Outgoing<Self::Message, Self::Reply>;
}

/// Input of the node thread.
pub enum Event<C: NodeCore> {
    /// A message from a peer.
    Peer {
        /// Sender.
        from: u64,
        /// The message.
        msg: C::Message,
    },
    /// A client request; the answer goes to `reply`.
    Client {
        /// The request.
        request: C::Request,
        /// Where the answer goes.
        reply: oneshot::Sender<C::Reply>,
    },
}

impl<C: NodeCore> std::fmt::Debug for Event<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Peer { from, .. } => write!(f, "Event::Peer {{ from: {from}, .. }}"),
            Event::Client { .. } => f.write_str("Event::Client { .. }"),
        }
    }
}

/// Why [`NodeHandle::ask`] has no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoAnswer {
    /// The node thread is gone.
    ShuttingDown,
    /// No answer within the wait (the core always answers before its own timeouts, so
    /// only a stuck node gets here).
    Timeout,
}

/// How other tasks reach the node thread. Cheap to clone.
pub struct NodeHandle<C: NodeCore> {
    /// The thread's event queue.
    pub tx: Sender<Event<C>>,
    /// Latest counters, refreshed every turn.
    pub status: Arc<Mutex<C::Status>>,
}

impl<C: NodeCore> Clone for NodeHandle<C> {
    fn clone(&self) -> Self {
        NodeHandle {
            tx: self.tx.clone(),
            status: self.status.clone(),
        }
    }
}

impl<C: NodeCore> std::fmt::Debug for NodeHandle<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHandle").finish_non_exhaustive()
    }
}

impl<C: NodeCore> NodeHandle<C> {
    /// Hands a client request to the core and waits up to `wait` for its answer.
    pub async fn ask(&self, request: C::Request, wait: Duration) -> Result<C::Reply, NoAnswer> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Event::Client { request, reply: tx }).is_err() {
            return Err(NoAnswer::ShuttingDown);
        }
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            _ => Err(NoAnswer::Timeout),
        }
    }
}

/// How the node thread is named and bounded.
#[derive(Debug, Clone, Copy)]
pub struct NodeSpec {
    /// The program, in the storage-failure message (`splitbrain-txn`).
    pub program: &'static str,
    /// The thread's name (`txn-core`).
    pub thread: &'static str,
    /// The turns' bounds.
    pub limits: TurnLimits,
}

/// One peer frame: `{"from":..,"msg":..}`, one line on the wire.
#[derive(Serialize, Deserialize)]
struct Frame<M> {
    from: u64,
    msg: M,
}

/// Outbound side of the peer transport: one bounded queue per peer. Cheap to clone.
#[derive(Debug)]
pub struct PeerNet<M> {
    id: u64,
    links: crate::peer::PeerLinks,
    messages: PhantomData<fn(M)>,
}

impl<M> Clone for PeerNet<M> {
    fn clone(&self) -> Self {
        PeerNet {
            id: self.id,
            links: self.links.clone(),
            messages: PhantomData,
        }
    }
}

impl<M: Serialize> PeerNet<M> {
    /// Starts one sender task per peer (`(id, address to dial)`) on the current tokio
    /// runtime, each with a queue of `queue` frames.
    pub fn start(id: u64, peers: &[(u64, String)], queue: usize) -> PeerNet<M> {
        PeerNet {
            id,
            links: crate::peer::PeerLinks::start(peers, queue),
            messages: PhantomData,
        }
    }

    /// Queues `msg` for `to`; dropped if the queue is full or `to` is unknown.
    pub fn send(&self, to: u64, msg: M) {
        self.links.send(to, &Frame { from: self.id, msg });
    }
}

/// Accepts peer connections forever, handing each frame (at most `max_frame` bytes) to
/// the node thread.
pub async fn listen_peers<C: NodeCore>(
    listener: TcpListener,
    max_frame: usize,
    events: Sender<Event<C>>,
) {
    let deliver = move |f: Frame<C::Message>| {
        events
            .send(Event::Peer {
                from: f.from,
                msg: f.msg,
            })
            .is_ok()
    };
    crate::peer::listen(listener, max_frame, deliver).await
}

/// Starts the node thread over an already recovered core (with its open storage); its
/// messages go out through `net`.
pub fn spawn<C: NodeCore>(
    core: C,
    clock: OffsetClock,
    net: PeerNet<C::Message>,
    spec: NodeSpec,
) -> Result<NodeHandle<C>, std::io::Error> {
    spawn_with(core, clock, move |to, msg| net.send(to, msg), spec)
}

/// [`spawn`] with any sender of peer messages.
pub fn spawn_with<C, S>(
    core: C,
    clock: OffsetClock,
    send: S,
    spec: NodeSpec,
) -> Result<NodeHandle<C>, std::io::Error>
where
    C: NodeCore,
    S: FnMut(u64, C::Message) + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let status = Arc::new(Mutex::new(core.status()));
    let mut runner = NodeRunner {
        core,
        clock,
        send,
        rx,
        clients: BTreeMap::new(),
        next_req: 1,
        status: status.clone(),
        spec,
    };
    std::thread::Builder::new()
        .name(spec.thread.into())
        .spawn(move || {
            // Recovery output (a boot record, a primary's re-commits) goes out first.
            runner.flush_effects();
            run_turns(&mut runner, spec.limits);
        })?;
    Ok(NodeHandle { tx, status })
}

/// The node thread's state: the core (and its storage), the clock, the outbound peer
/// traffic and the clients waiting for answers.
struct NodeRunner<C: NodeCore, S> {
    core: C,
    clock: OffsetClock,
    send: S,
    rx: Receiver<Event<C>>,
    clients: BTreeMap<u64, oneshot::Sender<C::Reply>>,
    next_req: u64,
    status: Arc<Mutex<C::Status>>,
    spec: NodeSpec,
}

impl<C, S> TurnTaker for NodeRunner<C, S>
where
    C: NodeCore,
    S: FnMut(u64, C::Message),
{
    type Event = Event<C>;

    fn inbound(&self) -> &Receiver<Event<C>> {
        &self.rx
    }

    fn handle(&mut self, ev: Event<C>) {
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

    fn end_turn(&mut self) {
        self.core.tick(self.clock.now_ms());
        self.flush_effects();
        if let Err(e) = self.core.after_turn() {
            storage_failure(self.spec.program, &e);
        }
        if let Ok(mut st) = self.status.lock() {
            *st = self.core.status();
        }
    }
}

impl<C, S> NodeRunner<C, S>
where
    C: NodeCore,
    S: FnMut(u64, C::Message),
{
    /// Disk first (one fsync), then messages and replies.
    fn flush_effects(&mut self) {
        let effects = self.core.take_effects();
        if let Err(e) = self.core.persist(&effects) {
            storage_failure(self.spec.program, &e);
        }
        for effect in effects {
            match C::outgoing(effect) {
                Outgoing::Send { to, msg } => (self.send)(to, msg),
                Outgoing::Reply { req, reply } => {
                    if let Some(client) = self.clients.remove(&req) {
                        let _ = client.send(reply);
                    }
                }
                Outgoing::Nothing => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    /// A core that echoes each request to peer 2, answers it with the request plus the
    /// number of records it persisted before, and logs what happened in which order.
    struct Echo {
        pending: Vec<(bool, u64, u64)>,
        persisted: u64,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl NodeCore for Echo {
        type Message = u64;
        type Request = u64;
        type Reply = (u64, u64);
        type Status = u64;
        type Effect = (bool, u64, u64);
        type Error = String;

        fn receive(&mut self, from: u64, msg: u64, _: i64) {
            self.log.lock().unwrap().push(format!("recv {from}:{msg}"));
        }
        fn client(&mut self, req: u64, request: u64, _: i64) {
            self.pending.push((false, req, request));
            self.pending.push((true, req, request));
        }
        fn tick(&mut self, _: i64) {}
        fn status(&self) -> u64 {
            self.persisted
        }
        fn take_effects(&mut self) -> Vec<(bool, u64, u64)> {
            std::mem::take(&mut self.pending)
        }
        fn persist(&mut self, effects: &[(bool, u64, u64)]) -> Result<(), String> {
            self.persisted += effects.len() as u64;
            self.log
                .lock()
                .unwrap()
                .push(format!("persist {}", effects.len()));
            Ok(())
        }
        fn outgoing(e: (bool, u64, u64)) -> Outgoing<u64, (u64, u64)> {
            match e {
                (false, _, request) => Outgoing::Send {
                    to: 2,
                    msg: request,
                },
                (true, req, request) => Outgoing::Reply {
                    req,
                    reply: (req, request),
                },
            }
        }
    }

    #[tokio::test]
    async fn records_are_persisted_before_sends_and_each_client_gets_its_own_reply() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let core = Echo {
            pending: Vec::new(),
            persisted: 0,
            log: log.clone(),
        };
        let (sent_tx, sent_rx) = channel();
        let send_log = log.clone();
        let spec = NodeSpec {
            program: "echo",
            thread: "echo-core",
            limits: TurnLimits {
                tick: Duration::from_millis(1),
                max_batch: 8,
            },
        };
        let handle = spawn_with(
            core,
            OffsetClock::new(),
            move |to, msg| {
                send_log.lock().unwrap().push(format!("send {to}:{msg}"));
                let _ = sent_tx.send((to, msg));
            },
            spec,
        )
        .unwrap();
        let wait = Duration::from_secs(10);
        let (a, b) = tokio::join!(handle.ask(40, wait), handle.ask(50, wait));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!((a.1, b.1), (40, 50));
        assert_ne!(a.0, b.0, "each request has its own number");
        handle.tx.send(Event::Peer { from: 3, msg: 7 }).unwrap();
        let mut sent: Vec<(u64, u64)> = sent_rx.iter().take(2).collect();
        sent.sort();
        assert_eq!(sent, [(2, 40), (2, 50)]);
        let received = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            log.lock().unwrap().iter().any(|l| l == "recv 3:7")
        });
        assert!(received, "the peer message never reached the core");
        drop(handle);
        let log = log.lock().unwrap().clone();
        let first_send = log.iter().position(|l| l.starts_with("send")).unwrap();
        assert!(
            log[..first_send]
                .iter()
                .any(|l| l != "persist 0" && l.starts_with("persist")),
            "a send went out before its turn's records were persisted: {log:?}"
        );
    }
}
