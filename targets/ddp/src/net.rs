//! Rank-to-rank transport: binary frames over TCP, one outbound connection per peer.
//!
//! Gradients are megabytes of f32, so frames are binary, not JSON lines: a connection
//! opens with an 8-byte magic and the sender's rank (u32), then carries frames
//! `[len u32][kind u8][payload][checksum u64]`. The harness's lossy links drop
//! newline-delimited pieces of a byte stream, which in a binary stream shows up as a bad
//! length or checksum: the receiver then closes the connection, the sender redials, and
//! the frames lost on the way are recovered by the protocol (a step timeout re-forms the
//! group). Each peer has a bounded queue and a sender thread; a full queue drops frames.

use crate::core::{Chunk, Msg, Rank};
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::time::Duration;

const MAGIC: &[u8; 8] = b"SBDDP\x01\x00\x00";
const KIND_JSON: u8 = 1;
const KIND_CHUNK: u8 = 2;
/// Largest accepted frame.
const MAX_FRAME: usize = 512 * 1024 * 1024;
/// Frames queued per peer.
const QUEUE: usize = 4096;

/// A decoded inbound message.
#[derive(Debug)]
pub struct Inbound {
    /// Sender rank.
    pub from: Rank,
    /// The message.
    pub msg: Msg,
}

fn checksum(kind: u8, payload: &[u8]) -> u64 {
    let mut sum = u64::from(kind) ^ ((payload.len() as u64) << 8);
    let mut words = payload.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        sum = sum.rotate_left(7).wrapping_add(u64::from_le_bytes(b));
    }
    for &b in words.remainder() {
        sum = sum.rotate_left(7).wrapping_add(u64::from(b));
    }
    sum
}

/// Encodes a message as one frame.
pub fn encode(msg: &Msg) -> Vec<u8> {
    let (kind, payload) = match msg {
        Msg::Chunk(c) => {
            let mut p = vec![0u8; 24 + 4 * c.data.len()];
            p[0..8].copy_from_slice(&c.gen.to_le_bytes());
            p[8..16].copy_from_slice(&c.step.to_le_bytes());
            p[16..20].copy_from_slice(&c.bucket.to_le_bytes());
            p[20..24].copy_from_slice(&c.round.to_le_bytes());
            // Fixed-size chunks with no capacity checks: this loop vectorizes.
            for (dst, v) in p[24..].chunks_exact_mut(4).zip(&c.data) {
                dst.copy_from_slice(&v.to_le_bytes());
            }
            (KIND_CHUNK, p)
        }
        other => (KIND_JSON, serde_json::to_vec(other).unwrap_or_default()),
    };
    let mut out = Vec::with_capacity(payload.len() + 13);
    out.extend_from_slice(&((payload.len() + 1) as u32).to_le_bytes());
    out.push(kind);
    let sum = checksum(kind, &payload);
    out.extend_from_slice(&payload);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn decode(kind: u8, payload: &[u8]) -> Option<Msg> {
    match kind {
        KIND_JSON => serde_json::from_slice(payload).ok(),
        KIND_CHUNK if payload.len() >= 24 && (payload.len() - 24).is_multiple_of(4) => {
            let u64_at = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&payload[i..i + 8]);
                u64::from_le_bytes(b)
            };
            let u32_at = |i: usize| {
                u32::from_le_bytes([payload[i], payload[i + 1], payload[i + 2], payload[i + 3]])
            };
            let data = payload[24..]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Some(Msg::Chunk(Chunk {
                gen: u64_at(0),
                step: u64_at(8),
                bucket: u32_at(16),
                round: u32_at(20),
                data,
            }))
        }
        _ => None,
    }
}

/// Reads one frame; `None` at end of stream or on a malformed frame.
fn read_frame(r: &mut impl Read) -> Option<Msg> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).ok()?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return None;
    }
    let mut body = vec![0u8; len + 8];
    r.read_exact(&mut body).ok()?;
    let (kind, rest) = (body[0], &body[1..len]);
    let mut s = [0u8; 8];
    s.copy_from_slice(&body[len..]);
    if checksum(kind, rest) != u64::from_le_bytes(s) {
        return None;
    }
    decode(kind, rest)
}

/// The outbound side: one queue and sender thread per peer. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PeerNet {
    queues: Vec<Option<SyncSender<Vec<u8>>>>,
}

impl PeerNet {
    /// Starts a sender thread per peer `(rank, address)`; `me` is sent in each hello.
    pub fn start(me: Rank, world: usize, peers: &[(Rank, String)]) -> PeerNet {
        let mut queues = vec![None; world];
        for (rank, addr) in peers {
            let (tx, rx) = mpsc::sync_channel(QUEUE);
            if let Some(q) = queues.get_mut(*rank) {
                *q = Some(tx);
                let addr = addr.clone();
                let _ = std::thread::Builder::new()
                    .name(format!("ddp-send-{rank}"))
                    .spawn(move || sender(me, addr, rx));
            }
        }
        PeerNet { queues }
    }

    /// Queues `msg` for `to`; dropped if the queue is full or `to` unknown.
    pub fn send(&self, to: Rank, msg: &Msg) {
        if let Some(Some(q)) = self.queues.get(to) {
            match q.try_send(encode(msg)) {
                Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }
}

fn connect(addr: &str) -> Option<TcpStream> {
    let sock = addr.to_socket_addrs().ok()?.next()?;
    let s = TcpStream::connect_timeout(&sock, Duration::from_millis(500)).ok()?;
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    Some(s)
}

fn sender(me: Rank, addr: String, rx: Receiver<Vec<u8>>) {
    let mut backoff = Duration::from_millis(20);
    loop {
        let Some(stream) = connect(&addr) else {
            // Frames queued for an unreachable peer are stale; those queued while we
            // back off are kept for the next attempt.
            loop {
                match rx.try_recv() {
                    Ok(_) => continue,
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(300));
            continue;
        };
        backoff = Duration::from_millis(20);
        let mut w = BufWriter::with_capacity(1 << 20, stream);
        let mut hello = MAGIC.to_vec();
        hello.extend_from_slice(&(me as u32).to_le_bytes());
        if w.write_all(&hello).is_err() {
            continue;
        }
        loop {
            let Ok(frame) = rx.recv() else { return };
            if w.write_all(&frame).is_err() {
                break;
            }
            // Coalesce what is queued, then flush.
            let mut broken = false;
            while let Ok(more) = rx.try_recv() {
                if w.write_all(&more).is_err() {
                    broken = true;
                    break;
                }
            }
            if broken || w.flush().is_err() {
                break;
            }
        }
    }
}

/// Accepts peer connections forever (one thread per connection), sending every decoded
/// message to `events`.
pub fn listen(listener: TcpListener, world: usize, events: Sender<Inbound>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let events = events.clone();
        let _ = std::thread::Builder::new()
            .name("ddp-recv".into())
            .spawn(move || receive(stream, world, events));
    }
}

fn receive(stream: TcpStream, world: usize, events: Sender<Inbound>) {
    let mut r = BufReader::with_capacity(1 << 20, stream);
    let mut hello = [0u8; 12];
    if r.read_exact(&mut hello).is_err() || &hello[..8] != MAGIC {
        return;
    }
    let from = u32::from_le_bytes([hello[8], hello[9], hello[10], hello[11]]) as usize;
    if from >= world {
        return;
    }
    while let Some(msg) = read_frame(&mut r) {
        if events.send(Inbound { from, msg }).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::CkptId;

    #[test]
    fn frames_round_trip_and_corruption_is_refused() {
        let msgs = vec![
            Msg::Join {
                gen: 3,
                boot: 7,
                ckpts: vec![CkptId { step: 5, gen: 2 }],
            },
            Msg::Saved { gen: 3, step: 10 },
            Msg::Chunk(Chunk {
                gen: 1,
                step: 2,
                bucket: 3,
                round: 4,
                data: vec![1.5, -0.0, f32::MIN_POSITIVE],
            }),
        ];
        for m in &msgs {
            let bytes = encode(m);
            assert_eq!(read_frame(&mut bytes.as_slice()).as_ref(), Some(m));
            let mut bad = bytes.clone();
            let i = bad.len() - 10;
            bad[i] ^= 0x40;
            assert_eq!(read_frame(&mut bad.as_slice()), None);
        }
    }

    #[test]
    fn messages_cross_a_real_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || listen(listener, 2, tx));
        let net = PeerNet::start(1, 2, &[(0, addr)]);
        for step in 0..20 {
            net.send(0, &Msg::Saved { gen: 1, step });
        }
        for step in 0..20 {
            let got = rx.recv_timeout(Duration::from_secs(5)).unwrap();
            assert_eq!(got.from, 1);
            assert_eq!(got.msg, Msg::Saved { gen: 1, step });
        }
    }
}
