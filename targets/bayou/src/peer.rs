//! Replica-to-replica transport: the runtime's newline-delimited JSON frames over TCP
//! (`splitbrain_target_runtime::node::PeerNet`), each frame `{"from":..,"msg":..}`, one
//! connection per directed pair so the harness's proxy mesh can cut, delay or drop them.
//! Anti-entropy repeats every round, so frames lost while a peer is away need no resend.

use crate::node::Event;
use crate::types::{Message, ReplicaId};
use splitbrain_target_runtime::node;
use tokio::net::TcpListener;

/// Frames queued per peer before new ones are dropped (anti-entropy sends few, large ones).
const QUEUE: usize = 1024;
/// Largest accepted frame: a batch of writes or a checkpoint.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Outbound side: one queue per peer. Cheap to clone.
pub type PeerNet = node::PeerNet<Message>;

/// Starts one sender task per peer (`(id, address to dial)`) on the current runtime.
pub fn start(id: ReplicaId, peers: &[(ReplicaId, String)]) -> PeerNet {
    PeerNet::start(id, peers, QUEUE)
}

/// Accepts peer connections forever, handing each frame to the node thread.
pub async fn listen(listener: TcpListener, events: std::sync::mpsc::Sender<Event>) {
    node::listen_peers(listener, MAX_FRAME, events).await
}
