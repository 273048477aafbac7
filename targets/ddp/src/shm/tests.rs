//! Tests of the shared-memory links: order and wrap-around, the direct ring against the
//! one-process reference, the node's frames, and peers that die (a real second process,
//! killed by PID, for the writer's side).

use super::ring::{link_capacity, ShmRing};
use super::*;
use crate::core::ring::reference_average;
use crate::core::{Chunk, Msg};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::mpsc;

pub(super) const BOUND: Duration = Duration::from_secs(10);

pub(super) fn shm_dir() -> tempfile::TempDir {
    match tempfile::tempdir_in(default_root()) {
        Ok(d) => d,
        Err(_) => tempfile::tempdir().expect("a temporary directory"),
    }
}

/// Messages `[len u32][seq u32][bytes seeded by seq]` of random lengths.
fn message(seq: u32, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = rng.gen_range(0..3000usize);
    let mut m = Vec::with_capacity(8 + len);
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend((0..len).map(|i| (i as u32 ^ seq.wrapping_mul(2654435761)) as u8));
    m
}

/// Many messages through a ring much smaller than their total (so positions wrap many
/// times, and both sides wait on each other) arrive whole and in order.
#[test]
fn messages_arrive_in_order_and_whole_through_wrap_around() {
    let dir = shm_dir();
    let path = link_path(dir.path(), 0, 1);
    let mut r = LinkReader::create(&path, 4096).unwrap();
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut w = LinkWriter::open(&path).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            for seq in 0..5000u32 {
                w.write_all(&message(seq, &mut rng), BOUND).unwrap();
            }
        })
    };
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for seq in 0..5000u32 {
        let want = message(seq, &mut rng);
        let mut head = [0u8; 8];
        read_exact(&mut r, &mut head, BOUND).unwrap();
        let mut got = head.to_vec();
        got.resize(
            8 + u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize,
            0,
        );
        read_exact(&mut r, &mut got[8..], BOUND).unwrap();
        assert_eq!(got, want, "message {seq}");
    }
    writer.join().unwrap();
}

/// Seeded random gradients, one per rank.
pub(super) fn random_grads(world: usize, len: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..world)
        .map(|_| (0..len).map(|_| rng.gen_range(-1e3f32..1e3)).collect())
        .collect()
}

/// The one-process reference of every bucket of `bucket` f32, concatenated.
pub(super) fn bucketed_reference(grads: &[Vec<f32>], bucket: usize) -> Vec<f32> {
    let len = grads.first().map_or(0, |g| g.len());
    let mut want = Vec::new();
    for start in (0..len).step_by(bucket) {
        let end = (start + bucket).min(len);
        let parts: Vec<&[f32]> = grads.iter().map(|g| &g[start..end]).collect();
        want.extend(reference_average(&parts));
    }
    want
}

/// Every rank's result of the ring over links among `grads.len()` threads (each mapping
/// the links itself), all-reduced twice (the second reuses the links where the first
/// left them, and must give the same bits).
pub(super) fn ring_results(grads: &[Vec<f32>], bucket: usize) -> Vec<Vec<f32>> {
    let world = grads.len();
    let dir = shm_dir();
    let readers: Vec<LinkReader> = (0..world)
        .map(|r| {
            let path = link_path(dir.path(), (r + world - 1) % world, r);
            LinkReader::create(&path, link_capacity(bucket, world)).unwrap()
        })
        .collect();
    let handles: Vec<_> = readers
        .into_iter()
        .enumerate()
        .map(|(rank, from_pred)| {
            let mut buf = grads[rank].clone();
            let to = link_path(dir.path(), rank, (rank + 1) % world);
            std::thread::spawn(move || {
                let mut ring = ShmRing {
                    rank,
                    world,
                    from_pred,
                    to_succ: LinkWriter::open(&to).unwrap(),
                    timeout: BOUND,
                };
                let again = buf.clone();
                ring.allreduce(&mut buf, bucket, world).unwrap();
                let mut second = again;
                ring.allreduce(&mut second, bucket, world).unwrap();
                assert_eq!(bits(&buf), bits(&second));
                buf
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// The direct ring among `world` threads gives every rank the same bits, equal to the
/// one-process reference of each bucket.
#[test]
fn direct_ring_is_bit_identical_and_matches_the_reference() {
    for (world, len, bucket) in [(2, 1001, 300), (3, 5000, 1024), (4, 70_001, 16_384)] {
        let grads = random_grads(world, len, world as u64);
        let want = bucketed_reference(&grads, bucket);
        for (rank, r) in ring_results(&grads, bucket).iter().enumerate() {
            assert_eq!(bits(r), bits(&want), "world {world} rank {rank}");
        }
    }
}

pub(super) fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The node's messages cross shared-memory links as they cross TCP, a chunk larger
/// than the link included (it streams through).
#[test]
fn node_messages_cross_shared_memory_links() {
    let dir = shm_dir();
    let (tx, rx) = mpsc::channel();
    frames::listen(dir.path(), 0, 2, tx).unwrap();
    let net = frames::start(1, 2, dir.path(), &[0]);
    let big = Msg::Chunk(Chunk {
        gen: 1,
        step: 2,
        bucket: 3,
        round: 4,
        data: (0..(frames::LINK_CAPACITY / 2)).map(|i| i as f32).collect(),
    });
    for step in 0..20 {
        net.send(0, &Msg::Saved { gen: 1, step });
    }
    net.send(0, &big);
    for step in 0..20 {
        let got = rx.recv_timeout(BOUND).unwrap();
        assert_eq!(got.from, 1);
        assert_eq!(got.msg, Msg::Saved { gen: 1, step });
    }
    let got = rx.recv_timeout(BOUND).unwrap();
    assert_eq!(got.msg, big);
}

/// A writer whose reader is gone times out within its bound (never hangs); once a new
/// reader replaces the file, the writer is told to reopen it.
#[test]
fn writer_of_a_dead_reader_times_out_and_learns_of_its_replacement() {
    let dir = shm_dir();
    let path = link_path(dir.path(), 0, 1);
    let reader = LinkReader::create(&path, 4096).unwrap();
    let mut w = LinkWriter::open(&path).unwrap();
    drop(reader);
    w.write_all(&[7u8; 4096], BOUND).unwrap();
    let t = Instant::now();
    match w.write_all(&[7u8; 16], Duration::from_millis(200)) {
        Err(LinkError::Timeout(_)) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(t.elapsed() < BOUND, "the wait is bounded");
    let _fresh = LinkReader::create(&path, 4096).unwrap();
    match w.write_all(&[7u8; 16], BOUND) {
        Err(LinkError::Abandoned) => {}
        other => panic!("expected abandoned, got {other:?}"),
    }
    let mut again = LinkWriter::open(&path).unwrap();
    again.write_all(&[1, 2, 3, 4], BOUND).unwrap();
}

/// This test binary again, running only the ignored test `name` (a child process's entry
/// point) with `env` set to `path`.
pub(super) fn spawn_child(name: &str, env: &str, path: &Path) -> std::process::Child {
    let exe = std::env::current_exe().unwrap();
    std::process::Command::new(exe)
        .args([name, "--exact", "--ignored", "--nocapture"])
        .env(env, path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Environment variable that makes [`child_writer`] act: the link path it writes to.
const CHILD_ENV: &str = "SPLITBRAIN_DDP_SHM_CHILD";

/// Not a test: the second process of [`a_killed_writer_costs_a_bounded_wait_and_a_restarted_one_resets`]
/// (run with `--ignored --exact`). Writes half a message, says so, then waits to be killed.
#[test]
#[ignore = "entry point of a child process, run by another test"]
fn child_writer() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut w = LinkWriter::open(Path::new(&path)).unwrap();
    w.write_all(&[0xAB; 1000], BOUND).unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

/// A writer process killed (SIGKILL, by PID) half way through a message: the reader's
/// wait for the rest returns `Timeout` within its bound; a writer that then attaches
/// starts a new session, which the reader sees as `Reset` before its bytes.
#[test]
fn a_killed_writer_costs_a_bounded_wait_and_a_restarted_one_resets() {
    let dir = shm_dir();
    let path = link_path(dir.path(), 1, 0);
    let mut r = LinkReader::create(&path, 1 << 16).unwrap();
    let mut child = spawn_child("shm::tests::child_writer", CHILD_ENV, &path);
    // The first half crosses from the other process.
    let mut half = vec![0u8; 1000];
    let got = read_exact(&mut r, &mut half, BOUND);
    // Killed by its PID, whatever the read gave, so no child outlives the test.
    let _ = child.kill();
    let _ = child.wait();
    got.unwrap();
    assert_eq!(half, vec![0xAB; 1000]);
    let t = Instant::now();
    let mut rest = [0u8; 1000];
    match read_exact(&mut r, &mut rest, Duration::from_millis(300)) {
        Err(LinkError::Timeout(_)) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(t.elapsed() < BOUND, "the wait is bounded");
    let mut w = LinkWriter::open(&path).unwrap();
    w.write_all(b"fresh", BOUND).unwrap();
    let mut fresh = [0u8; 5];
    match read_exact(&mut r, &mut fresh, BOUND) {
        Err(LinkError::Reset) => {}
        other => panic!("expected a reset, got {other:?}"),
    }
    read_exact(&mut r, &mut fresh, BOUND).unwrap();
    assert_eq!(&fresh, b"fresh");
}
