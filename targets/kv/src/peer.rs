//! Node-to-node transport: newline-delimited JSON frames over TCP.
//!
//! Each frame is one line of compact JSON `{"from":..,"shard":..,"msg":..}` (so the proxy
//! mesh can drop whole frames when it simulates loss); the messages of
//! every shard group share one connection per directed pair of nodes. Outbound, each peer
//! has its own bounded queue and task: a peer that is down or stalled only fills (and then
//! drops from) its own queue, and Raft tolerates lost messages. Connections are re-dialed
//! with capped exponential backoff.

use crate::core::{Message, NodeId};
use crate::node::{ShardEvent, ShardHandle};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Frames queued per peer before new ones are dropped.
const QUEUE: usize = 4096;
/// Largest accepted frame (snapshots are sent whole).
const MAX_FRAME: usize = 256 * 1024 * 1024;
/// A write stalled this long drops the connection.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

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
    queues: Arc<BTreeMap<NodeId, mpsc::Sender<Vec<u8>>>>,
}

impl PeerNet {
    /// Starts one sender task per peer (`(id, address to dial)`) on the current runtime.
    pub fn start(id: NodeId, peers: &[(NodeId, String)]) -> PeerNet {
        let mut queues = BTreeMap::new();
        for (peer, addr) in peers {
            let (tx, rx) = mpsc::channel(QUEUE);
            queues.insert(*peer, tx);
            tokio::spawn(sender(addr.clone(), rx));
        }
        PeerNet {
            id,
            queues: Arc::new(queues),
        }
    }

    /// Queues `msg` for `to`'s member of `shard`; dropped if the queue is full.
    pub fn send(&self, to: NodeId, shard: u32, msg: &Message) {
        let Some(queue) = self.queues.get(&to) else {
            return;
        };
        let frame = Frame {
            from: self.id,
            shard,
            msg: msg.clone(),
        };
        let Ok(body) = serde_json::to_vec(&frame) else {
            return;
        };
        // Compact JSON never contains a raw newline, so one line is one frame.
        let mut bytes = body;
        bytes.push(b'\n');
        let _ = queue.try_send(bytes);
    }
}

async fn sender(addr: String, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut backoff = Duration::from_millis(20);
    loop {
        let stream =
            match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(&addr)).await {
                Ok(Ok(s)) => s,
                _ => {
                    // Messages queued while the peer is unreachable are stale: drop them.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                    loop {
                        match rx.try_recv() {
                            Ok(_) => continue,
                            Err(mpsc::error::TryRecvError::Empty) => break,
                            Err(mpsc::error::TryRecvError::Disconnected) => return,
                        }
                    }
                    continue;
                }
            };
        backoff = Duration::from_millis(20);
        let _ = stream.set_nodelay(true);
        let mut stream = stream;
        loop {
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut batch = first;
            // Coalesce what is already queued into one write.
            for _ in 0..256 {
                match rx.try_recv() {
                    Ok(more) => batch.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            match tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(&batch)).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
    }
}

/// Accepts peer connections forever, routing each frame to its shard's thread.
pub async fn listen(listener: TcpListener, shards: Arc<BTreeMap<u32, ShardHandle>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shards = shards.clone();
        tokio::spawn(async move {
            let _ = receive(stream, shards).await;
        });
    }
}

async fn receive(
    stream: TcpStream,
    shards: Arc<BTreeMap<u32, ShardHandle>>,
) -> std::io::Result<()> {
    let mut reader = tokio::io::BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bound the line so a corrupt stream cannot make us allocate without limit.
        let n = (&mut reader)
            .take(MAX_FRAME as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 || n > MAX_FRAME {
            return Ok(());
        }
        // A frame that does not parse (e.g. cut by a lossy link) is dropped; the next
        // newline resynchronizes the stream.
        let Ok(frame) = serde_json::from_slice::<Frame>(&line) else {
            continue;
        };
        if let Some(handle) = shards.get(&frame.shard) {
            let _ = handle.tx.send(ShardEvent::Peer {
                from: frame.from,
                msg: frame.msg,
            });
        }
    }
}
