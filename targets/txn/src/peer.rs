//! Node-to-node transport: the runtime's newline-delimited JSON frames over TCP
//! (`splitbrain_target_runtime::peer`), each frame `{"from":..,"msg":..}`, one connection
//! per directed pair so the harness's proxy mesh can cut, delay or drop them. The
//! protocol resends what matters, so frames dropped while a peer is away are simply lost.

use crate::node::Event;
use crate::types::{Message, NodeId};
use serde::{Deserialize, Serialize};
use splitbrain_target_runtime::peer::{self, PeerLinks};
use tokio::net::TcpListener;

/// Frames queued per peer before new ones are dropped.
const QUEUE: usize = 8192;
/// Largest accepted frame.
const MAX_FRAME: usize = 16 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
struct Frame {
    from: NodeId,
    msg: Message,
}

/// Outbound side: one queue per peer. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PeerNet {
    id: NodeId,
    links: PeerLinks,
}

impl PeerNet {
    /// Starts one sender task per peer (`(id, address to dial)`) on the current runtime.
    pub fn start(id: NodeId, peers: &[(NodeId, String)]) -> PeerNet {
        PeerNet {
            id,
            links: PeerLinks::start(peers, QUEUE),
        }
    }

    /// Queues `msg` for `to`; dropped if the queue is full or `to` is unknown.
    pub fn send(&self, to: NodeId, msg: Message) {
        self.links.send(to, &Frame { from: self.id, msg });
    }
}

/// Accepts peer connections forever, handing each frame to the node's core thread.
pub async fn listen(listener: TcpListener, events: std::sync::mpsc::Sender<Event>) {
    peer::listen(listener, MAX_FRAME, move |frame: Frame| {
        events
            .send(Event::Peer {
                from: frame.from,
                msg: frame.msg,
            })
            .is_ok()
    })
    .await
}
