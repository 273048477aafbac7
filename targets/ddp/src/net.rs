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
use std::io::{BufReader, IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::time::Duration;

const MAGIC: &[u8; 8] = b"SBDDP\x01\x00\x00";

/// The first bytes on a connection or link session: the magic, then the sender's rank.
pub(crate) fn hello(me: Rank) -> Vec<u8> {
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&(me as u32).to_le_bytes());
    hello
}

/// The sender's rank from a hello, if it is one from a rank below `world`.
pub(crate) fn hello_rank(hello: &[u8; 12], world: usize) -> Option<Rank> {
    let from = u32::from_le_bytes([hello[8], hello[9], hello[10], hello[11]]) as usize;
    (&hello[..8] == MAGIC && from < world).then_some(from)
}
const KIND_JSON: u8 = 1;
const KIND_CHUNK: u8 = 2;
/// Largest accepted frame.
const MAX_FRAME: usize = 512 * 1024 * 1024;
/// Buffer of the socket reader. Small frames (JSON, small chunks) are read in bulk
/// through it; a frame at least this large bypasses it and goes straight from the
/// socket into the frame buffer, saving a copy of every gradient byte.
const IO_BUFFER: usize = 64 * 1024;
/// Frames queued per peer.
pub(crate) const QUEUE: usize = 4096;

/// A decoded inbound message.
#[derive(Debug)]
pub struct Inbound {
    /// Sender rank.
    pub from: Rank,
    /// The message.
    pub msg: Msg,
}

/// Frame checksum: four independent rotate-and-add lanes over 8-byte words (so the
/// CPU runs them in parallel), folded together, then the tail. Changing any one word
/// changes its lane (each step is a bijection of the lane), so it changes the sum.
fn checksum(kind: u8, payload: &[u8]) -> u64 {
    let word = |w: &[u8]| {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        u64::from_le_bytes(b)
    };
    let mut lanes = [u64::from(kind) ^ ((payload.len() as u64) << 8), 1, 2, 3];
    let mut blocks = payload.chunks_exact(32);
    for block in &mut blocks {
        for (lane, w) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            *lane = lane.rotate_left(7).wrapping_add(word(w));
        }
    }
    let mut sum =
        lanes[0] ^ lanes[1].rotate_left(16) ^ lanes[2].rotate_left(32) ^ lanes[3].rotate_left(48);
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        sum = sum.rotate_left(7).wrapping_add(word(w));
    }
    for &b in words.remainder() {
        sum = sum.rotate_left(7).wrapping_add(u64::from(b));
    }
    sum
}

/// Bytes before the payload: `[len u32][kind u8]`.
const HEAD: usize = 5;

/// Encodes a message as one frame, built in place in a single buffer: the f32s are
/// written as little-endian bytes straight after the header (one pass, no payload copy).
pub fn encode(msg: &Msg) -> Vec<u8> {
    let mut out;
    let kind = match msg {
        Msg::Chunk(c) => {
            out = Vec::with_capacity(HEAD + 24 + 4 * c.data.len() + 8);
            out.extend_from_slice(&[0u8; HEAD]);
            out.extend_from_slice(&c.gen.to_le_bytes());
            out.extend_from_slice(&c.step.to_le_bytes());
            out.extend_from_slice(&c.bucket.to_le_bytes());
            out.extend_from_slice(&c.round.to_le_bytes());
            // Straight from the f32s into spare capacity: no zero-fill pass first.
            out.extend(c.data.iter().flat_map(|v| v.to_le_bytes()));
            KIND_CHUNK
        }
        other => {
            out = vec![0u8; HEAD];
            // A message that did not serialize leaves an empty payload, which the
            // receiver refuses (as before).
            if serde_json::to_writer(&mut out, other).is_err() {
                out.truncate(HEAD);
            }
            KIND_JSON
        }
    };
    let payload_len = out.len() - HEAD;
    out[0..4].copy_from_slice(&((payload_len + 1) as u32).to_le_bytes());
    out[4] = kind;
    let sum = checksum(kind, &out[HEAD..]);
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

/// Reads one frame into `body` (reused across frames, so no allocation or zeroing per
/// frame once it has grown); `None` at end of stream or on a malformed frame.
pub(crate) fn read_frame(r: &mut impl Read, body: &mut Vec<u8>) -> Option<Msg> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).ok()?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return None;
    }
    if body.len() < len + 8 {
        body.resize(len + 8, 0);
    }
    let body = &mut body[..len + 8];
    r.read_exact(body).ok()?;
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
        PeerNet::with_senders(world, peers.to_vec(), move |addr, rx| sender(me, addr, rx))
    }

    /// A queue per peer `(rank, target)` and a thread running `run(target, queue)` that
    /// carries the queue's frames to it (over TCP, or a shared-memory link).
    pub(crate) fn with_senders<T: Send + 'static>(
        world: usize,
        peers: Vec<(Rank, T)>,
        run: impl Fn(T, Receiver<Vec<u8>>) + Clone + Send + 'static,
    ) -> PeerNet {
        let mut queues = vec![None; world];
        for (rank, target) in peers {
            let (tx, rx) = mpsc::sync_channel(QUEUE);
            if let Some(q) = queues.get_mut(rank) {
                *q = Some(tx);
                let run = run.clone();
                let _ = std::thread::Builder::new()
                    .name(format!("ddp-send-{rank}"))
                    .spawn(move || run(target, rx));
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
            if !drop_queued(&rx) {
                return;
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(300));
            continue;
        };
        backoff = Duration::from_millis(20);
        let mut w = stream;
        if w.write_all(&hello(me)).is_err() {
            continue;
        }
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            // Coalesced into one vectored write: no copy into a staging buffer, and one
            // system call for many frames.
            if !next_batch(&rx, &mut batch) {
                return;
            }
            let sent = write_frames(&mut w, &batch);
            batch.clear();
            if sent.is_err() {
                break;
            }
        }
    }
}

/// Frames written by one vectored write at most.
pub(crate) const BATCH: usize = 64;

/// Waits for the next frame and adds what else is queued, up to [`BATCH`]; false once
/// the queue is closed.
pub(crate) fn next_batch(rx: &Receiver<Vec<u8>>, batch: &mut Vec<Vec<u8>>) -> bool {
    let Ok(frame) = rx.recv() else { return false };
    batch.push(frame);
    while batch.len() < BATCH {
        match rx.try_recv() {
            Ok(more) => batch.push(more),
            Err(_) => break,
        }
    }
    true
}

/// Drops the frames queued for a peer that cannot be reached (they are stale; those
/// queued while the sender backs off are kept for the next attempt); false once the
/// queue is closed.
pub(crate) fn drop_queued(rx: &Receiver<Vec<u8>>) -> bool {
    loop {
        match rx.try_recv() {
            Ok(_) => continue,
            Err(mpsc::TryRecvError::Empty) => return true,
            Err(mpsc::TryRecvError::Disconnected) => return false,
        }
    }
}

/// Writes every frame of `frames`, in order, with vectored writes.
fn write_frames(w: &mut impl Write, frames: &[Vec<u8>]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = frames.iter().map(|f| IoSlice::new(f)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match w.write_vectored(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
    let mut r = BufReader::with_capacity(IO_BUFFER, stream);
    let mut hello = [0u8; 12];
    if r.read_exact(&mut hello).is_err() {
        return;
    }
    let Some(from) = hello_rank(&hello, world) else {
        return;
    };
    let mut body = Vec::new();
    while let Some(msg) = read_frame(&mut r, &mut body) {
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
                committed: Some(CkptId { step: 5, gen: 2 }),
                view: Some(vec![0, 2, 3]),
            },
            Msg::State(Box::new(crate::core::StateMsg {
                gen: 4,
                ckpt: Some(CkptId { step: 5, gen: 2 }),
                pos: crate::core::DataPos {
                    epoch: 1,
                    offset: 64,
                },
                params: vec![f32::NAN.to_bits(), (-0.0f32).to_bits()],
                momentum: vec![1, 2],
                lineage: vec![CkptId { step: 5, gen: 2 }],
                joiner_committed: 3,
                records: b"[]".to_vec(),
            })),
            Msg::Saved { gen: 3, step: 10 },
            Msg::Chunk(Chunk {
                gen: 1,
                step: 2,
                bucket: 3,
                round: 4,
                data: vec![1.5, -0.0, f32::MIN_POSITIVE],
            }),
        ];
        let mut body = Vec::new();
        for m in &msgs {
            let bytes = encode(m);
            assert_eq!(
                read_frame(&mut bytes.as_slice(), &mut body).as_ref(),
                Some(m)
            );
            let mut bad = bytes.clone();
            let i = bad.len() - 10;
            bad[i] ^= 0x40;
            assert_eq!(read_frame(&mut bad.as_slice(), &mut body), None);
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
