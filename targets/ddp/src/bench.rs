//! `splitbrain-ddp --bench`: all-reduce bus bandwidth over loopback TCP and over
//! shared-memory links next to this machine's memory-copy bandwidth, and the step time
//! of the vectorized forward/backward against the scalar loop.
//!
//! Bus bandwidth as nccl-tests defines it: `algbw = bytes / time`, `busbw = algbw ×
//! 2(n−1)/n` (the share of the data each rank must move in a ring all-reduce), so it is
//! comparable with the bandwidth of the links, here loopback TCP and memory.

use crate::core::ring::{BucketRing, ReduceMode};
use crate::core::{Chunk, Msg};
use crate::model::{Gemm, Mlp};
use crate::net::{self, PeerNet};
use crate::shm::{
    self, direct::PhaseTimes, direct::ShmGroup, ring::ShmRing, LinkReader, LinkWriter,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// Bytes copied per second by `copy_from_slice` of a `bytes`-sized buffer (best of a few).
pub fn memcpy_bandwidth(bytes: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    bytes as f64 / best
}

/// Largest bucket the benchmark all-reduces as one ring: a message is cut into buckets
/// of at most this many f32 (1 MiB), all in flight at once, as DDP's bucketing does, so
/// transfer, summation and forwarding of different buckets overlap.
pub const BENCH_BUCKET_FLOATS: usize = 1 << 18;

/// How the benchmark's ranks exchange the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchTransport {
    /// The node's frames over loopback TCP ([`crate::net`]).
    Tcp,
    /// The node's frames through shared-memory links ([`crate::shm::frames`]): what a
    /// cluster with `--transport shm` does.
    #[value(name = "shm")]
    ShmFrames,
    /// The ring straight over shared-memory links ([`crate::shm::ring`]): each rank
    /// reduces from its predecessor's bytes into the bytes for its successor.
    ShmRing,
    /// The direct all-reduce over one shared mapping ([`crate::shm::direct`]): gradients
    /// already in the ranks' slots, the ranks sum chunks from all slots, taking them from
    /// a shared counter; the result is read where it is.
    ShmDirect,
    /// As `ShmDirect`, but from and to each rank's private buffer: the gradient copied
    /// into the slot and the result copied out are timed too.
    #[value(name = "shm-copy")]
    ShmDirectCopy,
}

impl BenchTransport {
    /// The label of the benchmark's rows.
    pub fn label(self) -> &'static str {
        match self {
            BenchTransport::Tcp => "tcp",
            BenchTransport::ShmFrames => "shm",
            BenchTransport::ShmRing => "shm-ring",
            BenchTransport::ShmDirect => "shm-direct",
            BenchTransport::ShmDirectCopy => "shm-copy",
        }
    }
}

/// A fresh directory for one benchmark's links (under `/dev/shm` where there is one),
/// removed when dropped.
struct LinkDir(std::path::PathBuf);

impl LinkDir {
    fn new() -> Option<LinkDir> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = shm::default_root().join(format!(
            "splitbrain-ddp-bench-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).ok()?;
        Some(LinkDir(dir))
    }
}

impl Drop for LinkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Seconds per all-reduce of `floats` f32 among `world` ranks (threads of this process,
/// each with its own connections or mappings), the slowest rank's time, median of
/// `iters`. `None` if the ranks could not connect or a round timed out.
pub fn allreduce_seconds(
    world: usize,
    floats: usize,
    iters: usize,
    transport: BenchTransport,
) -> Option<f64> {
    let dir = LinkDir::new()?;
    let per_rank = match transport {
        BenchTransport::ShmRing => ring_ranks(world, floats, iters, &dir)?,
        BenchTransport::ShmDirect | BenchTransport::ShmDirectCopy => {
            group_ranks(world, floats, iters, transport, &dir)?
        }
        BenchTransport::Tcp | BenchTransport::ShmFrames => {
            message_ranks(world, floats, iters, transport, &dir)?
        }
    };
    let mut per_iter = vec![0.0f64; iters];
    for h in per_rank {
        let times = h.join().ok()??;
        for (slot, t) in per_iter.iter_mut().zip(times) {
            *slot = slot.max(t);
        }
    }
    per_iter.sort_by(f64::total_cmp);
    per_iter.get(iters / 2).copied()
}

/// The benchmark's buckets of a message of `floats` f32.
fn bench_buckets(floats: usize) -> Vec<std::ops::Range<usize>> {
    (0..floats.div_ceil(BENCH_BUCKET_FLOATS))
        .map(|b| b * BENCH_BUCKET_FLOATS..((b + 1) * BENCH_BUCKET_FLOATS).min(floats))
        .collect()
}

type RankThread = std::thread::JoinHandle<Option<Vec<f64>>>;

/// This rank's gradient (seeded by the rank).
fn gradient(rank: usize, floats: usize) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(rank as u64);
    (0..floats).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

/// The ranks of the message path: the node's `BucketRing` per bucket, `Msg::Chunk`
/// frames to the successor over TCP or shared-memory links.
fn message_ranks(
    world: usize,
    floats: usize,
    iters: usize,
    transport: BenchTransport,
    dir: &LinkDir,
) -> Option<Vec<RankThread>> {
    let mut nets = Vec::new();
    if transport == BenchTransport::Tcp {
        let listeners: Vec<TcpListener> = (0..world)
            .map(|_| TcpListener::bind("127.0.0.1:0").ok())
            .collect::<Option<_>>()?;
        let addrs: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.to_string()).ok())
            .collect::<Option<_>>()?;
        for (rank, listener) in listeners.into_iter().enumerate() {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || net::listen(listener, world, tx));
            let succ = (rank + 1) % world;
            nets.push((
                PeerNet::start(rank, world, &[(succ, addrs[succ].clone())]),
                rx,
            ));
        }
    } else {
        for rank in 0..world {
            let (tx, rx) = std::sync::mpsc::channel();
            shm::frames::listen(&dir.0, rank, world, tx).ok()?;
            let succ = (rank + 1) % world;
            nets.push((shm::frames::start(rank, world, &dir.0, &[succ]), rx));
        }
    }
    let barrier = Arc::new(Barrier::new(world));
    let buckets = bench_buckets(floats);
    let mut handles = Vec::new();
    for (rank, (net, rx)) in nets.into_iter().enumerate() {
        let succ = (rank + 1) % world;
        let barrier = barrier.clone();
        let buckets = buckets.clone();
        handles.push(std::thread::spawn(move || -> Option<Vec<f64>> {
            let grad = gradient(rank, floats);
            let mut times = Vec::new();
            // One warm-up round opens the connections.
            for it in 0..=iters {
                barrier.wait();
                let t = Instant::now();
                let mut rings: Vec<BucketRing> = buckets
                    .iter()
                    .map(|b| BucketRing::new(rank, world, b.len(), ReduceMode::Ring))
                    .collect();
                let send = |bucket: usize, sends: Vec<(u32, Vec<f32>)>| {
                    for (round, data) in sends {
                        let chunk = Chunk {
                            gen: it as u64,
                            step: 0,
                            bucket: bucket as u32,
                            round,
                            data,
                        };
                        net.send(succ, &Msg::Chunk(chunk));
                    }
                };
                for (b, range) in buckets.iter().enumerate() {
                    send(b, rings[b].set_local(grad[range.clone()].to_vec()));
                }
                let mut left = rings.iter().filter(|r| r.result().is_none()).count();
                while left > 0 {
                    let m = rx.recv_timeout(Duration::from_secs(20)).ok()?;
                    if let Msg::Chunk(c) = m.msg {
                        let Some(ring) = rings
                            .get_mut(c.bucket as usize)
                            .filter(|_| c.gen == it as u64)
                        else {
                            continue;
                        };
                        let sends = ring.receive(c.round, c.data);
                        let done = ring.result().is_some();
                        send(c.bucket as usize, sends);
                        if done {
                            left -= 1;
                        }
                    }
                }
                if it > 0 {
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            // Let the last frames drain before the sockets go.
            barrier.wait();
            Some(times)
        }));
    }
    Some(handles)
}

/// The ranks of the ring over links: [`ShmRing::allreduce`] of the whole message in
/// place, in buckets of [`BENCH_BUCKET_FLOATS`] as the message path.
fn ring_ranks(world: usize, floats: usize, iters: usize, dir: &LinkDir) -> Option<Vec<RankThread>> {
    let capacity = shm::ring::link_capacity(BENCH_BUCKET_FLOATS, world);
    let readers: Vec<LinkReader> = (0..world)
        .map(|r| {
            LinkReader::create(
                &shm::link_path(&dir.0, (r + world - 1) % world, r),
                capacity,
            )
            .ok()
        })
        .collect::<Option<_>>()?;
    let barrier = Arc::new(Barrier::new(world));
    let mut handles = Vec::new();
    for (rank, from_pred) in readers.into_iter().enumerate() {
        let to = shm::link_path(&dir.0, rank, (rank + 1) % world);
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || -> Option<Vec<f64>> {
            let grad = gradient(rank, floats);
            let mut buf = grad.clone();
            let opened = LinkWriter::open(&to);
            // Every rank waits for the others here, also one whose link failed, so
            // none is left waiting at the barrier.
            barrier.wait();
            let mut ring = ShmRing {
                rank,
                world,
                from_pred,
                to_succ: opened.ok()?,
                timeout: Duration::from_secs(20),
            };
            let mut times = Vec::new();
            for it in 0..=iters {
                buf.copy_from_slice(&grad);
                barrier.wait();
                let t = Instant::now();
                ring.allreduce(&mut buf, BENCH_BUCKET_FLOATS, world).ok()?;
                if it > 0 {
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            Some(times)
        }));
    }
    Some(handles)
}

/// Rank 0's phase split of each timed all-reduce of the last `shm-direct`/`shm-copy` row.
static PHASES: Mutex<Vec<PhaseTimes>> = Mutex::new(Vec::new());

/// The ranks of the direct path: [`ShmGroup::allreduce`] of the whole message, chunks
/// cut per bucket of [`BENCH_BUCKET_FLOATS`] (the ring's summation order). For
/// `ShmDirect` the gradient is written into the slot before the clock starts (where
/// backward would write it) and the result is left in the mapping; `ShmDirectCopy` times
/// the copy in and the copy out as well.
fn group_ranks(
    world: usize,
    floats: usize,
    iters: usize,
    transport: BenchTransport,
    dir: &LinkDir,
) -> Option<Vec<RankThread>> {
    let path = dir.0.join("group");
    ShmGroup::create(&path, world, floats).ok()?;
    if let Ok(mut p) = PHASES.lock() {
        p.clear();
    }
    let copy = transport == BenchTransport::ShmDirectCopy;
    let barrier = Arc::new(Barrier::new(world));
    let mut handles = Vec::new();
    for rank in 0..world {
        let path = path.clone();
        let barrier = barrier.clone();
        let buckets = bench_buckets(floats);
        handles.push(std::thread::spawn(move || -> Option<Vec<f64>> {
            let grad = gradient(rank, floats);
            let mut buf = grad.clone();
            let opened = ShmGroup::open(&path, rank, Duration::from_secs(20));
            // Every rank waits for the others here, also one that could not map the
            // file, so none is left waiting at the barrier.
            barrier.wait();
            let mut group = opened.ok()?;
            let mut times = Vec::new();
            for it in 0..=iters {
                buf.copy_from_slice(&grad);
                if !copy {
                    group.input().copy_from_slice(&buf);
                }
                barrier.wait();
                let t = Instant::now();
                if copy {
                    group.input().copy_from_slice(&buf);
                }
                let reduced = group.allreduce(&buckets, world).ok()?;
                if copy {
                    reduced.copy_to(&mut buf);
                }
                let elapsed = t.elapsed().as_secs_f64();
                if it > 0 {
                    times.push(elapsed);
                    if rank == 0 {
                        if let Ok(mut p) = PHASES.lock() {
                            p.push(group.last);
                        }
                    }
                }
            }
            Some(times)
        }));
    }
    Some(handles)
}

/// Rank 0's median phase split of the last direct row, as a line under it.
fn print_phases() {
    let Ok(mut p) = PHASES.lock() else { return };
    if p.is_empty() {
        return;
    }
    p.sort_by_key(|t| t.wait_inputs + t.reduce + t.wait_sums);
    let m = p[p.len() / 2];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{:>10} rank 0: wait for inputs {:.2} ms, sum the chunks it took {:.2} ms, wait for the others' chunks {:.2} ms",
        "",
        ms(m.wait_inputs),
        ms(m.reduce),
        ms(m.wait_sums)
    );
}

/// Seconds per forward + backward of a `batch` on `mlp` with `kind` (median of `iters`).
pub fn step_seconds(mlp: &Mlp, batch: usize, kind: Gemm, iters: usize) -> f64 {
    let params = mlp.init(1);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let x: Vec<f32> = (0..batch * mlp.input_width())
        .map(|_| rng.gen_range(-1.0..1.0))
        .collect();
    let y: Vec<u32> = (0..batch)
        .map(|_| rng.gen_range(0..mlp.classes() as u32))
        .collect();
    let mut grad = vec![0.0; params.len()];
    let mut times: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let t = Instant::now();
            let (_, acts) = mlp.forward(kind, &params, &x, &y);
            mlp.backward(kind, &params, &acts, &y, &mut grad, |_, _| {});
            std::hint::black_box(&grad);
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Measures and prints one row of the all-reduce table.
pub fn print_row(transport: BenchTransport, world: usize, mib: usize, mem: f64) {
    let floats = mib * (1 << 20) / 4;
    let iters = if mib >= 16 { 3 } else { 5 };
    let label = transport.label();
    match allreduce_seconds(world, floats, iters, transport) {
        Some(t) => {
            let alg = (mib as f64 * 1024.0 * 1024.0) / t;
            let bus = alg * 2.0 * (world as f64 - 1.0) / world as f64;
            println!(
                "{label:>10} {world:>5} {mib:>8} {:>11.2} {:>12.3} {:>12.3} {:>9.1}%",
                t * 1e3,
                alg / 1e9,
                bus / 1e9,
                100.0 * bus / mem
            );
        }
        None => println!("{label:>10} {world:>5} {mib:>8}   (did not complete)"),
    }
    if matches!(
        transport,
        BenchTransport::ShmDirect | BenchTransport::ShmDirectCopy
    ) {
        print_phases();
    }
}

/// Runs the benchmark and prints its tables: all rank counts, sizes and transports
/// where `ranks`, `mib` and `transports` are empty, and then the kernel table too; only
/// those given otherwise.
pub fn run(ranks: &[usize], mib: &[usize], transports: &[BenchTransport]) {
    let whole = ranks.is_empty() && mib.is_empty() && transports.is_empty();
    let all = [
        BenchTransport::Tcp,
        BenchTransport::ShmFrames,
        BenchTransport::ShmRing,
        BenchTransport::ShmDirect,
        BenchTransport::ShmDirectCopy,
    ];
    let transports = if transports.is_empty() {
        &all[..]
    } else {
        transports
    };
    let ranks = if ranks.is_empty() {
        &[2, 4, 8][..]
    } else {
        ranks
    };
    let sizes = if mib.is_empty() {
        &[1, 4, 16, 64][..]
    } else {
        mib
    };
    let mem = memcpy_bandwidth(64 << 20);
    println!("memcpy bandwidth (64 MiB buffer): {:.2} GB/s", mem / 1e9);
    println!();
    println!("all-reduce, 1 MiB buckets (median of 3-5; busbw = algbw x 2(n-1)/n)");
    println!("  tcp: the node's frames over loopback TCP; shm: the node's frames through shared-memory links (--transport shm);");
    println!("  shm-ring: the ring straight over shared-memory links, reducing from the peer's bytes in place;");
    println!("  shm-direct: one shared mapping, gradients in it, ranks sum chunks from all ranks' slots, result read in place;");
    println!("  shm-copy: shm-direct from and to private buffers (copy in and copy out timed)");
    println!(
        "{:>10} {:>5} {:>8} {:>11} {:>12} {:>12} {:>10}",
        "transport", "ranks", "MiB", "time ms", "algbw GB/s", "busbw GB/s", "% memcpy"
    );
    for &transport in transports {
        for &world in ranks {
            for &mib in sizes {
                print_row(transport, world, mib, mem);
            }
        }
    }
    if !whole {
        return;
    }
    println!();
    println!("forward + backward per micro-batch (median of 20)");
    println!(
        "{:>18} {:>7} {:>8} {:>12} {:>12} {:>8}",
        "model", "params", "batch", "scalar ms", "sgemm ms", "speedup"
    );
    for (hidden, batch) in [
        (vec![128, 128], 16usize),
        (vec![256, 256], 16),
        (vec![256, 256], 64),
        (vec![1024, 1024], 64),
    ] {
        let mut widths = vec![32];
        widths.extend(&hidden);
        widths.push(10);
        let mlp = Mlp::new(widths.clone());
        let scalar = step_seconds(&mlp, batch, Gemm::Scalar, 20);
        let simd = step_seconds(&mlp, batch, Gemm::Simd, 20);
        let name = widths
            .iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>()
            .join("-");
        println!(
            "{name:>18} {:>7} {batch:>8} {:>12.3} {:>12.3} {:>7.1}x",
            mlp.num_params(),
            scalar * 1e3,
            simd * 1e3,
            scalar / simd
        );
    }
}
