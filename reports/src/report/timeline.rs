//! The timeline's data: every client op packed into columns (start, duration, lane,
//! process, index, value, outcome and `f`), gzipped and base64-encoded so a million ops
//! fit in a few megabytes; `timeline.js` unpacks it with the browser's own gzip and
//! draws only what the window shows.

use super::faults::{class_colour, FaultWindow};
use base64::Engine;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Value};
use splitbrain_checkers::{History, Outcome};
use std::collections::HashMap;
use std::io::Write;

/// Longest value text kept per op (longer ones are cut with an ellipsis).
const VALUE_CHARS: usize = 72;
/// Total value text embedded; past it, ops show their history index only.
const VALUE_BUDGET: usize = 6 << 20;
/// Marks an op that never completed, in the duration column.
const PENDING: u32 = u32::MAX;

/// The timeline's embedded data.
#[derive(Debug, Clone)]
pub struct TimelineData {
    /// Small JSON: op count, f names, lanes, span, unit, fault windows.
    pub meta: Value,
    /// base64 of the gzipped columns.
    pub columns: String,
    /// base64 of the gzipped JSON array of value texts (entry 0 is empty).
    pub values: String,
}

fn outcome_code(o: Outcome) -> u8 {
    match o {
        Outcome::Ok => 0,
        Outcome::Fail => 1,
        Outcome::Info => 2,
        Outcome::Pending => 3,
    }
}

fn gzip_base64(bytes: &[u8]) -> String {
    let mut gz = GzEncoder::new(Vec::new(), Compression::new(6));
    // Writing into a Vec cannot fail; an empty blob would only show an empty timeline.
    let packed = gz
        .write_all(bytes)
        .and_then(|_| gz.finish())
        .unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(packed)
}

fn value_text(history: &History, invoke: usize, value_pos: usize) -> String {
    let key = history.op(invoke).and_then(|o| {
        o.key
            .as_ref()
            .map(splitbrain_checkers::history::value_key_string)
    });
    let value = history
        .op_value(value_pos)
        .map(|v| v.to_string())
        .unwrap_or_default();
    let s = match key {
        Some(k) => format!("{k} {value}"),
        None => value,
    };
    if s.chars().count() > VALUE_CHARS {
        s.chars().take(VALUE_CHARS - 1).chain(['…']).collect()
    } else {
        s
    }
}

/// Packs a history's client ops for the timeline. Processes share a lane when one's ops
/// all end before the next one's begin (a process retired by an `info` hands over to a
/// fresh one), so lanes number about as many as concurrent clients.
pub fn timeline_data(history: &History, windows: &[FaultWindow]) -> TimelineData {
    let slots = history.pair_slots();
    let times = (0..history.len()).any(|p| history.op_time(p).unwrap_or(0) != 0);
    // Without recorded times (Jepsen text logs), history positions stand in for time.
    let at = |pos: usize| -> u64 {
        if times {
            history.op_time(pos).unwrap_or(0) / 1000
        } else {
            pos as u64
        }
    };
    let span = history.len().checked_sub(1).map(at).unwrap_or(0).max(1);
    // Each process's last moment, to hand its lane on afterwards.
    let mut last_end: HashMap<u64, u64> = HashMap::new();
    for s in slots {
        let end = s.complete_pos.map(at).unwrap_or(span);
        let e = last_end.entry(s.process).or_insert(0);
        *e = (*e).max(end);
    }
    let mut lane_of: HashMap<u64, u32> = HashMap::new();
    let mut lane_free: Vec<u64> = Vec::new();
    let mut f_names: Vec<String> = Vec::new();
    let mut values: Vec<String> = vec![String::new()];
    let mut value_ids: HashMap<String, u32> = HashMap::new();
    let mut value_bytes = 0usize;
    let mut values_cut = false;
    let n = slots.len();
    let (mut start_d, mut dur, mut lane, mut proc_, mut index_d, mut value) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut code: Vec<u8> = Vec::with_capacity(n);
    let (mut prev_start, mut prev_index) = (0u64, 0u64);
    for s in slots {
        let start = at(s.invoke_pos);
        let l = *lane_of.entry(s.process).or_insert_with(|| {
            let end = last_end.get(&s.process).copied().unwrap_or(span);
            match lane_free.iter().position(|&free| free < start) {
                Some(i) => {
                    lane_free[i] = end;
                    i as u32
                }
                None => {
                    lane_free.push(end);
                    (lane_free.len() - 1) as u32
                }
            }
        });
        let f = history.op_f(s.invoke_pos).unwrap_or("?");
        let fi = match f_names.iter().position(|x| x == f) {
            Some(i) => i,
            None => {
                f_names.push(f.to_string());
                f_names.len() - 1
            }
        }
        .min(63);
        let vid = if values_cut {
            0
        } else {
            let text = value_text(history, s.invoke_pos, s.value_pos());
            match value_ids.get(&text) {
                Some(&id) => id,
                None if value_bytes + text.len() > VALUE_BUDGET => {
                    values_cut = true;
                    0
                }
                None => {
                    value_bytes += text.len();
                    let id = values.len() as u32;
                    value_ids.insert(text.clone(), id);
                    values.push(text);
                    id
                }
            }
        };
        let index = history.op_index(s.invoke_pos);
        start_d.push(start.saturating_sub(prev_start) as u32);
        prev_start = start.max(prev_start);
        index_d.push(index.wrapping_sub(prev_index) as u32);
        prev_index = index;
        dur.push(match s.complete_pos {
            Some(c) => at(c).saturating_sub(start).min(PENDING as u64 - 1) as u32,
            None => PENDING,
        });
        lane.push(l);
        proc_.push(s.process as u32);
        value.push(vid);
        code.push(outcome_code(s.outcome) | ((fi as u8) << 2));
    }
    // Columns of little-endian u32 first (so each stays 4-byte aligned), the u8 codes last.
    let mut bytes = Vec::with_capacity(n * 25);
    for col in [&start_d, &dur, &lane, &proc_, &index_d, &value] {
        for x in col.iter() {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
    }
    bytes.extend_from_slice(&code);
    let faults: Vec<Value> = windows
        .iter()
        .map(|w| {
            let (r, g, b) = class_colour(&w.class);
            let conv = |ns: u64| if times { ns / 1000 } else { 0 };
            json!({"class": w.class, "label": w.label, "start": conv(w.start), "end": conv(w.end),
                   "colour": format!("rgb({r},{g},{b})")})
        })
        .collect();
    let values_json = serde_json::to_vec(&values).unwrap_or_default();
    TimelineData {
        meta: json!({
            "n": n,
            "lanes": lane_free.len(),
            "span": span,
            "unit": if times { "us" } else { "index" },
            "fs": f_names,
            "faults": if times { faults } else { Vec::new() },
            "values_cut": values_cut,
        }),
        columns: gzip_base64(&bytes),
        values: gzip_base64(&values_json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use serde_json::json;
    use splitbrain_checkers::{Op, OpType, Process};
    use std::io::Read;

    fn unpack(b64: &str) -> Vec<u8> {
        let gz = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let mut out = Vec::new();
        GzDecoder::new(&gz[..]).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn a_retired_process_hands_its_lane_to_its_successor() {
        let c = |p, t, f: &str, ty, v| Op::new(Process::Client(p), ty, f, v).at(t);
        let ops = vec![
            c(0, 1_000, "write", OpType::Invoke, json!(1)),
            c(1, 2_000, "read", OpType::Invoke, json!(null)),
            c(0, 3_000, "write", OpType::Info, json!(1)),
            c(1, 4_000, "read", OpType::Ok, json!(1)),
            // process 2 replaces the retired 0
            c(2, 5_000, "write", OpType::Invoke, json!(2)),
            c(2, 6_000, "write", OpType::Ok, json!(2)),
        ];
        let d = timeline_data(&History::new(ops).unwrap(), &[]);
        assert_eq!(d.meta["n"], 3);
        assert_eq!(d.meta["lanes"], 2, "{}", d.meta);
        let bytes = unpack(&d.columns);
        let col = |c: usize, i: usize| {
            let o = (c * 3 + i) * 4;
            u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]])
        };
        // lanes: op 0 (process 0) and op 2 (process 2) share lane 0
        assert_eq!((col(2, 0), col(2, 1), col(2, 2)), (0, 1, 0));
        // codes: info write, ok read, ok write
        assert_eq!(&bytes[bytes.len() - 3..], &[2, 1 << 2, 0]);
        let values: Vec<String> = serde_json::from_slice(&unpack(&d.values)).unwrap();
        assert_eq!(values[col(5, 1) as usize], "1");
    }
}
