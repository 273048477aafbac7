//! The history as the eventual checkers see it: per key, its updates and its ok reads
//! with their values decoded into compact shapes, the replicas, and the quiescence point.
//!
//! Built once per check from [`History::pair_slots`] and [`History::op`] (one op parsed
//! at a time, in parallel), so a lazily read history is never materialized whole.

use super::{scan, EventualDataType, FastMap};
use crate::history::{History, Outcome, Process};
use rayon::prelude::*;
use serde_json::Value;
use std::borrow::Cow;

/// A reservation of the booking workload: its id and its alternatives in preference order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub id: i64,
    pub alternatives: Vec<(i64, i64)>,
}

/// What one update asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UpdateArg {
    /// A set element (or, for bookings, nothing else is used than the id).
    Element(i64),
    /// A counter increment.
    Delta(i64),
    /// A booking.
    Book(Reservation),
}

impl UpdateArg {
    /// The identity a read reflects: the element, or the reservation id.
    pub fn element(&self) -> Option<i64> {
        match self {
            UpdateArg::Element(e) => Some(*e),
            UpdateArg::Book(r) => Some(r.id),
            UpdateArg::Delta(_) => None,
        }
    }
}

/// One update (add, incr, book) of a key.
#[derive(Debug, Clone)]
pub(crate) struct UpdateOp {
    pub process: u64,
    pub outcome: Outcome,
    pub invoke_pos: usize,
    pub complete_pos: Option<usize>,
    pub node: Option<u32>,
    pub arg: UpdateArg,
}

/// A schedule row: reservation id and its (room, slot), `None` when rejected.
pub(crate) type ScheduleRow = (i64, Option<(i64, i64)>);

/// The value of an ok read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadValue {
    /// Jepsen's plain list of elements: membership only, no order.
    List(Vec<i64>),
    /// Committed elements (ids) in commit order, then tentative ones; bookings also
    /// carry the schedule.
    Split {
        committed: Vec<i64>,
        tentative: Vec<i64>,
        schedule: Option<Vec<ScheduleRow>>,
    },
    /// A counter's value.
    Counter(i64),
}

impl ReadValue {
    /// Every element (id) the read reflects, in the read's order where it gives one.
    pub fn elements(&self) -> impl Iterator<Item = i64> + '_ {
        let (a, b): (&[i64], &[i64]) = match self {
            ReadValue::List(l) => (l, &[]),
            ReadValue::Split {
                committed,
                tentative,
                ..
            } => (committed, tentative),
            ReadValue::Counter(_) => (&[], &[]),
        };
        a.iter().chain(b.iter()).copied()
    }

    /// True when the read orders its elements (committed then tentative).
    pub fn ordered(&self) -> bool {
        matches!(self, ReadValue::Split { .. })
    }

    /// The sorted, deduplicated elements.
    pub fn element_set(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self.elements().collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// One ok read of a key.
#[derive(Debug, Clone)]
pub(crate) struct ReadOp {
    pub process: u64,
    pub invoke_pos: usize,
    pub complete_pos: usize,
    pub node: Option<u32>,
    pub value: ReadValue,
}

/// Everything that happened to one key.
#[derive(Debug, Default)]
pub(crate) struct KeyOps {
    /// The key as displayed (`""` for ops without a key).
    pub name: String,
    /// Updates in invoke order.
    pub updates: Vec<UpdateOp>,
    /// Ok reads in invoke order.
    pub reads: Vec<ReadOp>,
}

/// The decoded history.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Keys in order of first appearance.
    pub keys: Vec<KeyOps>,
    /// Replica names; `node` ids index it.
    pub nodes: Vec<String>,
    /// Ops the checkers could not read (position, why), at most a few kept.
    pub malformed: Vec<(usize, String)>,
    /// How many ops could not be read.
    pub malformed_count: usize,
    /// Position of the op that is the quiescence point, if any (see the contract).
    pub quiescence_pos: Option<usize>,
    /// Ok reads whose op carried no `node`.
    pub reads_without_node: usize,
}

/// What one client op decodes to, before grouping by key.
enum Decoded<'a> {
    Update(Cow<'a, str>, UpdateOp, Option<Cow<'a, str>>),
    Read(Cow<'a, str>, ReadOp, Option<Cow<'a, str>>),
    Malformed(usize, String),
    /// A read whose value is not needed: only its replica matters, and its key when it
    /// completed ok.
    NodeOnly(Option<Cow<'a, str>>, Option<Cow<'a, str>>),
    Other,
}

/// Update op names of each data type (`incr` is accepted for counters as Bayou names it).
fn is_update(dt: EventualDataType, f: &str) -> bool {
    match dt {
        EventualDataType::Set => f == "add",
        EventualDataType::Counter => f == "add" || f == "incr",
        EventualDataType::Booking => f == "book",
    }
}

pub(crate) fn decode_update(dt: EventualDataType, v: &Value) -> Result<UpdateArg, String> {
    match dt {
        EventualDataType::Set => v
            .as_i64()
            .map(UpdateArg::Element)
            .ok_or_else(|| format!("a set add's value must be an integer element, got {v}")),
        EventualDataType::Counter => v
            .as_i64()
            .map(UpdateArg::Delta)
            .ok_or_else(|| format!("a counter add's value must be an integer, got {v}")),
        EventualDataType::Booking => {
            let id = v.get("id").and_then(Value::as_i64);
            let alts = v.get("alternatives").and_then(Value::as_array).map(|a| {
                a.iter()
                    .map(|p| match p.as_array().map(Vec::as_slice) {
                        Some([r, s]) => r.as_i64().zip(s.as_i64()),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()
            });
            match (id, alts) {
                (Some(id), Some(Some(alternatives))) => {
                    Ok(UpdateArg::Book(Reservation { id, alternatives }))
                }
                _ => Err(format!(
                    "a book's value must be {{\"id\": int, \"alternatives\": [[room, slot], ...]}}, got {v}"
                )),
            }
        }
    }
}

fn int_list(v: Option<&Value>) -> Option<Vec<i64>> {
    v?.as_array()?.iter().map(Value::as_i64).collect()
}

fn schedule_rows(v: &Value) -> Option<Vec<ScheduleRow>> {
    v.as_array()?
        .iter()
        .map(|row| match row.as_array().map(Vec::as_slice) {
            Some([id, room, slot]) => {
                let id = id.as_i64()?;
                match (room, slot) {
                    (Value::Null, Value::Null) => Some((id, None)),
                    _ => Some((id, Some((room.as_i64()?, slot.as_i64()?)))),
                }
            }
            _ => None,
        })
        .collect()
}

/// Decodes an ok read's value for the data type.
pub(crate) fn decode_read(dt: EventualDataType, v: &Value) -> Result<ReadValue, String> {
    let bad = || format!("not a {} read value: {v}", dt.name());
    match (dt, v) {
        (EventualDataType::Counter, v) => v.as_i64().map(ReadValue::Counter).ok_or_else(bad),
        (_, Value::Array(_)) => int_list(Some(v)).map(ReadValue::List).ok_or_else(bad),
        (_, Value::Object(m)) => {
            let committed = int_list(m.get("committed")).ok_or_else(bad)?;
            let tentative = match m.get("tentative") {
                None => Vec::new(),
                t => int_list(t).ok_or_else(bad)?,
            };
            let schedule = match (dt, m.get("schedule")) {
                (EventualDataType::Booking, Some(s)) => Some(schedule_rows(s).ok_or_else(bad)?),
                _ => None,
            };
            Ok(ReadValue::Split {
                committed,
                tentative,
                schedule,
            })
        }
        _ => Err(bad()),
    }
}

/// An op value as stored: JSON text (lazily read histories) or a parsed value.
enum FieldValue<'a> {
    Text(&'a str),
    Json(Cow<'a, Value>),
}

impl FieldValue<'_> {
    fn to_value(&self) -> Value {
        match self {
            FieldValue::Text(t) => serde_json::from_str(t).unwrap_or(Value::Null),
            FieldValue::Json(v) => v.as_ref().clone(),
        }
    }
}

/// The key, node and value of one op.
struct Fields<'a> {
    key: Option<Cow<'a, str>>,
    node: Option<Cow<'a, str>>,
    value: FieldValue<'a>,
    /// The value already read as a set read, when asked for and it has that shape.
    set_read: Option<scan::SetRead>,
}

fn key_text(raw: &str) -> Cow<'_, str> {
    match scan::plain_string(raw) {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(
            serde_json::from_str::<Value>(raw)
                .map(|v| crate::history::value_key_string(&v))
                .unwrap_or_else(|_| raw.to_string()),
        ),
    }
}

fn node_text(raw: &str) -> Option<Cow<'_, str>> {
    match scan::plain_string(raw) {
        Some(s) => Some(Cow::Borrowed(s)),
        None => serde_json::from_str::<Option<String>>(raw)
            .ok()
            .flatten()
            .map(Cow::Owned),
    }
}

fn fields(history: &History, pos: usize, set_value: bool) -> Option<Fields<'_>> {
    if let Some((f, set_read)) = history
        .op_text(pos)
        .and_then(|line| scan::op_fields(line, set_value))
    {
        return Some(Fields {
            key: f.key.filter(|k| *k != "null").map(key_text),
            node: f.node.and_then(node_text),
            value: FieldValue::Text(f.value.unwrap_or("null")),
            set_read,
        });
    }
    let op = history.op(pos)?;
    Some(match op {
        Cow::Borrowed(o) => Fields {
            key: o.key.as_ref().map(|k| match k {
                Value::String(s) => Cow::Borrowed(s.as_str()),
                other => Cow::Owned(crate::history::value_key_string(other)),
            }),
            node: o.node.as_deref().map(Cow::Borrowed),
            value: FieldValue::Json(Cow::Borrowed(&o.value)),
            set_read: None,
        },
        Cow::Owned(o) => Fields {
            key: o
                .key
                .as_ref()
                .map(|k| Cow::Owned(crate::history::value_key_string(k))),
            node: o.node.map(Cow::Owned),
            value: FieldValue::Json(Cow::Owned(o.value)),
            set_read: None,
        },
    })
}

/// Decodes an update's argument, reading plain integers without serde.
fn decode_update_field(dt: EventualDataType, v: &FieldValue<'_>) -> Result<UpdateArg, String> {
    if let (EventualDataType::Set | EventualDataType::Counter, FieldValue::Text(t)) = (dt, v) {
        if let Some(n) = scan::int(t) {
            if dt == EventualDataType::Set {
                return Ok(UpdateArg::Element(n));
            }
            return Ok(UpdateArg::Delta(n));
        }
    }
    decode_update(dt, &v.to_value())
}

/// Decodes a read's value, reading the usual shapes without serde.
fn decode_read_field(dt: EventualDataType, v: &FieldValue<'_>) -> Result<ReadValue, String> {
    if let FieldValue::Text(t) = v {
        if let Some(r) = fast_read(dt, t) {
            return Ok(r);
        }
    }
    decode_read(dt, &v.to_value())
}

fn fast_read(dt: EventualDataType, t: &str) -> Option<ReadValue> {
    if dt == EventualDataType::Counter {
        return scan::int(t).map(ReadValue::Counter);
    }
    let mut list = Vec::new();
    if t.starts_with('[') {
        return scan::int_list_into(t, &mut list).then_some(ReadValue::List(list));
    }
    let [c, tent, sched] = scan::named(t, ["committed", "tentative", "schedule"])?;
    let mut committed = Vec::new();
    if !scan::int_list_into(c?, &mut committed) {
        return None;
    }
    let mut tentative = Vec::new();
    if let Some(tt) = tent {
        if !scan::int_list_into(tt, &mut tentative) {
            return None;
        }
    }
    let schedule = match (dt, sched) {
        (EventualDataType::Booking, Some(s)) => {
            Some(schedule_rows(&serde_json::from_str(s).ok()?)?)
        }
        _ => None,
    };
    Some(ReadValue::Split {
        committed,
        tentative,
        schedule,
    })
}

/// Which ok reads' values a checker needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadValues {
    /// Every read's.
    All,
    /// Only final reads' (invoked after the quiescence point).
    Final,
}

fn decode_slot(
    history: &History,
    dt: EventualDataType,
    slot: usize,
    final_after: Option<Option<usize>>,
) -> Decoded<'_> {
    let s = history.pair_slots()[slot];
    let Some(f) = history.op_f(s.invoke_pos) else {
        return Decoded::Other;
    };
    let update = is_update(dt, f);
    if !update && f != "read" {
        return Decoded::Other;
    }
    // Set reads whose value is needed are read while their line is scanned.
    let final_read = final_after.is_none_or(|q| q.is_none_or(|q| s.invoke_pos > q));
    let set_value =
        dt == EventualDataType::Set && !update && s.outcome == Outcome::Ok && final_read;
    let mut complete = s.complete_pos.and_then(|c| fields(history, c, set_value));
    // A read's completion usually names its key too; then its invoke need not be read.
    let need_invoke = update
        || complete
            .as_ref()
            .is_none_or(|c| c.key.is_none() || c.node.is_none());
    let mut invoke = if need_invoke {
        match fields(history, s.invoke_pos, false) {
            Some(f) => Some(f),
            None => return Decoded::Other,
        }
    } else {
        None
    };
    let key = complete
        .as_mut()
        .and_then(|c| c.key.take())
        .or_else(|| invoke.as_mut().and_then(|i| i.key.take()))
        .unwrap_or_default();
    let node = complete
        .as_mut()
        .and_then(|c| c.node.take())
        .or_else(|| invoke.as_mut().and_then(|i| i.node.take()));
    if !update && s.outcome != Outcome::Ok {
        return Decoded::NodeOnly(None, node);
    }
    if let Some(q) = final_after {
        if !update && q.is_some_and(|q| s.invoke_pos <= q) {
            return Decoded::NodeOnly(Some(key), node);
        }
    }
    if let (true, Some(invoke)) = (update, invoke) {
        match decode_update_field(dt, &invoke.value) {
            Ok(arg) => Decoded::Update(
                key,
                UpdateOp {
                    process: s.process,
                    outcome: s.outcome,
                    invoke_pos: s.invoke_pos,
                    complete_pos: s.complete_pos,
                    node: None,
                    arg,
                },
                node,
            ),
            Err(e) => Decoded::Malformed(s.invoke_pos, e),
        }
    } else {
        let (Some(c), Some(cpos)) = (complete, s.complete_pos) else {
            return Decoded::Other;
        };
        let value = match c.set_read {
            Some(scan::SetRead::List(l)) => Ok(ReadValue::List(l)),
            Some(scan::SetRead::Split {
                committed,
                tentative,
            }) => Ok(ReadValue::Split {
                committed,
                tentative,
                schedule: None,
            }),
            None => decode_read_field(dt, &c.value),
        };
        match value {
            Ok(value) => Decoded::Read(
                key,
                ReadOp {
                    process: s.process,
                    invoke_pos: s.invoke_pos,
                    complete_pos: cpos,
                    node: None,
                    value,
                },
                node,
            ),
            Err(e) => Decoded::Malformed(cpos, e),
        }
    }
}

/// The quiescence point: the latest of the last nemesis op, the last completion of an
/// update and the invoke of an update that never completed (from op heads alone).
fn quiescence_pos(history: &History, dt: EventualDataType) -> Option<usize> {
    let last_update = history
        .pair_slots()
        .iter()
        .filter(|s| history.op_f(s.invoke_pos).is_some_and(|f| is_update(dt, f)))
        .map(|s| s.complete_pos.unwrap_or(s.invoke_pos))
        .max();
    let last_nemesis = (0..history.len())
        .rev()
        .find(|&p| history.op_process(p) == Some(Process::Nemesis));
    last_update.max(last_nemesis)
}

/// How many malformed ops are kept (all are counted).
const MAX_MALFORMED: usize = 8;

impl View {
    /// Decodes `history` for data type `dt`.
    pub fn build<'h>(history: &'h History, dt: EventualDataType, values: ReadValues) -> View {
        let quiescence = quiescence_pos(history, dt);
        let final_after = (values == ReadValues::Final).then_some(quiescence);
        let decoded: Vec<Decoded> = (0..history.pair_slots().len())
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| decode_slot(history, dt, i, final_after))
            .collect();
        let mut view = View {
            quiescence_pos: quiescence,
            ..View::default()
        };
        let mut key_ids: FastMap<Cow<'h, str>, usize> = FastMap::default();
        let mut node_ids: FastMap<Cow<'h, str>, u32> = FastMap::default();
        let mut intern_node = |view: &mut View, n: Option<Cow<'h, str>>| -> Option<u32> {
            let n = n?;
            if let Some(&id) = node_ids.get(&n) {
                return Some(id);
            }
            let id = view.nodes.len() as u32;
            view.nodes.push(n.to_string());
            node_ids.insert(n, id);
            Some(id)
        };
        let mut key_id = |view: &mut View, key: Cow<'h, str>| -> usize {
            if let Some(&k) = key_ids.get(&key) {
                return k;
            }
            view.keys.push(KeyOps {
                name: key.to_string(),
                ..KeyOps::default()
            });
            key_ids.insert(key, view.keys.len() - 1);
            view.keys.len() - 1
        };
        for d in decoded {
            let (key, node, d) = match d {
                Decoded::Update(k, u, n) => (k, n, Ok(u)),
                Decoded::Read(k, r, n) => (k, n, Err(r)),
                Decoded::Malformed(pos, why) => {
                    view.malformed_count += 1;
                    if view.malformed.len() < MAX_MALFORMED {
                        view.malformed.push((pos, why));
                    }
                    continue;
                }
                Decoded::NodeOnly(key, n) => {
                    intern_node(&mut view, n);
                    if let Some(key) = key {
                        key_id(&mut view, key);
                    }
                    continue;
                }
                Decoded::Other => continue,
            };
            let node = intern_node(&mut view, node);
            let k = key_id(&mut view, key);
            match d {
                Ok(mut u) => {
                    u.node = node;
                    view.keys[k].updates.push(u);
                }
                Err(mut r) => {
                    r.node = node;
                    if node.is_none() {
                        view.reads_without_node += 1;
                    }
                    view.keys[k].reads.push(r);
                }
            }
        }
        view
    }

    /// True if the ok read was invoked after the quiescence point (a final read).
    pub fn is_final(&self, r: &ReadOp) -> bool {
        self.quiescence_pos.is_none_or(|q| r.invoke_pos > q)
    }

    /// The replica name of a node id.
    pub fn node_name(&self, node: Option<u32>) -> &str {
        node.and_then(|n| self.nodes.get(n as usize))
            .map(String::as_str)
            .unwrap_or("(no node)")
    }
}
