//! `splitbrain list`: targets, workloads, models, checkers and nemeses.

pub(crate) fn list_text() -> String {
    let mut out = String::from("targets:\n");
    for t in splitbrain::systems::all() {
        out.push_str(&format!("  {:<24} {}\n", t.name(), t.description()));
        if !t.read_modes().is_empty() {
            out.push_str(&format!("    read modes: {}\n", t.read_modes().join(", ")));
        }
        out.push_str(&format!("    workloads: {}\n", t.workloads().join(", ")));
        for b in t.bugs() {
            out.push_str(&format!("    bug {:<22} {}\n", b.name, b.description));
        }
    }
    // `exec` is not in `target::all()`: it is whatever server its spec file describes.
    out.push_str(&format!(
        "  {:<24} {}\n",
        "exec",
        "any server following docs/http-contract.md: --target exec --target-spec FILE.toml \
         (command template, workloads, read modes, bugs; e.g. targets/kv/exec.toml, \
         targets/txn/exec.toml, examples/http-contract/python/register.toml)"
    ));
    // Nor is `maelstrom`: its nodes speak stdin/stdout through a network the harness simulates.
    out.push_str(&format!(
        "  {:<24} {}\n",
        "maelstrom",
        "any program speaking Maelstrom's protocol (JSON lines on stdin/stdout): --target \
         maelstrom --bin PATH [--bin-arg ARG].. [--latency MS --latency-dist D --topology T]; \
         services lin-kv, seq-kv, lww-kv, lin-tso; e.g. examples/maelstrom/"
    ));
    let names: Vec<&str> = splitbrain::maelstrom::workloads::WORKLOADS
        .iter()
        .map(|(n, _)| *n)
        .collect();
    out.push_str(&format!("    workloads: {}\n", names.join(", ")));
    out.push_str("workloads:\n");
    for w in splitbrain::workload::registry::all() {
        out.push_str(&format!("  {:<24} {}\n", w.name(), w.description()));
    }
    out.push_str("linearizability models (--model):\n");
    for (name, desc) in splitbrain_checkers::linearizability::models() {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out.push_str("consistency models (--consistency-model):\n");
    for (name, desc) in splitbrain_checkers::elle::consistency_models() {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out.push_str("checkers (check --checker NAME):\n");
    for (name, desc) in splitbrain_checkers::jepsen::CHECKERS {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out.push_str("nemeses (--nemesis, comma separated):\n");
    for (name, desc) in [
        ("partition", "network partitions through the proxy mesh (halves, isolate one, isolate the leader, majorities ring, bridge, one-way)"),
        ("partition-leader", "cut the current leader off from every other node (the isolate-leader shape every time)"),
        ("leader-churn", "cut the leader off; each time another node takes over, cut that one off instead (three hand-overs per fault)"),
        ("figure-8", "stage Raft's figure 8 round after round (3 nodes): cut every node off until the leader steps down; keep it cut off while the others elect a successor over slow links; cut the successor off the moment it leads and bring the first back; cut that one off just after it leads again (answers to clients slowed meanwhile) and bring the successor back"),
        ("kill", "kill -9 and restart nodes (one, a minority, a majority, all, the leader)"),
        ("kill-one", "kill -9 and restart one node at a time (a crash a majority survives)"),
        ("pause", "SIGSTOP / SIGCONT nodes"),
        ("clock", "bump, strobe or skew node clocks through their admin endpoint"),
        ("slow", "add latency with jitter to links"),
        ("loss", "drop a fraction of link traffic"),
        ("slow-client", "delay (with jitter) a node's answers to its clients, through a proxy in front of its client port"),
        ("strobe-pause", "SIGSTOP a node for a moment at the start of every period (e.g. 30 ms every 300 ms), like GC pauses"),
        ("none", "no faults"),
    ] {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out
}
