//! Node-to-node transport shared by the bundled targets: newline-delimited JSON frames
//! over TCP, one connection per directed pair of nodes.
//!
//! One frame is one line of compact JSON, so the harness's proxy mesh can cut, delay or
//! drop whole frames, and a frame cut in half by a lossy link fails to parse and is
//! skipped: the next newline resynchronizes the stream. Outbound, each peer has its own
//! bounded queue and sender task that redials with capped exponential backoff; a peer
//! that is down or stalled only fills (and then drops from) its own queue. Frames queued
//! while a peer is unreachable are dropped as stale: the protocols above resend what
//! matters.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A write stalled this long drops the connection.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for a connection to be established.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Frames coalesced into one write at most.
const BATCH: usize = 256;

/// The outbound side: one bounded queue and sender task per peer. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PeerLinks {
    queues: Arc<BTreeMap<u64, mpsc::Sender<Vec<u8>>>>,
}

impl PeerLinks {
    /// Starts one sender task per peer (`(id, address to dial)`) on the current tokio
    /// runtime, each with a queue of `queue` frames.
    pub fn start(peers: &[(u64, String)], queue: usize) -> PeerLinks {
        let mut queues = BTreeMap::new();
        for (peer, addr) in peers {
            let (tx, rx) = mpsc::channel(queue.max(1));
            queues.insert(*peer, tx);
            tokio::spawn(sender(addr.clone(), rx));
        }
        PeerLinks {
            queues: Arc::new(queues),
        }
    }

    /// Queues `frame` for peer `to` as one line; dropped if the queue is full, `to` is
    /// unknown or the frame does not serialize.
    pub fn send<T: Serialize>(&self, to: u64, frame: &T) {
        let Some(queue) = self.queues.get(&to) else {
            return;
        };
        let Ok(mut bytes) = serde_json::to_vec(frame) else {
            return;
        };
        // Compact JSON never contains a raw newline, so one line is one frame.
        bytes.push(b'\n');
        let _ = queue.try_send(bytes);
    }
}

async fn sender(addr: String, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut backoff = Duration::from_millis(20);
    loop {
        let mut stream =
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&addr)).await {
                Ok(Ok(s)) => s,
                _ => {
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
        loop {
            let Some(mut batch) = rx.recv().await else {
                return;
            };
            // Coalesce what is already queued into one write.
            for _ in 0..BATCH {
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

/// Accepts peer connections on `listener` forever and hands every frame that parses as
/// `T` to `deliver`. Lines longer than `max_frame` bytes end their connection;
/// `deliver` returning `false` ends it too (the node is shutting down).
pub async fn listen<T, F>(listener: TcpListener, max_frame: usize, deliver: F)
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(T) -> bool + Clone + Send + Sync + 'static,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let deliver = deliver.clone();
        tokio::spawn(async move {
            let _ = receive(stream, max_frame, deliver).await;
        });
    }
}

async fn receive<T, F>(stream: TcpStream, max_frame: usize, deliver: F) -> std::io::Result<()>
where
    T: DeserializeOwned,
    F: Fn(T) -> bool,
{
    let mut reader = tokio::io::BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bound the line so a corrupt stream cannot make us allocate without limit.
        let n = (&mut reader)
            .take(max_frame as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 || n > max_frame {
            return Ok(());
        }
        let Ok(frame) = serde_json::from_slice::<T>(&line) else {
            continue;
        };
        if !deliver(frame) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Hello {
        from: u64,
        n: u32,
    }

    #[tokio::test]
    async fn frames_arrive_in_order_and_garbage_lines_are_skipped() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(listen(listener, 1024, move |h: Hello| tx.send(h).is_ok()));
        // A raw connection first: a cut frame and an over-long line are not delivered.
        let mut raw = TcpStream::connect(addr).await.unwrap();
        raw.write_all(b"{\"from\":9,\"n\"\n{\"from\":9,\"n\":1}\n")
            .await
            .unwrap();
        assert_eq!(rx.recv().await, Some(Hello { from: 9, n: 1 }));
        let links = PeerLinks::start(&[(2, addr.to_string())], 16);
        for n in 0..5 {
            links.send(2, &Hello { from: 1, n });
        }
        links.send(7, &Hello { from: 1, n: 99 }); // unknown peer: dropped
        for n in 0..5 {
            let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .unwrap();
            assert_eq!(got, Some(Hello { from: 1, n }));
        }
    }
}
