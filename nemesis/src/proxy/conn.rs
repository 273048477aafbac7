//! One proxied connection: two byte directions, each a reader (gate, loss, delay stamp)
//! feeding a writer (wait for due time, gate again, bandwidth pacing) through a bounded
//! queue, so a stalled or slow direction pushes back on its sender like TCP would.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{DirCounters, Link, LinkState, LossMode, RTO_MAX_BACKOFFS, RTO_MIN};
use crate::network::{CutMode, FlowFaults};

/// Read size per chunk.
const CHUNK: usize = 16 * 1024;
/// Chunks queued per direction (delay in flight, or stalled) before the reader waits.
const QUEUE: usize = 64;
/// Bytes per packet a [`LossMode::Retransmit`] piece is counted in (an Ethernet MSS).
const MSS: usize = 1448;
/// How long the proxy waits to reach the real node.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Which byte direction of a link.
#[derive(Clone, Copy)]
enum Dir {
    /// Dialing node to dialed node.
    Forward,
    /// Dialed node back to dialing node.
    Backward,
}

impl Dir {
    /// The index of this direction's counters in [`Link::stats`].
    fn index(self) -> usize {
        match self {
            Dir::Forward => 0,
            Dir::Backward => 1,
        }
    }

    fn of(self, s: &LinkState) -> &FlowFaults {
        match self {
            Dir::Forward => &s.forward,
            Dir::Backward => &s.backward,
        }
    }
}

/// How one side of a direction ended.
#[derive(PartialEq)]
enum Outcome {
    /// Clean end of stream.
    Done,
    /// A blocked byte met a refusing cut: reset the connection.
    Reset,
    /// Told to stop (reset by the other direction, or mesh shutdown).
    Stopped,
}

/// Either this connection's reset flag or the mesh's shutdown flag.
#[derive(Clone)]
struct Stop {
    reset: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
}

impl Stop {
    /// Resolves when either flag is raised (or its owner is gone).
    async fn wait(&mut self) {
        tokio::select! {
            _ = self.reset.wait_for(|v| *v) => {}
            _ = self.shutdown.wait_for(|v| *v) => {}
        }
    }
}

/// Decrements the mesh's live-connection count when a connection task ends.
struct LiveGuard(Arc<AtomicUsize>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Closes a socket with RST instead of FIN, which is what a refusing peer looks like.
fn reset(stream: &TcpStream) {
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
}

pub(crate) async fn accept_loop(
    listener: TcpListener,
    link: Arc<Link>,
    mut shutdown: watch::Receiver<bool>,
    live: Arc<AtomicUsize>,
) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.wait_for(|v| *v) => return,
        };
        let client = match accepted {
            Ok((s, _)) => s,
            Err(_) => {
                // e.g. out of file descriptors: back off instead of spinning
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if link.state.borrow().forward.cut == Some(CutMode::Refuse) {
            reset(&client);
            continue;
        }
        let id = link.connections.fetch_add(1, Ordering::SeqCst);
        live.fetch_add(1, Ordering::SeqCst);
        let guard = LiveGuard(live.clone());
        let link = link.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _guard = guard;
            serve(client, link, id, shutdown).await;
        });
    }
}

async fn serve(client: TcpStream, link: Arc<Link>, id: u64, mut shutdown: watch::Receiver<bool>) {
    let upstream = tokio::select! {
        r = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(link.target)) => r,
        _ = shutdown.wait_for(|v| *v) => return,
    };
    let upstream = match upstream {
        Ok(Ok(s)) => s,
        _ => {
            // the real node is down: the dialing node sees a reset, as it would directly
            reset(&client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_r, client_w) = client.into_split();
    let (up_r, up_w) = upstream.into_split();
    let (reset_tx, reset_rx) = watch::channel(false);
    let reset_tx = Arc::new(reset_tx);
    let stop = Stop {
        reset: reset_rx,
        shutdown,
    };
    let seed = link.seed ^ id.wrapping_mul(0xd1b5_4a32_d192_ed03);
    let forward = pump(
        client_r,
        up_w,
        Dir::Forward,
        link.loss_mode,
        link.state.subscribe(),
        ChaCha8Rng::seed_from_u64(seed),
        reset_tx.clone(),
        stop.clone(),
        &link,
    );
    let backward = pump(
        up_r,
        client_w,
        Dir::Backward,
        link.loss_mode,
        link.state.subscribe(),
        ChaCha8Rng::seed_from_u64(seed ^ 1),
        reset_tx,
        stop,
        &link,
    );
    tokio::join!(forward, backward);
}

#[allow(clippy::too_many_arguments)]
async fn pump(
    src: OwnedReadHalf,
    dst: OwnedWriteHalf,
    dir: Dir,
    loss_mode: LossMode,
    state: watch::Receiver<LinkState>,
    rng: ChaCha8Rng,
    reset_tx: Arc<watch::Sender<bool>>,
    stop: Stop,
    link: &Link,
) {
    let (tx, rx) = mpsc::channel(QUEUE);
    // a reset on either side must stop the other side (and the other direction) at once
    let raise = |out: &Outcome| {
        if *out == Outcome::Reset {
            reset_tx.send_replace(true);
        }
    };
    let (reader_state, reader_stop) = (state.clone(), stop.clone());
    let reader = async {
        let r = read_side(
            src,
            tx,
            dir,
            loss_mode,
            reader_state,
            rng,
            reader_stop,
            link,
        )
        .await;
        raise(&r.0);
        r
    };
    let writer = async {
        let w = write_side(dst, rx, dir, state, stop, link).await;
        raise(&w.0);
        w
    };
    let ((_, src), (_, dst)) = tokio::join!(reader, writer);
    if *reset_tx.borrow() {
        reset(src.as_ref());
        reset(dst.as_ref());
    }
}

/// Waits until `dir` is not black-holed. Returns None if the bytes may flow, Some(outcome)
/// if the reader or writer must end instead.
async fn gate(
    state: &mut watch::Receiver<LinkState>,
    dir: Dir,
    stop: &mut Stop,
) -> Option<Outcome> {
    loop {
        let cut = dir.of(&state.borrow_and_update()).cut;
        match cut {
            None => return None,
            Some(CutMode::Refuse) => return Some(Outcome::Reset),
            Some(CutMode::Blackhole) => {
                tokio::select! {
                    r = state.changed() => if r.is_err() { return Some(Outcome::Stopped) },
                    _ = stop.wait() => return Some(Outcome::Stopped),
                }
            }
        }
    }
}

/// Drops whole newline-terminated messages with probability `loss`, deciding at the
/// first byte of each message, so surviving messages stay intact.
fn filter(
    data: &[u8],
    loss: f64,
    rng: &mut ChaCha8Rng,
    dropping: &mut bool,
    line_start: &mut bool,
) -> Vec<u8> {
    if loss <= 0.0 && !*dropping {
        if let Some(&last) = data.last() {
            *line_start = last == b'\n';
        }
        return data.to_vec();
    }
    let mut out = Vec::with_capacity(data.len());
    for &b in data {
        if *line_start {
            *dropping = loss > 0.0 && rng.gen::<f64>() < loss;
            *line_start = false;
        }
        if !*dropping {
            out.push(b);
        }
        if b == b'\n' {
            *line_start = true;
        }
    }
    out
}

fn sample_delay(f: &FlowFaults, rng: &mut ChaCha8Rng) -> Duration {
    if f.jitter.is_zero() {
        return f.delay;
    }
    let j = f.jitter.as_secs_f64();
    let d = f.delay.as_secs_f64() + rng.gen_range(-j..=j);
    Duration::from_secs_f64(d.max(0.0))
}

/// How long a [`LossMode::Retransmit`] piece of `len` bytes is held back for lost packets:
/// zero if none of its ceil(len / MSS) packets is lost, else [`RTO_MIN`] doubled once per
/// lost retransmission (each lost with probability `loss` too), at most
/// [`RTO_MAX_BACKOFFS`] times.
fn retransmit_wait(len: usize, loss: f64, rng: &mut ChaCha8Rng) -> Duration {
    if loss <= 0.0 {
        return Duration::ZERO;
    }
    let packets = len.div_ceil(MSS).max(1);
    if !(0..packets).any(|_| rng.gen::<f64>() < loss) {
        return Duration::ZERO;
    }
    let (mut wait, mut rto) = (RTO_MIN, RTO_MIN);
    for _ in 0..RTO_MAX_BACKOFFS {
        if rng.gen::<f64>() >= loss {
            break;
        }
        rto *= 2;
        wait += rto;
    }
    wait
}

#[allow(clippy::too_many_arguments)]
async fn read_side(
    mut src: OwnedReadHalf,
    tx: mpsc::Sender<Chunk>,
    dir: Dir,
    loss_mode: LossMode,
    mut state: watch::Receiver<LinkState>,
    mut rng: ChaCha8Rng,
    mut stop: Stop,
    link: &Link,
) -> (Outcome, OwnedReadHalf) {
    let counters = &link.stats[dir.index()];
    let mut buf = vec![0u8; CHUNK];
    let (mut dropping, mut line_start) = (false, true);
    let mut last_due = Instant::now();
    loop {
        if let Some(end) = gate(&mut state, dir, &mut stop).await {
            return (end, src);
        }
        let n = tokio::select! {
            r = src.read(&mut buf) => match r {
                Ok(0) => return (Outcome::Done, src),
                // the dialing side reset: pass the reset on
                Err(_) => return (Outcome::Reset, src),
                Ok(n) => n,
            },
            _ = stop.wait() => return (Outcome::Stopped, src),
        };
        // a cut that came while this read was pending still holds these bytes back
        if let Some(end) = gate(&mut state, dir, &mut stop).await {
            return (end, src);
        }
        let read_at = Instant::now();
        let (faults, epoch) = {
            let st = state.borrow();
            (dir.of(&st).clone(), st.epochs[dir.index()])
        };
        let lines_in = count_lines(&buf[..n]);
        let (data, held) = match loss_mode {
            LossMode::Lines => {
                let kept = filter(
                    &buf[..n],
                    faults.loss,
                    &mut rng,
                    &mut dropping,
                    &mut line_start,
                );
                (kept, Duration::ZERO)
            }
            LossMode::Retransmit => (buf[..n].to_vec(), retransmit_wait(n, faults.loss, &mut rng)),
        };
        let lines_out = count_lines(&data);
        counters.lines.fetch_add(lines_in, Ordering::Relaxed);
        counters
            .lines_dropped
            .fetch_add(lines_in.saturating_sub(lines_out), Ordering::Relaxed);
        if lines_in > 0 {
            link.window_log(dir.index()).count_read(
                epoch,
                lines_in,
                lines_in.saturating_sub(lines_out),
            );
        }
        if data.is_empty() {
            continue;
        }
        let delayed = !faults.delay.is_zero() || !faults.jitter.is_zero();
        let due = (Instant::now() + sample_delay(&faults, &mut rng) + held).max(last_due);
        last_due = due;
        tokio::select! {
            r = tx.send(Chunk { due, data, read_at, delayed, stalled: !held.is_zero(), epoch }) => if r.is_err() { return (Outcome::Done, src) },
            _ = stop.wait() => return (Outcome::Stopped, src),
        }
    }
}

async fn write_side(
    mut dst: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Chunk>,
    dir: Dir,
    mut state: watch::Receiver<LinkState>,
    mut stop: Stop,
    link: &Link,
) -> (Outcome, OwnedWriteHalf) {
    let counters = &link.stats[dir.index()];
    loop {
        let Chunk {
            due,
            data,
            read_at,
            delayed,
            stalled,
            epoch,
        } = tokio::select! {
            m = rx.recv() => match m {
                Some(item) => item,
                None => {
                    let _ = dst.shutdown().await;
                    return (Outcome::Done, dst);
                }
            },
            _ = stop.wait() => return (Outcome::Stopped, dst),
        };
        // (a timer, even an expired one, costs about a millisecond of timer granularity)
        if due > Instant::now() {
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = stop.wait() => return (Outcome::Stopped, dst),
            }
        }
        if let Some(end) = gate(&mut state, dir, &mut stop).await {
            return (end, dst);
        }
        let bandwidth = dir.of(&state.borrow()).bandwidth;
        // pace in pieces of ~20 ms worth of bytes so a cap applies smoothly
        let piece = bandwidth.map_or(data.len(), |bps| ((bps / 50) as usize).max(1));
        for part in data.chunks(piece.max(1)) {
            let written = tokio::select! {
                r = dst.write_all(part) => r.is_ok(),
                _ = stop.wait() => return (Outcome::Stopped, dst),
            };
            if !written {
                // the receiving side is gone (e.g. killed): reset the sender, as TCP would
                return (Outcome::Reset, dst);
            }
            if let Some(bps) = bandwidth {
                let pause = Duration::from_secs_f64(part.len() as f64 / bps as f64);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stop.wait() => return (Outcome::Stopped, dst),
                }
            }
        }
        let held = read_at.elapsed();
        counters.record_written(held, delayed, stalled);
        let held_us = held.as_micros().min(u64::MAX as u128) as u64;
        link.window_log(dir.index())
            .count_written(epoch, held_us, delayed, stalled);
    }
}

/// A piece of the stream on its way through the link.
struct Chunk {
    /// When it may be written on.
    due: Instant,
    data: Vec<u8>,
    /// When it was read.
    read_at: Instant,
    /// Whether the link had a delay when it was read.
    delayed: bool,
    /// Whether it was held back for a retransmission ([`LossMode::Retransmit`]).
    stalled: bool,
    /// The fault window it was read in.
    epoch: usize,
}

fn count_lines(data: &[u8]) -> u64 {
    data.iter().filter(|&&b| b == b'\n').count() as u64
}

impl DirCounters {
    /// Counts a chunk written on after `held` in the proxy.
    fn record_written(&self, held: Duration, delayed: bool, stalled: bool) {
        let us = held.as_micros().min(u64::MAX as u128) as u64;
        self.chunks.fetch_add(1, Ordering::Relaxed);
        if delayed {
            self.delayed_chunks.fetch_add(1, Ordering::Relaxed);
            self.delayed_held_us.fetch_add(us, Ordering::Relaxed);
        }
        if stalled {
            self.stalled_chunks.fetch_add(1, Ordering::Relaxed);
            self.stalled_held_us.fetch_add(us, Ordering::Relaxed);
        }
        self.max_held_us.fetch_max(us, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retransmitted_piece_waits_whole_timeouts_and_no_loss_waits_nothing() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        assert_eq!(retransmit_wait(16 * 1024, 0.0, &mut rng), Duration::ZERO);
        // every packet lost: the longest backoff, 200 + 400 + ... + 6400 ms
        let worst = retransmit_wait(100, 1.0, &mut rng);
        assert_eq!(
            worst,
            Duration::from_millis(200 + 400 + 800 + 1600 + 3200 + 6400)
        );
        // otherwise a sum of doubling timeouts: 0, 200, 600, 1400, ...
        let allowed: Vec<Duration> = (0..=RTO_MAX_BACKOFFS + 1)
            .map(|k| RTO_MIN * ((1u32 << k) - 1))
            .collect();
        let waits: Vec<Duration> = (0..2000)
            .map(|_| retransmit_wait(MSS, 0.3, &mut rng))
            .collect();
        assert!(waits.iter().all(|w| allowed.contains(w)), "{waits:?}");
        let held = waits.iter().filter(|w| !w.is_zero()).count();
        // one packet each: about 30% held (binomial, 2000 draws: sd about 1%)
        assert!((500..700).contains(&held), "{held} of 2000 held");
        // a piece of many packets is held far more often than a one-packet piece
        let big = (0..2000)
            .filter(|_| !retransmit_wait(16 * MSS, 0.3, &mut rng).is_zero())
            .count();
        assert!(big > 1900, "{big} of 2000 sixteen-packet pieces held");
    }
}
