//! The node's messages over shared-memory links (`--transport shm`): the frames of
//! [`crate::net`] (same hello, same `[len][kind][payload][checksum]`), written into the
//! link to each peer by a sender thread, read from the link from each peer by a receiver
//! thread. The node above sees the same [`PeerNet`] and [`Inbound`] channel as over TCP.
//!
//! Faults behave as over TCP: a paused or dead reader makes the sender's write time out
//! after [`WRITE_TIMEOUT`], and it drops what it holds and starts over (a new session,
//! like a new connection); a restarted reader makes a new link file, which the sender
//! finds (the old one is marked abandoned); a restarted writer starts a new session, so
//! the reader drops a frame its earlier incarnation left half written. What is lost on
//! the way the protocol recovers, as over TCP. A partition cannot cut shared memory, so
//! the harness refuses partition faults on this transport.

use super::{link_path, read_exact, LinkError, LinkReader, LinkWriter};
use crate::core::Rank;
use crate::net::{self, Inbound, PeerNet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

/// Ring bytes of each link: room for a few 64 KiB-bucket chunks and the odd large
/// state message in flight (a larger frame streams through).
pub const LINK_CAPACITY: usize = 4 << 20;
/// A write blocked this long (the reader is paused, gone or far behind) is given up,
/// as the TCP sender's write timeout gives up a connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// A receiver's wait for the next frame; it just waits again (like a blocked socket
/// read), stopping only once its link file is gone or replaced.
const READ_WAIT: Duration = Duration::from_secs(1);

/// Starts a sender thread for each of `peers`, writing into the links `me -> peer` in
/// `dir` (made by the peers' [`listen`]).
pub fn start(me: Rank, world: usize, dir: &Path, peers: &[Rank]) -> PeerNet {
    let targets: Vec<(Rank, PathBuf)> = peers.iter().map(|&p| (p, link_path(dir, me, p))).collect();
    PeerNet::with_senders(world, targets, move |path, rx| sender(me, path, rx))
}

fn sender(me: Rank, path: PathBuf, rx: Receiver<Vec<u8>>) {
    let mut backoff = Duration::from_millis(20);
    let hello = net::hello(me);
    let mut batch = Vec::with_capacity(net::BATCH);
    loop {
        // A reader that is not there yet (or whose file is unusable) is retried.
        let mut w = match LinkWriter::open(&path) {
            Ok(w) => w,
            Err(_) => {
                if !net::drop_queued(&rx) {
                    return;
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(300));
                continue;
            }
        };
        backoff = Duration::from_millis(20);
        if w.write_all(&hello, WRITE_TIMEOUT).is_err() {
            continue;
        }
        loop {
            if !net::next_batch(&rx, &mut batch) {
                return;
            }
            let sent = batch.iter().try_for_each(|f| w.write_all(f, WRITE_TIMEOUT));
            batch.clear();
            match sent {
                Ok(()) => {}
                // The reader saw a malformed frame: a new session, hello first.
                Err(LinkError::Reset) => {
                    w.new_session();
                    if w.write_all(&hello, WRITE_TIMEOUT).is_err() {
                        break;
                    }
                }
                // Abandoned (a new reader), timed out (paused, dead): open the path again
                // (a new session there), dropping what was queued meanwhile.
                Err(_) => {
                    if !net::drop_queued(&rx) {
                        return;
                    }
                    break;
                }
            }
        }
    }
}

/// Makes the links `peer -> me` in `dir` (replacing any an earlier incarnation left) and
/// starts a receiver thread on each, sending every decoded message to `events`.
pub fn listen(
    dir: &Path,
    me: Rank,
    world: usize,
    events: Sender<Inbound>,
) -> Result<(), LinkError> {
    std::fs::create_dir_all(dir).map_err(|source| LinkError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for peer in (0..world).filter(|&p| p != me) {
        let link = LinkReader::create(&link_path(dir, peer, me), LINK_CAPACITY)?;
        let events = events.clone();
        let _ = std::thread::Builder::new()
            .name(format!("ddp-recv-{peer}"))
            .spawn(move || receive(link, peer, world, events));
    }
    Ok(())
}

/// A link read as a byte stream, for [`net::read_frame`]; remembers why it stopped.
struct LinkStream<'a> {
    link: &'a mut LinkReader,
    error: Option<LinkError>,
}

impl std::io::Read for LinkStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let got = self.link.readable(1, buf.len(), READ_WAIT).map(|got| {
                buf[..got.len()].copy_from_slice(got);
                got.len()
            });
            match got {
                Ok(n) => {
                    self.link.consume(n);
                    return Ok(n);
                }
                // A writer paused between frames or mid-frame: keep waiting, as a socket
                // read would, while the link is still this reader's.
                Err(LinkError::Timeout(_)) if self.link.is_current() => continue,
                Err(e) => {
                    self.error = Some(e);
                    return Err(std::io::ErrorKind::ConnectionReset.into());
                }
            }
        }
    }
}

fn receive(mut link: LinkReader, peer: Rank, world: usize, events: Sender<Inbound>) {
    let mut body = Vec::new();
    loop {
        // Each session opens with the writer's hello.
        let mut hello = [0u8; 12];
        match read_exact(&mut link, &mut hello, READ_WAIT) {
            Ok(()) => {}
            Err(LinkError::Timeout(_)) if !link.is_current() => return,
            Err(LinkError::Timeout(_)) | Err(LinkError::Reset) => continue,
            Err(_) => return,
        }
        if net::hello_rank(&hello, world) != Some(peer) {
            let _ = link.resync(WRITE_TIMEOUT);
            continue;
        }
        loop {
            let mut stream = LinkStream {
                link: &mut link,
                error: None,
            };
            match net::read_frame(&mut stream, &mut body) {
                Some(msg) => {
                    if events.send(Inbound { from: peer, msg }).is_err() {
                        return;
                    }
                }
                None => {
                    // A new session: start over at its hello. A malformed frame: ask the
                    // writer for a new session first.
                    if stream.error.is_none() {
                        let _ = link.resync(WRITE_TIMEOUT);
                    }
                    break;
                }
            }
        }
    }
}
