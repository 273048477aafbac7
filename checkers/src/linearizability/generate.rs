//! A generator of large keyed cas-register histories, linearizable by construction.

use crate::history::{History, Op, OpType, Process};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// The value a corrupt read returns: never written by any op, so the read cannot be
/// explained by any order of the ops.
pub const CORRUPT_VALUE: i64 = 6;

#[derive(Clone)]
struct InFlight {
    process: u64,
    f: &'static str,
    key: usize,
    arg: Value,
    /// Will complete `info`; `applies` says whether it took effect anyway.
    info: bool,
    applies: bool,
    /// Set once linearized: the completion's type and value.
    done: Option<(OpType, Value)>,
}

/// The simulation behind [`generate_keyed_cas_history`]: hands each op to `emit` in
/// history order.
fn simulate_keyed_cas(
    seed: u64,
    events: usize,
    keys: usize,
    processes: usize,
    info_fraction: f64,
    corrupt: bool,
    mut emit: impl FnMut(Op) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let keys = keys.max(1);
    let processes = processes.max(1);
    let mut registers: Vec<Value> = vec![Value::Null; keys];
    let mut slots: Vec<Option<InFlight>> = vec![None; processes];
    let mut slot_process: Vec<u64> = (0..processes as u64).collect();
    let mut next_process = processes as u64;
    // Ops emitted so far; the corrupt read is the first ok read from the middle on.
    // Event times: 1 µs apart, so explanations can speak in seconds.
    let mut emitted: u64 = 0;
    let mut corrupted = !corrupt;
    let mut push = |op: Op| -> std::io::Result<()> {
        let mut op = op.at((emitted + 1) * 1_000);
        op.index = emitted;
        if !corrupted && emitted >= events as u64 / 2 && op.op_type == OpType::Ok && op.f == "read"
        {
            op.value = json!(CORRUPT_VALUE);
            corrupted = true;
        }
        emitted += 1;
        emit(op)
    };
    let mut count = 0usize;
    while count < events {
        count += 1;
        let s = rng.gen_range(0..processes);
        match slots[s].take() {
            None => {
                let key = rng.gen_range(0..keys);
                let (f, arg) = match rng.gen_range(0..3) {
                    0 => ("read", Value::Null),
                    1 => ("write", json!(rng.gen_range(1..=5))),
                    _ => ("cas", json!([rng.gen_range(1..=5), rng.gen_range(1..=5)])),
                };
                let info = rng.gen_bool(info_fraction.clamp(0.0, 1.0));
                let process = slot_process[s];
                let op = Op::new(Process::Client(process), OpType::Invoke, f, arg.clone())
                    .with_key(format!("k{key}"));
                push(op)?;
                let applies = !info || rng.gen_bool(0.5);
                slots[s] = Some(InFlight {
                    process,
                    f,
                    key,
                    arg,
                    info,
                    applies,
                    done: None,
                });
            }
            Some(mut op) if op.done.is_none() => {
                // The linearization point.
                let reg = &mut registers[op.key];
                let done = match op.f {
                    "read" => (OpType::Ok, reg.clone()),
                    "write" => {
                        if op.applies {
                            *reg = op.arg.clone();
                        }
                        (OpType::Ok, op.arg.clone())
                    }
                    _ => {
                        let (expected, new) = (op.arg[0].clone(), op.arg[1].clone());
                        if *reg == expected {
                            if op.applies {
                                *reg = new;
                            }
                            (OpType::Ok, op.arg.clone())
                        } else {
                            (OpType::Fail, op.arg.clone())
                        }
                    }
                };
                op.done = Some(done);
                slots[s] = Some(op);
            }
            Some(op) => {
                let (mut t, mut v) = op.done.clone().unwrap_or((OpType::Info, Value::Null));
                if op.info {
                    t = OpType::Info;
                    v = op.arg.clone();
                    slot_process[s] = next_process;
                    next_process += 1;
                }
                let c = Op::new(Process::Client(op.process), t, op.f, v)
                    .with_key(format!("k{}", op.key));
                push(c)?;
            }
        }
    }
    Ok(())
}

/// Generates a keyed cas-register history of about `events` events by simulating real
/// registers: each op takes effect at a random point between its invoke and completion,
/// so the history is linearizable by construction.
///
/// `keys` registers (`k0`, `k1`, ...), `processes` concurrent clients, values 1–5, reads,
/// writes and cas in equal shares. A fraction `info_fraction` of ops end `info` (half of
/// them took effect, half did not); the client then continues as a fresh process, as in
/// Jepsen. A cas whose compare fails ends `fail`. Ops still open at the end stay pending.
/// With `corrupt`, one `ok` read near the middle returns `CORRUPT_VALUE` instead, which
/// makes the history not linearizable.
pub fn generate_keyed_cas_history(
    seed: u64,
    events: usize,
    keys: usize,
    processes: usize,
    info_fraction: f64,
    corrupt: bool,
) -> History {
    let mut ops: Vec<Op> = Vec::with_capacity(events);
    let collected = simulate_keyed_cas(
        seed,
        events,
        keys,
        processes,
        info_fraction,
        corrupt,
        |op| {
            ops.push(op);
            Ok(())
        },
    );
    // Collecting cannot fail, and every op was built from a well-formed invoke/completion
    // sequence, so pairing cannot fail; fall back to an empty history rather than panic.
    if collected.is_err() {
        return History::default();
    }
    History::new(ops).unwrap_or_default()
}

/// Writes the history [`generate_keyed_cas_history`] builds as JSON Lines to `path`,
/// streaming (it is never held in memory): the input of the 1M and 10M-event benches.
pub fn write_keyed_cas_history(
    path: &std::path::Path,
    seed: u64,
    events: usize,
    keys: usize,
    processes: usize,
    info_fraction: f64,
    corrupt: bool,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    simulate_keyed_cas(
        seed,
        events,
        keys,
        processes,
        info_fraction,
        corrupt,
        |op| crate::history::write::write_op_line(&mut out, &op),
    )?;
    out.flush()
}
