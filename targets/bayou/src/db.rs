//! The database a replica derives from its write log: key -> set | counter | schedule.
//!
//! Every entry remembers the write that made it (and its CSN when that write was applied
//! as committed), so a read can split what it shows into committed and tentative parts.
//! Applying is deterministic: the same writes in the same order give the same database on
//! every replica (SOSP'95 §4: the dependency check and merge procedure of a booking run
//! against the database as the earlier writes left it).

use crate::types::{Csn, Kind, Op, Wid, Write};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

/// Which write made an entry, and its CSN if it was applied as committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag(pub Wid, pub Option<Csn>);

/// One schedule row: the write, the reservation id, and its [room, slot] (None: rejected).
pub type Row = (Tag, i64, Option<(i64, i64)>);

/// One object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Object {
    /// A set of integers; `items` in application order, each element once.
    Set {
        /// Elements and the write that added each.
        items: Vec<(Tag, i64)>,
        /// Index of `items` (rebuilt after loading).
        #[serde(skip)]
        members: HashSet<i64>,
    },
    /// A counter.
    Counter {
        /// Sum of the applied deltas.
        value: i64,
    },
    /// Meeting-room bookings: one row per reservation id, `None` when rejected.
    Schedule {
        /// (write, reservation id, [room, slot] or rejected) in application order.
        rows: Vec<Row>,
        /// [room, slot] pairs held (rebuilt after loading).
        #[serde(skip)]
        held: HashSet<(i64, i64)>,
        /// Reservation ids present (rebuilt after loading).
        #[serde(skip)]
        ids: HashSet<i64>,
    },
}

impl Object {
    fn empty(kind: Kind) -> Object {
        match kind {
            Kind::Set => Object::Set {
                items: Vec::new(),
                members: HashSet::new(),
            },
            Kind::Counter => Object::Counter { value: 0 },
            Kind::Schedule => Object::Schedule {
                rows: Vec::new(),
                held: HashSet::new(),
                ids: HashSet::new(),
            },
        }
    }

    /// The object's type.
    pub fn kind(&self) -> Kind {
        match self {
            Object::Set { .. } => Kind::Set,
            Object::Counter { .. } => Kind::Counter,
            Object::Schedule { .. } => Kind::Schedule,
        }
    }

    /// Rebuilds the indexes that are not serialized.
    fn reindex(&mut self) {
        match self {
            Object::Set { items, members } => *members = items.iter().map(|(_, e)| *e).collect(),
            Object::Counter { .. } => {}
            Object::Schedule { rows, held, ids } => {
                *held = rows.iter().filter_map(|(_, _, slot)| *slot).collect();
                *ids = rows.iter().map(|(_, id, _)| *id).collect();
            }
        }
    }

    /// Applies `op` (made by `tag`). An op of another type than the object is a no-op:
    /// the key's type is fixed by its first write in the log order.
    fn apply(&mut self, tag: Tag, op: &Op) {
        match (self, op) {
            (Object::Set { items, members }, Op::Add { element }) if !members.contains(element) => {
                members.insert(*element);
                items.push((tag, *element));
            }
            (Object::Counter { value }, Op::Incr { delta }) => {
                *value = value.saturating_add(*delta);
            }
            (Object::Schedule { rows, held, ids }, Op::Book { id, alternatives }) => {
                if !ids.insert(*id) {
                    return;
                }
                // Dependency check: the first alternative no earlier write holds; merge
                // procedure: take it, or reject the reservation if every one is taken.
                let slot = alternatives.iter().copied().find(|a| !held.contains(a));
                if let Some(slot) = slot {
                    held.insert(slot);
                }
                rows.push((tag, *id, slot));
            }
            _ => {}
        }
    }

    /// The READ value of the contract. An entry is committed if its tag carries a CSN or
    /// `csn_of` knows one. With `sort`, committed entries are ordered by CSN and tentative
    /// ones by (stamp, replica); without, they keep application order (which already is
    /// that order when the object was built in log order).
    pub fn render(&self, csn_of: &dyn Fn(Wid) -> Option<Csn>, sort: bool) -> Value {
        let split = |tags: Vec<(Tag, usize)>| -> (Vec<usize>, Vec<usize>) {
            let mut committed = Vec::new();
            let mut tentative = Vec::new();
            for (Tag(wid, csn), i) in tags {
                match csn.or_else(|| csn_of(wid)) {
                    Some(c) => committed.push((c, wid, i)),
                    None => tentative.push((0, wid, i)),
                }
            }
            if sort {
                committed.sort();
                tentative.sort();
            }
            (
                committed.into_iter().map(|(_, _, i)| i).collect(),
                tentative.into_iter().map(|(_, _, i)| i).collect(),
            )
        };
        match self {
            Object::Set { items, .. } => {
                let (c, t) = split(items.iter().enumerate().map(|(i, x)| (x.0, i)).collect());
                json!({
                    "committed": c.iter().map(|i| items[*i].1).collect::<Vec<_>>(),
                    "tentative": t.iter().map(|i| items[*i].1).collect::<Vec<_>>(),
                })
            }
            Object::Counter { value } => json!(value),
            Object::Schedule { rows, .. } => {
                let (c, t) = split(rows.iter().enumerate().map(|(i, x)| (x.0, i)).collect());
                let row = |i: &usize| {
                    let (_, id, slot) = rows[*i];
                    match slot {
                        Some((room, s)) => json!([id, room, s]),
                        None => json!([id, null, null]),
                    }
                };
                json!({
                    "committed": c.iter().map(|i| rows[*i].1).collect::<Vec<_>>(),
                    "tentative": t.iter().map(|i| rows[*i].1).collect::<Vec<_>>(),
                    "schedule": c.iter().chain(t.iter()).map(row).collect::<Vec<_>>(),
                })
            }
        }
    }

    /// The value of a key never written, for a read that names no type.
    pub fn empty_value(kind: Option<Kind>) -> Value {
        match kind {
            Some(k) => Object::empty(k).render(&|_| None, false),
            None => json!({"committed": [], "tentative": []}),
        }
    }
}

/// The elements a set READ value shows (committed, then tentative).
pub fn set_elements(value: &Value) -> Vec<i64> {
    ["committed", "tentative"]
        .iter()
        .flat_map(|part| value[*part].as_array().into_iter().flatten())
        .filter_map(Value::as_i64)
        .collect()
}

/// The whole database.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Db {
    objects: BTreeMap<String, Object>,
}

impl Db {
    /// Applies one write, tagged with its CSN if it is applied as committed.
    pub fn apply(&mut self, write: &Write, csn: Option<Csn>) {
        let object = self
            .objects
            .entry(write.key.clone())
            .or_insert_with(|| Object::empty(write.op.kind()));
        object.apply(Tag(write.wid, csn), &write.op);
    }

    /// The object at `key`, if any write made it.
    pub fn get(&self, key: &str) -> Option<&Object> {
        self.objects.get(key)
    }

    /// Every key with an object.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.objects.keys()
    }

    /// Rebuilds the indexes after deserializing.
    pub fn reindex(&mut self) {
        for object in self.objects.values_mut() {
            object.reindex();
        }
    }

    /// A database holding only `key`'s object (a clone), to replay tentative writes on.
    pub fn only(&self, key: &str) -> Db {
        let mut objects = BTreeMap::new();
        if let Some(o) = self.objects.get(key) {
            objects.insert(key.to_string(), o.clone());
        }
        Db { objects }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(stamp: u64, replica: u64, op: Op) -> Write {
        Write {
            wid: Wid { stamp, replica },
            key: "k".into(),
            op,
        }
    }

    fn book(id: i64, alts: &[(i64, i64)]) -> Op {
        Op::Book {
            id,
            alternatives: alts.to_vec(),
        }
    }

    #[test]
    fn booking_takes_the_first_free_alternative_or_is_rejected() {
        // SOSP'95 §4: the merge procedure tries the alternatives in order.
        let mut db = Db::default();
        db.apply(&w(1, 1, book(10, &[(1, 1), (1, 2)])), Some(1));
        db.apply(&w(2, 2, book(11, &[(1, 1), (1, 2)])), None);
        db.apply(&w(3, 1, book(12, &[(1, 1), (1, 2)])), None);
        db.apply(&w(4, 1, book(12, &[(9, 9)])), None); // same id again: no-op
        let v = db.get("k").unwrap().render(&|_| None, false);
        assert_eq!(
            v,
            json!({"committed":[10],"tentative":[11,12],"schedule":[[10,1,1],[11,1,2],[12,null,null]]})
        );
    }

    #[test]
    fn sets_dedupe_and_ignore_other_types_and_reload() {
        let mut db = Db::default();
        db.apply(&w(1, 1, Op::Add { element: 5 }), None);
        db.apply(&w(2, 1, Op::Add { element: 5 }), None);
        db.apply(&w(3, 1, Op::Incr { delta: 2 }), None);
        db.apply(&w(4, 2, Op::Add { element: 6 }), None);
        let csn_of = |wid: Wid| (wid.stamp == 4).then_some(1);
        let v = db.get("k").unwrap().render(&csn_of, true);
        assert_eq!(v, json!({"committed":[6],"tentative":[5]}));
        let mut back: Db = serde_json::from_str(&serde_json::to_string(&db).unwrap()).unwrap();
        back.reindex();
        back.apply(&w(5, 1, Op::Add { element: 6 }), None);
        assert_eq!(back, db);
        assert_eq!(Object::empty_value(Some(Kind::Counter)), json!(0));
    }
}
