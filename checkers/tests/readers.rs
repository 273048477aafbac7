//! History readers: happy paths per format, detection, malformed input with exact
//! `FILE:LINE: reason` errors, the public Porcupine histories, and write/read round trips.

use crate::skip;

use proptest::prelude::*;
use serde_json::{json, Value};
use splitbrain_checkers::history::read::{read_ops, read_path, read_str, Format};
use splitbrain_checkers::history::write::write_json_lines;
use splitbrain_checkers::{Op, OpType, Process};
use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data")
}

fn ops(text: &str, format: Option<Format>) -> Vec<Op> {
    match read_ops(text, Path::new("t"), format) {
        Ok(ops) => ops,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn err(text: &str, format: Option<Format>) -> String {
    match read_ops(text, Path::new("h.txt"), format) {
        Ok(ops) => panic!("expected an error, got {} ops", ops.len()),
        Err(e) => e.to_string(),
    }
}

fn op(process: Process, t: OpType, f: &str, value: Value) -> Op {
    Op::new(process, t, f, value)
}

#[test]
fn every_porcupine_history_parses() {
    let root = data_dir().join("porcupine");
    if !root.is_dir() {
        skip::skip_here(&format!("{} not present", root.display()));
        return;
    }
    let mut files = 0;
    for (sub, ext, format) in [
        ("jepsen", "log", Format::JepsenLog),
        ("kv", "txt", Format::Edn),
    ] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(sub))
            .expect("data dir listable")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        paths.sort();
        assert!(!paths.is_empty(), "no .{ext} files in {sub}");
        for path in paths {
            let text = std::fs::read_to_string(&path).expect("readable");
            let history = read_path(&path).unwrap_or_else(|e| panic!("{e}"));
            if text.trim().is_empty() {
                // etcd_095: an empty history (checkers call it unknown).
                assert!(history.is_empty(), "{}", path.display());
            } else {
                assert_eq!(Format::detect(&text), format, "{}", path.display());
                assert!(!history.is_empty(), "{} has no ops", path.display());
                assert!(
                    !history.pairs().is_empty(),
                    "{} has no pairs",
                    path.display()
                );
            }
            files += 1;
        }
    }
    println!("parsed {files} Porcupine histories");
    assert!(files > 0);
}

#[test]
fn porcupine_timed_out_completions_keep_invoke_value() {
    let path = data_dir().join("porcupine/jepsen/etcd_000.log");
    if !path.is_file() {
        skip::skip_here(&format!("{} not present", path.display()));
        return;
    }
    let history = read_path(&path).unwrap_or_else(|e| panic!("{e}"));
    let timed_out: Vec<_> = history
        .ops()
        .iter()
        .filter(|o| o.error == Some(json!("timed-out")))
        .collect();
    assert!(!timed_out.is_empty());
    for o in timed_out {
        assert!(matches!(o.op_type, OpType::Info | OpType::Fail));
        assert_ne!(o.value, json!("timed-out"));
    }
}

#[test]
fn edn_vector_spanning_lines() {
    let text = "; a Jepsen history\n[{:index 0, :time 5, :process 0, :type :invoke, :f :cas,\n  :key \"k1\", :value [1 2], :node \"n1\"}\n {:process 0 :type :ok :f :cas :key \"k1\" :value [1 2] :extra #{:a}}\n {:process :nemesis, :type :info, :f :start-partition,\n  :value {\"n1\" #{\"n2\" \"n3\"}, :majority nil}}\n {:process 3 :type :invoke :f :read :key 7 :value nil}\n {:process 3 :type :fail :f :read :key 7 :error [:timeout \"slow\"]}]\n";
    let got = ops(text, None);
    let mut expected = vec![
        op(Process::Client(0), OpType::Invoke, "cas", json!([1, 2]))
            .with_key("k1")
            .at(5),
        op(Process::Client(0), OpType::Ok, "cas", json!([1, 2])).with_key("k1"),
        op(
            Process::Nemesis,
            OpType::Info,
            "start-partition",
            json!({"n1": ["n2", "n3"], "majority": null}),
        ),
        op(Process::Client(3), OpType::Invoke, "read", Value::Null).with_key(7),
        op(Process::Client(3), OpType::Fail, "read", Value::Null).with_key(7),
    ];
    for (i, op) in expected.iter_mut().enumerate() {
        op.index = i as u64;
    }
    expected[0].node = Some("n1".into());
    expected[4].error = Some(json!(["timeout", "slow"]));
    assert_eq!(got, expected);
    let history = read_str(text, Path::new("t"), None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(history.pairs().len(), 2);
    assert_eq!(history.nemesis_ops().count(), 1);
}

#[test]
fn edn_one_map_per_line_with_commas_and_comments() {
    let text = "{:process 9, :type :invoke, :f :append, :key \"0\", :value \"x 9 0 y\"}\n\
                ; comment line\n\
                {:process 9, :type :ok, :f :append, :key \"0\", :value \"x 9 0 y\"} ; trailing\n\
                {:process 4 :type :invoke :f :get :key \"5\" :value nil :time 12345678901}\n";
    let got = ops(text, None);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].value, json!("x 9 0 y"));
    assert_eq!(got[1].op_type, OpType::Ok);
    assert_eq!(got[2].time, 12_345_678_901);
    assert_eq!(got[2].key, Some(json!("5")));
    assert!(ops("", Some(Format::Edn)).is_empty());
    assert!(ops("[]", Some(Format::Edn)).is_empty());
}

#[test]
fn jepsen_log_tabs_spaces_prefixes_and_nemesis() {
    let text = "2017-03-01 12:00:00,123{GMT}\tINFO\t[main] jepsen.core - Running test\n\
                \n\
                INFO  jepsen.util - 2\t:invoke\t:cas\t[3 0]\n\
                INFO jepsen.util - 2 :fail :cas [3 0]\n\
                2017-03-01 12:00:00,123{GMT}\tINFO\t[jepsen worker 3] jepsen.util: 3\t:invoke\t:read\tnil\n\
                INFO  jepsen.util - 3\t:ok\t:read\t{:a 1}\n\
                INFO  jepsen.util - :nemesis\t:info\t:start\t{\"n1\" [\"n2\"]}\n\
                INFO  jepsen.util - 7\t:invoke\t:write\n\
                INFO  jepsen.util - 7 :info :write indeterminate: socket closed\n";
    let got = ops(text, None);
    let mut expected = vec![
        op(Process::Client(2), OpType::Invoke, "cas", json!([3, 0])),
        op(Process::Client(2), OpType::Fail, "cas", json!([3, 0])),
        op(Process::Client(3), OpType::Invoke, "read", Value::Null),
        op(Process::Client(3), OpType::Ok, "read", json!({"a": 1})),
        op(
            Process::Nemesis,
            OpType::Info,
            "start",
            json!({"n1": ["n2"]}),
        ),
        op(Process::Client(7), OpType::Invoke, "write", Value::Null),
        op(
            Process::Client(7),
            OpType::Info,
            "write",
            json!("indeterminate:"),
        ),
    ];
    expected[6].error = Some(json!("socket closed"));
    assert_eq!(got, expected);
}

#[test]
fn jepsen_log_keyword_completion_becomes_error_with_invoke_value() {
    let text = "INFO jepsen.util - 7 :invoke :write 4\n\
                INFO jepsen.util - 7 :info :write :timed-out\n\
                INFO jepsen.util - 8 :invoke :read nil\n\
                INFO jepsen.util - 8 :fail :read :timed-out\n\
                INFO jepsen.util - 9 :invoke :read nil\n\
                INFO jepsen.util - 9 :ok :read :absent\n";
    let got = ops(text, Some(Format::JepsenLog));
    assert_eq!(got[1].value, json!(4));
    assert_eq!(got[1].error, Some(json!("timed-out")));
    assert_eq!(got[3].value, Value::Null);
    assert_eq!(got[3].error, Some(json!("timed-out")));
    // `ok` values are results and stay as they are.
    assert_eq!(got[5].value, json!("absent"));
    assert_eq!(got[5].error, None);
    assert!(ops("", None).is_empty());
}

#[test]
fn json_lines_and_array_happy_paths() {
    let lines = "{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"value\":null}\n\n\
                 {\"index\":1,\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"value\":3}\n";
    let got = ops(lines, None);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].value, json!(3));
    let array = "[\n {\"index\":0,\"process\":\"nemesis\",\"type\":\"info\",\"f\":\"kill\"}\n]";
    let got = ops(array, None);
    assert_eq!(
        got,
        vec![op(Process::Nemesis, OpType::Info, "kill", Value::Null)]
    );
}

#[test]
fn detects_formats() {
    let cases = [
        ("{\"index\":0}", Format::JsonLines),
        ("  \n{ \"index\":0}", Format::JsonLines),
        ("[{\"index\":0}]", Format::JsonArray),
        ("[ ]", Format::JsonArray),
        ("[\n  {\n \"index\": 0}]", Format::JsonArray),
        ("{:process 0 :type :invoke}", Format::Edn),
        ("{\n :process 0}", Format::Edn),
        ("[{:index 0}]", Format::Edn),
        ("[\n{:process 0}]", Format::Edn),
        ("({:process 0})", Format::Edn),
        ("; comment\n{:process 0}", Format::Edn),
        (
            "INFO  jepsen.util - 2\t:invoke\t:cas\t[3 0]",
            Format::JepsenLog,
        ),
        (
            "2017-03-01 INFO jepsen.util: 1 :ok :read 2",
            Format::JepsenLog,
        ),
        ("", Format::JepsenLog),
    ];
    for (text, expected) in cases {
        assert_eq!(Format::detect(text), expected, "{text:?}");
    }
}

#[test]
fn malformed_edn_names_file_line_and_reason() {
    let bad_type = "[{:process 0 :type :invoke :f :read}\n {:process 0\n  :type :okay :f :read}]";
    assert_eq!(
        err(bad_type, None),
        "h.txt:3: expected :type to be one of :invoke :ok :fail :info, got :okay"
    );
    let missing_f = "{:process 0 :type :invoke :f :read}\n{:process 1 :type :invoke}\n";
    assert_eq!(
        err(missing_f, None),
        "h.txt:2: expected the op to have `f`, or a value that is a list of [f, key, value] \
         micro-ops (a transaction); found no `f` and value null"
    );
    let bad_process = "\n{:process -1 :type :invoke :f :read}";
    assert_eq!(
        err(bad_process, None),
        "h.txt:2: expected :process to be a non-negative integer or :nemesis, got -1"
    );
    let unclosed =
        "[{:process 0 :type :invoke :f :read}\n{:process 0 :type :ok :f :read :value \"abc}]\n";
    assert!(err(unclosed, Some(Format::Edn)).starts_with("h.txt:2: expected `\"` closing"));
    let not_a_map = "{:process 0 :type :invoke :f :read}\n[1 2]";
    assert_eq!(
        err(not_a_map, Some(Format::Edn)),
        "h.txt:2: expected an op map `{...}`, found `[`"
    );
    let deep = format!(
        "{{:process 0 :type :invoke :f :read :value {}}}",
        "[".repeat(500)
    );
    assert!(err(&deep, Some(Format::Edn)).contains("levels of nesting"));
    let trailing = "[{:process 0 :type :invoke :f :read}]\n\n{:x 1}";
    assert!(err(trailing, Some(Format::Edn)).starts_with("h.txt:3: expected end of input"));
}

#[test]
fn malformed_jepsen_log_names_file_line_and_reason() {
    let text = "INFO  jepsen.util - 2\t:invoke\t:cas\t[3 0]\n\
                other line\n\
                INFO  jepsen.util - 2\t:done\t:cas\t[3 0]\n";
    assert_eq!(
        err(text, None),
        "h.txt:3: expected the op type to be one of :invoke :ok :fail :info, got :done"
    );
    let short = "INFO  jepsen.util - 2 :invoke\n";
    assert_eq!(
        err(short, None),
        "h.txt:1: expected an op name (:read, :write, ...), found end of line"
    );
    let bad_value = "\nINFO jepsen.util - 2 :invoke :cas [3 0\n";
    assert!(err(bad_value, None).starts_with("h.txt:2: expected `]` closing"));
    let bad_process = "INFO jepsen.util - x :invoke :read nil";
    assert!(err(bad_process, None).starts_with("h.txt:1: expected a process"));
}

#[test]
fn malformed_json_names_file_line_and_reason() {
    let lines = "{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"}\n\
                 {\"index\":1,\"process\":0,\"type\":\"okay\",\"f\":\"read\"}\n";
    assert!(err(lines, None).starts_with("h.txt:2: expected a JSON op object"));
    let array = "[\n{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"},\n\
                 {\"index\":1,\"process\":0,\"type\":\"ok\",\"f\":3}\n]";
    assert!(err(array, None).starts_with("h.txt:3: element 1 of the array is not an op"));
    assert!(err("[{\"index\":0,", None).starts_with("h.txt:1: expected a JSON array"));
}

#[test]
fn json_lines_history_fails_like_the_op_reader() {
    let good = r#"{"index":0,"process":0,"type":"invoke","f":"read"}"#;
    let nested = format!("[{}]", "[".repeat(200) + &"]".repeat(200));
    let bad_lines = [
        r#"{"index":1,"process":0,"type":"ok","f":"read","value":1e400}"#.to_string(),
        r#"{"index":1,"process":0,"type":"ok","f":"read","key":-1e999}"#.to_string(),
        r#"{"index":1,"process":0,"type":"ok","f":"read","error":[1e999]}"#.to_string(),
        r#"{"index":1,"process":0,"type":"ok","f":"read","value":[1,}"#.to_string(),
        // A malformed micro-op list inside a transaction's value.
        r#"{"index":1,"process":0,"type":"ok","f":"txn","value":[["append",1,2],["r",1,[2,}]]}"#
            .to_string(),
        r#"{"index":1,"process":-1,"type":"ok","f":"read"}"#.to_string(),
        r#"{"index":1,"process":0,"type":"ok","f":7}"#.to_string(),
        r#"{"index":1,"process":0,"type":"ok","f":"read","index":2}"#.to_string(),
        r#"{"index":1,"process":0,"type":"ok","f":"read","value":1,"value":2}"#.to_string(),
        r#"{"index":1,"process":0,"type":"ok","f":"read"} x"#.to_string(),
        format!(r#"{{"index":1,"process":0,"type":"ok","f":"read","value":{nested}}}"#),
    ];
    for bad in &bad_lines {
        let text = format!("{good}\n\n{bad}\n");
        let eager = err(&text, None);
        assert!(
            eager.starts_with("h.txt:3: expected a JSON op object"),
            "{eager}"
        );
        let lazy = read_str(&text, Path::new("h.txt"), None)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(lazy.to_string(), eager, "{bad}");
    }
}

#[test]
fn json_lines_errors_past_the_first_megabyte_name_the_right_line() {
    // Big enough to be read in several parallel chunks, with blank lines among them.
    let mut text = String::new();
    for i in 0..40_000u64 {
        let p = i % 7;
        text.push_str(&format!(
            "{{\"index\":{},\"process\":{p},\"type\":\"invoke\",\"f\":\"write\",\"value\":[{i},\"padding-padding\"]}}\n",
            2 * i
        ));
        text.push_str(&format!(
            "{{\"index\":{},\"process\":{p},\"type\":\"ok\",\"f\":\"write\",\"value\":[{i},\"padding-padding\"]}}\n",
            2 * i + 1
        ));
        if i % 1000 == 0 {
            text.push_str("\n  \r\n");
        }
    }
    assert!(text.len() > 3 << 20);
    let history = read_str(&text, Path::new("big.jsonl"), None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(history.len(), 80_000);
    let eager = read_ops(&text, Path::new("big.jsonl"), None).expect("valid");
    let eager = splitbrain_checkers::History::new(eager).expect("well formed");
    assert!(
        history.ops() == eager.ops(),
        "text-backed ops differ from parsed ops"
    );
    text.push_str("{\"index\":0,\"process\":0,\"type\":\"ok\"}\n");
    let lazy = read_str(&text, Path::new("big.jsonl"), None)
        .map(|_| ())
        .unwrap_err();
    let eager = read_ops(&text, Path::new("big.jsonl"), None)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(lazy.to_string(), eager.to_string());
    assert!(lazy.to_string().starts_with("big.jsonl:80081: "), "{lazy}");
}

// ---- round trips -------------------------------------------------------------------------

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z\" ]{0,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        "[a-z0-9]{1,4}".prop_map(|s| Some(Value::from(s))),
        (0i64..1000).prop_map(|k| Some(Value::from(k))),
    ]
}

/// One scheduling step: who acts and with what; the simulation decides invoke/complete.
type Step = (
    u8,
    u8,
    String,
    Option<Value>,
    Value,
    Option<String>,
    Option<String>,
    u64,
);

fn step() -> impl Strategy<Value = Step> {
    (
        0u8..6,
        0u8..3,
        "[a-z][a-z-]{0,6}",
        key(),
        json_value(),
        proptest::option::of("n[1-5]"),
        proptest::option::of("[a-z-]{1,8}"),
        any::<u64>(),
    )
}

/// Turns steps into a well-formed history: process 5 is the nemesis; a client completes
/// its open op (ok/fail/info by `kind`) or else invokes a new one.
fn history_from(steps: Vec<Step>) -> Vec<Op> {
    let mut open: [Option<(String, Option<Value>)>; 5] = Default::default();
    let mut ops = Vec::new();
    // Times only move forward in a history (the readers refuse one that runs backwards).
    let mut clock = 0u64;
    for (i, (who, kind, f, key, value, node, error, time)) in steps.into_iter().enumerate() {
        let mut o = if who == 5 {
            op(Process::Nemesis, OpType::Info, &f, value)
        } else if let Some((f, key)) = open[who as usize].take() {
            let t = [OpType::Ok, OpType::Fail, OpType::Info][kind as usize];
            let mut o = op(Process::Client(who as u64), t, &f, value);
            o.key = key;
            o.error = error.filter(|_| t != OpType::Ok).map(Value::from);
            o
        } else {
            open[who as usize] = Some((f.clone(), key.clone()));
            let mut o = op(Process::Client(who as u64), OpType::Invoke, &f, value);
            o.key = key;
            o
        };
        o.index = i as u64;
        clock += time % 1_000_000_000;
        o.time = clock;
        o.node = node;
        ops.push(o);
    }
    ops
}

/// Minimal EDN printer for the round trip (strings escaped as EDN requires).
fn edn(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("nil"),
        Value::Bool(b) => out.push_str(&b.to_string()),
        Value::Number(n) => out.push_str(&n.to_string()),
        // JSON string escapes are valid EDN string escapes.
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(items) => {
            out.push('[');
            for item in items {
                edn(item, out);
                out.push_str(", ");
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (k, item) in map {
                edn(&Value::String(k.clone()), out);
                out.push(' ');
                edn(item, out);
                out.push_str(",\n");
            }
            out.push('}');
        }
    }
}

fn edn_history(ops: &[Op]) -> String {
    let mut out = String::from("[\n");
    for o in ops {
        let process = match o.process {
            Process::Client(p) => p.to_string(),
            Process::Nemesis => ":nemesis".into(),
        };
        out.push_str(&format!(
            "{{:index {} :time {} :process {process} :type :{} :f :{} :value ",
            o.index,
            o.time,
            o.op_type.as_str(),
            o.f
        ));
        edn(&o.value, &mut out);
        for (name, field) in [("key", &o.key), ("error", &o.error)] {
            if let Some(v) = field {
                out.push_str(&format!(" :{name} "));
                edn(v, &mut out);
            }
        }
        if let Some(node) = &o.node {
            out.push_str(&format!(" :node {}", Value::from(node.as_str())));
        }
        out.push_str("}\n");
    }
    out.push(']');
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn json_lines_round_trip(steps in prop::collection::vec(step(), 0..40)) {
        let original = history_from(steps);
        let mut buf = Vec::new();
        write_json_lines(&mut buf, &original).expect("write to memory");
        let text = String::from_utf8(buf).expect("JSON is UTF-8");
        let history = read_str(&text, Path::new("rt.jsonl"), None)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(history.ops(), &original[..]);
        // The text-backed history pairs exactly like one built from parsed ops.
        if let Ok(parsed) = splitbrain_checkers::History::new(original.clone()) {
            let fresh = read_str(&text, Path::new("rt.jsonl"), None)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(fresh.pair_slots(), parsed.pair_slots());
            prop_assert_eq!(fresh.pairs(), parsed.pairs());
        }
    }

    #[test]
    fn json_array_round_trip(steps in prop::collection::vec(step(), 0..40)) {
        let original = history_from(steps);
        let text = serde_json::to_string_pretty(&original).expect("ops serialize");
        let history = read_str(&text, Path::new("rt.json"), None)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(history.ops(), &original[..]);
    }

    #[test]
    fn edn_round_trip(steps in prop::collection::vec(step(), 0..40)) {
        let original = history_from(steps);
        let text = edn_history(&original);
        let history = read_str(&text, Path::new("rt.edn"), None)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(history.ops(), &original[..]);
    }

    #[test]
    fn readers_never_panic(text in "\\PC{0,200}") {
        for format in [None, Some(Format::JsonLines), Some(Format::JsonArray),
                       Some(Format::Edn), Some(Format::JepsenLog)] {
            let _ = read_ops(&text, Path::new("p"), format);
        }
        // JSON Lines read into a history (kept as text) fails where the op reader does,
        // with the same message.
        if let Err(e) = read_ops(&text, Path::new("p"), Some(Format::JsonLines)) {
            let lazy = read_str(&text, Path::new("p"), Some(Format::JsonLines));
            prop_assert_eq!(lazy.err().map(|e| e.to_string()), Some(e.to_string()));
        }
    }
}

#[test]
fn text_in_which_no_line_is_an_op_is_refused_naming_file_line_and_what_was_expected() {
    for (text, line, says) in [
        ("hello world\nthis is not a history\n", 1, "\"hello world\""),
        (
            "\n\n<html><body>x</body></html>\n",
            3,
            "no line of the file is an op",
        ),
        (
            "2017-01-01 INFO jepsen.core - Running test\n",
            1,
            "Jepsen log lines",
        ),
        (
            "index,time,process,type,f,value\n0,1,0,invoke,write,1\n",
            1,
            "expected a history",
        ),
    ] {
        let e = err(text, None);
        assert!(e.starts_with(&format!("h.txt:{line}: ")), "{text:?}: {e}");
        assert!(e.contains(says), "{text:?}: {e}");
        let via_history = read_str(text, Path::new("h.txt"), None).expect_err("refused");
        assert_eq!(via_history.to_string(), e);
    }
}

#[test]
fn a_json_array_with_no_ops_is_an_empty_history_not_an_error() {
    // It is a history, just one that shows nothing; checkers call it unknown.
    assert!(read_str("[]", Path::new("h.json"), None)
        .unwrap()
        .is_empty());
}

#[test]
fn two_ops_carrying_one_index_are_refused() {
    let text = concat!(
        "{\"index\":0,\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"write\",\"value\":1}\n",
        "{\"index\":1,\"time\":2,\"process\":0,\"type\":\"ok\",\"f\":\"write\",\"value\":1}\n",
        "{\"index\":1,\"time\":3,\"process\":1,\"type\":\"invoke\",\"f\":\"read\",\"value\":null}\n",
    );
    let e = read_str(text, Path::new("h.jsonl"), None)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("two ops carry index 1"), "{e}");
}

#[test]
fn time_running_backwards_is_refused() {
    let text = concat!(
        "{\"index\":0,\"time\":100,\"process\":0,\"type\":\"invoke\",\"f\":\"write\",\"value\":1}\n",
        "{\"index\":1,\"time\":5,\"process\":0,\"type\":\"ok\",\"f\":\"write\",\"value\":1}\n",
    );
    let e = read_str(text, Path::new("h.jsonl"), None)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("history op 1: time goes backwards"), "{e}");
    let edn = "[{:index 0 :time 9 :process 0 :type :invoke :f :read :value nil}\n {:index 1 :time 8 :process 0 :type :ok :f :read :value 1}]";
    let e = read_str(edn, Path::new("h.edn"), None)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("time goes backwards"), "{e}");
    // Equal times (Jepsen text logs carry none) are fine.
    let flat = text.replace("\"time\":100", "\"time\":5");
    assert_eq!(
        read_str(&flat, Path::new("h.jsonl"), None).unwrap().len(),
        2
    );
}

#[test]
fn a_file_that_is_not_utf8_is_refused_at_the_line_and_column_of_its_first_bad_byte() {
    let path = std::env::temp_dir().join(format!("sb-readers-{}-latin1.jsonl", std::process::id()));
    let mut bytes =
        b"{\"index\":0,\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"write\",\"value\":1}\n"
            .to_vec();
    bytes.extend_from_slice(b"{\"f\":\"caf\xe9\"}\n");
    std::fs::write(&path, &bytes).unwrap();
    let e = read_path(&path).expect_err("refused").to_string();
    let _ = std::fs::remove_file(&path);
    assert!(
        e.ends_with(":2: expected UTF-8 text; byte 0xe9 at column 10 is not"),
        "{e}"
    );
}
