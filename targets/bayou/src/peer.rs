//! Replica-to-replica transport: the runtime's newline-delimited JSON frames over TCP
//! (`splitbrain_target_runtime::peer`), each frame `{"from":..,"msg":..}`, one connection
//! per directed pair so the harness's proxy mesh can cut, delay or drop them. Anti-entropy
//! repeats every round, so frames lost while a peer is away need no resend.

use crate::node::Event;
use crate::types::{Message, ReplicaId};
use serde::{Deserialize, Serialize};
use splitbrain_target_runtime::peer::PeerLinks;
use tokio::net::TcpListener;

/// Frames queued per peer before new ones are dropped (anti-entropy sends few, large ones).
const QUEUE: usize = 1024;
/// Largest accepted frame: a batch of writes or a checkpoint.
const MAX_FRAME: usize = 64 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
struct Frame {
    from: ReplicaId,
    msg: Message,
}

/// Outbound side: one queue per peer. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PeerNet {
    id: ReplicaId,
    links: PeerLinks,
}

impl PeerNet {
    /// Starts one sender task per peer (`(id, address to dial)`) on the current runtime.
    pub fn start(id: ReplicaId, peers: &[(ReplicaId, String)]) -> PeerNet {
        let links = PeerLinks::start(peers, QUEUE);
        PeerNet { id, links }
    }

    /// Queues `msg` for `to`; dropped if the queue is full or `to` is unknown.
    pub fn send(&self, to: ReplicaId, msg: Message) {
        self.links.send(to, &Frame { from: self.id, msg });
    }
}

/// Accepts peer connections forever, handing each frame to the node thread.
pub async fn listen(listener: TcpListener, events: std::sync::mpsc::Sender<Event>) {
    let deliver = move |f: Frame| {
        let event = Event::Peer {
            from: f.from,
            msg: f.msg,
        };
        events.send(event).is_ok()
    };
    splitbrain_target_runtime::peer::listen(listener, MAX_FRAME, deliver).await
}
