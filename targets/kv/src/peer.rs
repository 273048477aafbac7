//! Node-to-node transport: the runtime's newline-delimited JSON frames over TCP
//! (`splitbrain_target_runtime::peer`), each frame `{"from":..,"shard":..,"msg":..}`.
//! The messages of every shard group share one connection per directed pair of nodes;
//! Raft tolerates the frames the transport drops.

use crate::core::{Message, NodeId};
use crate::node::{ShardEvent, ShardHandle};
use serde::{Deserialize, Serialize};
use splitbrain_target_runtime::peer::{self, PeerLinks};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Frames queued per peer before new ones are dropped.
const QUEUE: usize = 4096;
/// Largest accepted frame (snapshots are sent whole).
const MAX_FRAME: usize = 256 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
struct Frame {
    from: NodeId,
    shard: u32,
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

    /// Queues `msg` for `to`'s member of `shard`; dropped if the queue is full.
    pub fn send(&self, to: NodeId, shard: u32, msg: &Message) {
        let frame = Frame {
            from: self.id,
            shard,
            msg: msg.clone(),
        };
        self.links.send(to, &frame);
    }
}

/// Accepts peer connections forever, routing each frame to its shard's thread.
pub async fn listen(listener: TcpListener, shards: Arc<BTreeMap<u32, ShardHandle>>) {
    peer::listen(listener, MAX_FRAME, move |frame: Frame| {
        if let Some(handle) = shards.get(&frame.shard) {
            let _ = handle.tx.send(ShardEvent::Peer {
                from: frame.from,
                msg: frame.msg,
            });
        }
        true
    })
    .await
}
