//! Convergence workloads for eventually consistent targets (Bayou): `set`, `booking` and
//! `counter`. Updates go to any replica; after the heal, every replica is read for every key
//! in rounds until two rounds agree (see `controller::converge`), and the history is judged
//! by the eventual-consistency checkers: convergence, set analysis, committed-prefix
//! stability, session guarantees and the booking invariants.

use super::{KeyRotation, OpGenerator, Workload, WorkloadOptions};
use crate::check_options::CheckOptions;
use crate::systems::Invocation;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::eventual::{
    BookingChecker, CommittedPrefixChecker, ConvergenceChecker, EventualDataType,
    SessionGuaranteesChecker, SetFullChecker,
};
use splitbrain_checkers::Checker;
use std::collections::BTreeSet;

/// Rooms of one booking day.
pub const BOOKING_ROOMS: u64 = 3;
/// Slots per room and day.
pub const BOOKING_SLOTS: u64 = 8;
/// Days open for booking at once: few, so reservations contend for the same slots.
const BOOKING_ACTIVE_DAYS: usize = 2;
/// Ops per day before the next day opens: about twice as many requests as slots.
const BOOKING_OPS_PER_DAY: usize = 4 * (BOOKING_ROOMS * BOOKING_SLOTS) as usize;

/// The checkers of one eventual-consistency workload.
pub fn checkers_for(kind: EventualDataType) -> Vec<Box<dyn Checker>> {
    let mut out: Vec<Box<dyn Checker>> = vec![Box::new(ConvergenceChecker::new(kind))];
    match kind {
        EventualDataType::Set => {
            out.push(Box::new(SetFullChecker));
            out.push(Box::new(CommittedPrefixChecker));
        }
        EventualDataType::Booking => {
            out.push(Box::new(BookingChecker));
            out.push(Box::new(CommittedPrefixChecker));
        }
        EventualDataType::Counter => {}
    }
    out.push(Box::new(SessionGuaranteesChecker::new(kind)));
    out
}

/// Keys handed out so far, for the final reads of every one of them.
#[derive(Debug, Clone)]
struct UsedKeys {
    rotation: KeyRotation,
    used: BTreeSet<u64>,
    prefix: &'static str,
}

impl UsedKeys {
    fn new(active: usize, ops_per_key: usize, prefix: &'static str) -> UsedKeys {
        UsedKeys {
            rotation: KeyRotation::new(active, ops_per_key),
            used: BTreeSet::new(),
            prefix,
        }
    }

    fn pick(&mut self, rng: &mut ChaCha8Rng) -> Value {
        let k = self.rotation.pick(rng);
        self.used.insert(k);
        json!(format!("{}{k}", self.prefix))
    }

    fn final_reads(&self) -> Vec<Invocation> {
        self.used
            .iter()
            .map(|k| Invocation {
                f: "read".into(),
                key: Some(json!(format!("{}{k}", self.prefix))),
                value: Value::Null,
            })
            .collect()
    }
}

fn read(key: Value) -> Invocation {
    Invocation {
        f: "read".into(),
        key: Some(key),
        value: Value::Null,
    }
}

/// `set`: add unique elements to per-key sets at any replica, read whole sets.
pub struct SetWorkload;

impl Workload for SetWorkload {
    fn name(&self) -> &'static str {
        "set"
    }
    fn description(&self) -> &'static str {
        "add unique elements to per-key sets at any replica, read them back; converged, nothing lost, committed prefix stable, session guarantees"
    }
    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(SetGenerator {
            keys: UsedKeys::new(opts.active_keys, opts.ops_per_key, "k"),
            next_element: 0,
        })
    }
    fn checkers(&self, _check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        Ok(checkers_for(EventualDataType::Set))
    }
}

struct SetGenerator {
    keys: UsedKeys,
    next_element: u64,
}

impl OpGenerator for SetGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        let key = self.keys.pick(rng);
        if rng.gen_bool(0.5) {
            return read(key);
        }
        self.next_element += 1;
        Invocation {
            f: "add".into(),
            key: Some(key),
            value: json!(self.next_element),
        }
    }
    fn final_reads(&self) -> Vec<Invocation> {
        self.keys.final_reads()
    }
    fn final_reads_per_replica(&self) -> bool {
        true
    }
}

/// `counter`: increments of 1-5 at any replica, reads of the count.
pub struct CounterWorkload;

impl Workload for CounterWorkload {
    fn name(&self) -> &'static str {
        "counter"
    }
    fn description(&self) -> &'static str {
        "increment per-key counters at any replica and read them; converged to the sum of acknowledged increments, monotonic session reads"
    }
    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(CounterGenerator {
            keys: UsedKeys::new(opts.active_keys, opts.ops_per_key, "c"),
        })
    }
    fn checkers(&self, _check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        Ok(checkers_for(EventualDataType::Counter))
    }
}

struct CounterGenerator {
    keys: UsedKeys,
}

impl OpGenerator for CounterGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        let key = self.keys.pick(rng);
        if rng.gen_bool(0.5) {
            return read(key);
        }
        Invocation {
            f: "add".into(),
            key: Some(key),
            value: json!(rng.gen_range(1..=5)),
        }
    }
    fn final_reads(&self) -> Vec<Invocation> {
        self.keys.final_reads()
    }
    fn final_reads_per_replica(&self) -> bool {
        true
    }
}

/// `booking`: Bayou's meeting-room scheduler. Each request names a reservation id and up to
/// three (room, slot) alternatives for one day; the merge procedure gives it the first free
/// one in commit order, or rejects it.
pub struct BookingWorkload;

impl Workload for BookingWorkload {
    fn name(&self) -> &'static str {
        "booking"
    }
    fn description(&self) -> &'static str {
        "reserve one of up to three (room, slot) alternatives per day at any replica, read the schedule; no double booking, every reservation placed once or rejected, one schedule everywhere"
    }
    fn generator(&self, _opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(BookingGenerator {
            days: UsedKeys::new(BOOKING_ACTIVE_DAYS, BOOKING_OPS_PER_DAY, "d"),
            next_id: 0,
        })
    }
    fn checkers(&self, _check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        Ok(checkers_for(EventualDataType::Booking))
    }
}

struct BookingGenerator {
    days: UsedKeys,
    next_id: u64,
}

impl OpGenerator for BookingGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        let day = self.days.pick(rng);
        if rng.gen_bool(0.3) {
            return read(day);
        }
        self.next_id += 1;
        let mut slots: Vec<[u64; 2]> = (0..BOOKING_ROOMS)
            .flat_map(|r| (0..BOOKING_SLOTS).map(move |s| [r, s]))
            .collect();
        slots.shuffle(rng);
        let n = rng.gen_range(1..=3);
        Invocation {
            f: "book".into(),
            key: Some(day),
            value: json!({"id": self.next_id, "alternatives": &slots[..n]}),
        }
    }
    fn final_reads(&self) -> Vec<Invocation> {
        self.days.final_reads()
    }
    fn final_reads_per_replica(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn final_reads_cover_every_key_ever_used() {
        let mut g = SetGenerator {
            keys: UsedKeys::new(2, 3, "k"),
            next_element: 0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut keys = BTreeSet::new();
        let mut elements = BTreeSet::new();
        for _ in 0..40 {
            let op = g.next_op(&mut rng);
            keys.insert(op.key.clone().unwrap().as_str().unwrap().to_string());
            if op.f == "add" {
                assert!(elements.insert(op.value.as_u64().unwrap()), "unique");
            }
        }
        let finals: BTreeSet<String> = g
            .final_reads()
            .iter()
            .map(|i| i.key.clone().unwrap().as_str().unwrap().to_string())
            .collect();
        assert_eq!(finals, keys);
        assert!(keys.len() > 2, "keys rotate");
    }

    #[test]
    fn bookings_have_unique_ids_and_distinct_alternatives_in_range() {
        let mut g = BookingGenerator {
            days: UsedKeys::new(BOOKING_ACTIVE_DAYS, BOOKING_OPS_PER_DAY, "d"),
            next_id: 0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut ids = BTreeSet::new();
        for _ in 0..200 {
            let op = g.next_op(&mut rng);
            if op.f != "book" {
                continue;
            }
            assert!(ids.insert(op.value["id"].as_u64().unwrap()));
            let alts = op.value["alternatives"].as_array().unwrap();
            assert!((1..=3).contains(&alts.len()));
            let distinct: BTreeSet<String> = alts.iter().map(|a| a.to_string()).collect();
            assert_eq!(distinct.len(), alts.len());
            for a in alts {
                assert!(a[0].as_u64().unwrap() < BOOKING_ROOMS);
                assert!(a[1].as_u64().unwrap() < BOOKING_SLOTS);
            }
        }
    }
}
