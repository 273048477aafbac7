//! Histories in the shapes Elle, elle-cli and Knossos write them: transactions without
//! `f` (EDN, JSON array, JSON Lines), the history's own `index` naming ops in results,
//! and clear errors for ops that are truly malformed.

use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::history::read::{read_str, Format};
use splitbrain_checkers::linearizability::{LinearizabilityChecker, LinearizabilityOptions};
use splitbrain_checkers::{CheckResult, Checker, History, Validity};
use std::path::Path;

fn read(text: &str) -> History {
    read_str(text, Path::new("h"), None).unwrap_or_else(|e| panic!("{e}"))
}

fn read_err(text: &str) -> String {
    match read_str(text, Path::new("h.edn"), None) {
        Ok(h) => panic!("expected an error, got {} ops", h.len()),
        Err(e) => e.to_string(),
    }
}

fn list_append(h: &History) -> CheckResult {
    ElleChecker::new(ElleWorkload::ListAppend, ElleOptions::default())
        .expect("default model")
        .check(h)
}

/// A G1c (circular information flow) between two transactions, in Elle's EDN shape: no
/// `:f`, indices that start at 10 and step by 2.
const G1C_EDN: &str = r#"[
{:type :invoke, :value [[:append :x 1] [:r :y nil]], :process 0, :index 10}
{:type :invoke, :value [[:append :y 1] [:r :x nil]], :process 1, :index 12}
{:type :ok, :value [[:append :x 1] [:r :y [1]]], :process 0, :index 14}
{:type :ok, :value [[:append :y 1] [:r :x [1]]], :process 1, :index 16}
]"#;

#[test]
fn edn_transactions_without_f_are_txns_and_named_by_their_index() {
    let h = read(G1C_EDN);
    assert_eq!(Format::detect(G1C_EDN), Format::Edn);
    assert!(h.pairs().iter().all(|p| p.f == "txn"));
    assert_eq!(h.op_index(0), 10);
    assert_eq!(h.op_index(3), 16);
    let r = list_append(&h);
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert!(
        r.anomaly_types.iter().any(|t| t == "G1c"),
        "{:?}",
        r.anomaly_types
    );
    // The transactions are named by their completions' indices in the file, 14 and 16.
    assert!(
        r.explanation.contains("T14") && r.explanation.contains("T16"),
        "{}",
        r.explanation
    );
    assert!(
        !r.explanation.contains("T2 ") && !r.explanation.contains("T3"),
        "{}",
        r.explanation
    );
    let evidence = serde_json::to_string(&r.evidence).expect("json");
    assert!(evidence.contains("\"index\":14"), "{evidence}");
}

#[test]
fn json_array_and_json_lines_without_f_are_txns() {
    let array = r#"[
      {"type":"invoke","process":0,"value":[["append",1,1],["r",2,null]],"index":5},
      {"type":"invoke","process":1,"value":[["append",2,1],["r",1,null]],"index":6},
      {"type":"ok","process":0,"value":[["append",1,1],["r",2,[1]]],"index":7},
      {"type":"ok","process":1,"value":[["append",2,1],["r",1,[1]]],"index":8}
    ]"#;
    let lines = array
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split("},")
        .map(|l| {
            let l = l.trim();
            if l.ends_with('}') {
                l.to_string()
            } else {
                format!("{l}}}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(Format::detect(array), Format::JsonArray);
    assert_eq!(Format::detect(&lines), Format::JsonLines);
    for text in [array, lines.as_str()] {
        let h = read(text);
        assert!(h.pairs().iter().all(|p| p.f == "txn"), "{text}");
        assert_eq!(h.op_f(0), Some("txn"));
        let r = list_append(&h);
        assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
        assert!(r.anomaly_types.iter().any(|t| t == "G1c"));
        assert!(
            r.explanation.contains("T7") && r.explanation.contains("T8"),
            "{}",
            r.explanation
        );
    }
}

#[test]
fn valid_elle_history_without_f_or_index_is_valid() {
    let edn = r#"{:type :invoke, :value [[:append 1 1]], :process 0}
{:type :ok, :value [[:append 1 1]], :process 0}
{:type :invoke, :value [[:r 1 nil]], :process 1}
{:type :ok, :value [[:r 1 [1]]], :process 1}
"#;
    let h = read(edn);
    assert_eq!(h.op_index(3), 3, "no carried index: positions");
    let r = list_append(&h);
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
}

#[test]
fn completion_without_f_takes_its_invokes() {
    for text in [
        "{:type :invoke, :f :read, :value nil, :process 0}\n{:type :info, :process 0}\n",
        "{\"type\":\"invoke\",\"f\":\"read\",\"process\":0}\n{\"type\":\"info\",\"process\":0}\n",
        "[{\"type\":\"invoke\",\"f\":\"read\",\"process\":0},{\"type\":\"info\",\"process\":0}]",
    ] {
        let h = read(text);
        assert_eq!(h.op_f(1), Some("read"), "{text}");
        assert_eq!(h.ops()[1].f, "read", "{text}");
    }
}

#[test]
fn ops_without_f_that_are_not_transactions_are_refused_with_their_line() {
    let e =
        read_err("{:type :invoke, :f :read, :process 0}\n{:type :invoke, :value 3, :process 1}\n");
    assert!(e.starts_with("h.edn:2: expected the op to have `f`"), "{e}");
    assert!(e.contains("value 3"), "{e}");
    // Micro-ops must be [f key value] triples.
    let e = read_err("{:type :invoke, :value [[:append 1]], :process 0}");
    assert!(e.contains("h.edn:1: expected the op to have `f`"), "{e}");
    // JSON Lines, past other chunks' lines.
    let e = read_err("{\"type\":\"invoke\",\"f\":\"read\",\"process\":0}\n\n{\"type\":\"invoke\",\"process\":1,\"value\":{\"a\":1}}\n");
    assert!(e.starts_with("h.edn:3: expected the op to have `f`"), "{e}");
    // An invoke without f never inherits.
    let e = read_err("[{\"type\":\"invoke\",\"process\":0,\"value\":1}]");
    assert!(e.contains("expected the op to have `f`"), "{e}");
}

#[test]
fn linearizability_evidence_names_the_carried_index() {
    // A stale read in Knossos's shape, indices from 100.
    let edn = r#"[{:process 0, :type :invoke, :f :write, :value 1, :index 100}
{:process 0, :type :ok, :f :write, :value 1, :index 101}
{:process 1, :type :invoke, :f :read, :value nil, :index 102}
{:process 1, :type :ok, :f :read, :value 0, :index 103}]"#;
    let h = read(edn);
    let r = LinearizabilityChecker::new("register", LinearizabilityOptions::default())
        .expect("model")
        .check(&h);
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    let evidence = serde_json::to_string(&r.evidence).expect("json");
    assert!(evidence.contains("\"index\":102"), "{evidence}");
    assert!(!evidence.contains("\"index\":2,"), "{evidence}");
}

#[test]
fn dense_indices_and_missing_ones_keep_positions() {
    let h = read("{\"index\":0,\"type\":\"invoke\",\"f\":\"read\",\"process\":0}\n{\"index\":1,\"type\":\"ok\",\"f\":\"read\",\"process\":0,\"value\":1}\n");
    assert_eq!((h.op_index(0), h.op_index(1)), (0, 1));
    // A file whose second op lacks an index: that op is named by its position.
    let h = read("{\"index\":7,\"type\":\"invoke\",\"f\":\"read\",\"process\":0}\n{\"type\":\"ok\",\"f\":\"read\",\"process\":0,\"value\":1}\n");
    assert_eq!((h.op_index(0), h.op_index(1)), (7, 1));
}

#[test]
fn carried_indices_survive_parallel_chunks_of_a_big_json_lines_file() {
    // Several 1 MiB chunks: indices 100, 102, 104, ... everywhere; then a file where only
    // ops past the first chunk carry (position-equal) indices, and one where a late op
    // carries a different one.
    let line = |i: u64, index: Option<u64>| {
        let t = if i.is_multiple_of(2) { "invoke" } else { "ok" };
        let index = index.map(|x| format!("\"index\":{x},")).unwrap_or_default();
        format!(
            "{{{index}\"process\":{},\"type\":\"{t}\",\"f\":\"write\",\"value\":[{i},\"padding-padding-padding\"]}}\n",
            (i / 2) % 5
        )
    };
    let n = 60_000u64;
    let text: String = (0..n).map(|i| line(i, Some(100 + 2 * i))).collect();
    assert!(text.len() > 3 << 20);
    let h = read(&text);
    for pos in [0usize, 1, 20_000, 40_001, 59_999] {
        assert_eq!(h.op_index(pos), 100 + 2 * pos as u64);
    }
    let text: String = (0..n).map(|i| line(i, (i > 30_000).then_some(i))).collect();
    let h = read(&text);
    assert_eq!((h.op_index(5), h.op_index(50_000)), (5, 50_000));
    let text: String = (0..n)
        .map(|i| line(i, (i == 50_000).then_some(1_000_007)))
        .collect();
    let h = read(&text);
    assert_eq!(
        (h.op_index(49_999), h.op_index(50_000), h.op_index(50_001)),
        (49_999, 1_000_007, 50_001)
    );
    // Carrying an index another op has (here by its position) would make results
    // ambiguous about which op they name.
    let text: String = (0..n)
        .map(|i| line(i, (i == 50_000).then_some(7)))
        .collect();
    let e = read_str(&text, Path::new("h"), None).expect_err("refused");
    assert!(e.to_string().contains("two ops carry index 7"), "{e}");
}

#[test]
fn structure_errors_name_ops_by_their_carried_index() {
    // Process 0 invokes twice; the ops carry indices 40 and 41 (EDN and JSON Lines).
    let edn = "{:process 0 :type :invoke :f :read :index 40}\n{:process 0 :type :invoke :f :read :index 41}\n";
    let jsonl = "{\"index\":40,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"}\n{\"index\":41,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"}\n";
    for text in [edn, jsonl] {
        let e = read_err(text);
        assert_eq!(
            e, "history op 41: process 0 invokes while its op at index 40 is still open",
            "{text}"
        );
    }
}
