//! Node-to-node transport: the runtime's newline-delimited JSON frames over TCP
//! (`splitbrain_target_runtime::node::PeerNet`), each frame `{"from":..,"msg":..}`, one
//! connection per directed pair so the harness's proxy mesh can cut, delay or drop them.
//! The protocol resends what matters, so frames dropped while a peer is away are simply
//! lost.

use crate::node::Event;
use crate::types::{Message, NodeId};
use splitbrain_target_runtime::node;
use tokio::net::TcpListener;

/// Frames queued per peer before new ones are dropped.
const QUEUE: usize = 8192;
/// Largest accepted frame.
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Outbound side: one queue per peer. Cheap to clone.
pub type PeerNet = node::PeerNet<Message>;

/// Starts one sender task per peer (`(id, address to dial)`) on the current runtime.
pub fn start(id: NodeId, peers: &[(NodeId, String)]) -> PeerNet {
    PeerNet::start(id, peers, QUEUE)
}

/// Accepts peer connections forever, handing each frame to the node's core thread.
pub async fn listen(listener: TcpListener, events: std::sync::mpsc::Sender<Event>) {
    node::listen_peers(listener, MAX_FRAME, events).await
}
