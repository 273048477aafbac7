//! `splitbrain list`: targets, workloads, models, checkers and nemeses.

use splitbrain_checkers::table::Table;

/// One section: its title line, then its rows as two aligned columns, indented.
fn section(out: &mut String, title: &str, rows: impl IntoIterator<Item = (String, String)>) {
    let mut t = Table::headless().indented(2);
    for (name, desc) in rows {
        t.row([name, desc]);
    }
    out.push_str(title);
    out.push('\n');
    out.push_str(&t.plain());
}

pub(crate) fn list_text() -> String {
    let mut out = String::new();
    // A target's read modes, workloads and bugs stand under it, two spaces further in.
    let mut targets = Vec::new();
    for t in crate::systems::all() {
        targets.push((t.name().to_string(), t.description().to_string()));
        if !t.read_modes().is_empty() {
            targets.push(("  read modes:".into(), t.read_modes().join(", ")));
        }
        targets.push(("  workloads:".into(), t.workloads().join(", ")));
        for b in t.bugs() {
            targets.push((format!("  bug {}", b.name), b.description.to_string()));
        }
    }
    // `exec` is not in `target::all()`: it is whatever server its spec file describes.
    targets.push((
        "exec".into(),
        "any server following docs/http-contract.md: --target exec --target-spec FILE.toml \
         (command template, workloads, read modes, bugs; e.g. targets/kv/exec.toml, \
         targets/txn/exec.toml, examples/http-contract/python/register.toml)"
            .into(),
    ));
    // Nor is `maelstrom`: its nodes speak stdin/stdout through a network the harness simulates.
    targets.push((
        "maelstrom".into(),
        "any program speaking Maelstrom's protocol (JSON lines on stdin/stdout): --target \
         maelstrom --bin PATH [--bin-arg ARG].. [--latency MS --latency-dist D --topology T]; \
         services lin-kv, seq-kv, lww-kv, lin-tso; e.g. examples/maelstrom/"
            .into(),
    ));
    let names: Vec<&str> = crate::maelstrom::workloads::WORKLOADS
        .iter()
        .map(|(n, _)| *n)
        .collect();
    targets.push(("  workloads:".into(), names.join(", ")));
    section(&mut out, "targets:", targets);
    let pair = |(n, d): (&str, &str)| (n.to_string(), d.to_string());
    section(
        &mut out,
        "workloads:",
        crate::workload::registry::all()
            .iter()
            .map(|w| (w.name().to_string(), w.description().to_string())),
    );
    section(
        &mut out,
        "linearizability models (--model):",
        splitbrain_checkers::linearizability::models()
            .iter()
            .copied()
            .map(pair),
    );
    section(
        &mut out,
        "consistency models (--consistency-model):",
        splitbrain_checkers::elle::consistency_models()
            .iter()
            .copied()
            .map(pair),
    );
    section(
        &mut out,
        "checkers (check --checker NAME):",
        splitbrain_checkers::jepsen::CHECKERS
            .iter()
            .copied()
            .map(pair),
    );
    let nemeses = [
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
    ];
    section(
        &mut out,
        "nemeses (--nemesis, comma separated):",
        nemeses.into_iter().map(pair),
    );
    out
}
