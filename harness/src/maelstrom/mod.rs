//! `--target maelstrom`: any program that speaks Maelstrom's protocol, unmodified.
//!
//! Maelstrom (Jepsen's workbench for distributed-systems students) runs node binaries that
//! read JSON messages on stdin and write them on stdout, and simulates the network between
//! them. splitbrain does the same with its own faults and checkers:
//!
//! ```text
//! splitbrain test --target maelstrom --bin ./broadcast.py --workload broadcast \
//!     --nodes 5 --topology grid --latency 10 --nemesis partition --time-limit 20
//! ```
//!
//! - [`nodes`]: `N` processes `n0..n(N-1)` (as Maelstrom names them, so a node may compute
//!   a peer's id from a number), all sent `init` at once; a killed node restarts with a
//!   fresh `init`. The same names are the nodes' directories, the history's `node` and the
//!   nemesis's ([`crate::run::spec::TestSpec::node_names`]).
//! - [`net`]: the network inside the controller — base latency (`--latency`, `--latency-dist`),
//!   and the nemesis's partitions, slow links and loss applied per message by its `src`
//!   (any known node or client, as Maelstrom's); the message statistics Maelstrom users
//!   tune against.
//!
//! What matches Maelstrom, and where splitbrain is stricter on purpose: `docs/maelstrom.md`.
//! - [`services`]: `lin-kv`, `seq-kv`, `lww-kv`, `lin-tso`.
//! - [`workloads`]: Maelstrom's workloads with their message shapes and checkers
//!   ([`kafka`]: the logs workload, its generator and consumer state);
//!   [`client`]: one Maelstrom client per logical process, bound to one node.
//!
//! Faults: `partition` (and the other partition shapes), `kill`, `pause`, `slow`, `loss`,
//! and `clock` (an optional `{"type":"clock","offset_ms":N}` message a node may honour).
//! A protocol violation by a node ends the run with exit code 4 and names the node and the
//! line.

pub mod client;
pub mod kafka;
pub mod net;
pub mod nodes;
pub mod protocol;
pub mod services;
pub mod workloads;

use crate::check_options::CheckOptions;
use crate::run::controller::{drive, finish_run, DriveClients, RunOutcome};
use crate::run::recorder::HistoryRecorder;
use crate::run::spec::TestSpec;
use crate::systems::Client;
use anyhow::Context;
use net::{MaelstromNet, NetOptions};
use nodes::{MaelstromNodes, NodeFiles};
use serde_json::json;
use splitbrain_nemesis::{Nemesis, NetworkFaults};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use workloads::MaelstromWorkload;

pub use crate::run::spec::MaelstromSpec;

/// The topologies `--topology` accepts (Maelstrom's).
pub const TOPOLOGIES: &[&str] = &["grid", "line", "total", "tree2", "tree3", "tree4"];

/// Each node's neighbours in a named topology; `None` for an unknown name.
pub fn topology(name: &str, nodes: &[String]) -> Option<BTreeMap<String, Vec<String>>> {
    let n = nodes.len();
    let neighbours = |i: usize| -> Vec<usize> {
        match name {
            "total" => (0..n).filter(|&j| j != i).collect(),
            "line" => [i.checked_sub(1), Some(i + 1).filter(|&j| j < n)]
                .into_iter()
                .flatten()
                .collect(),
            "grid" => {
                // Row-major on the smallest square that holds every node.
                let side = (1..=n).find(|s| s * s >= n).unwrap_or(1);
                let (r, c) = (i / side, i % side);
                let mut v = Vec::new();
                if r > 0 {
                    v.push(i - side);
                }
                if c > 0 {
                    v.push(i - 1);
                }
                if c + 1 < side && i + 1 < n {
                    v.push(i + 1);
                }
                if i + side < n {
                    v.push(i + side);
                }
                v
            }
            _ => {
                let k: usize = name
                    .strip_prefix("tree")
                    .and_then(|k| k.parse().ok())
                    .unwrap_or(2);
                let mut v: Vec<usize> = if i == 0 { vec![] } else { vec![(i - 1) / k] };
                v.extend((k * i + 1..=k * i + k).filter(|&j| j < n));
                v
            }
        }
    };
    if !TOPOLOGIES.contains(&name) {
        return None;
    }
    Some(
        (0..n)
            .map(|i| {
                (
                    nodes[i].clone(),
                    neighbours(i)
                        .into_iter()
                        .map(|j| nodes[j].clone())
                        .collect(),
                )
            })
            .collect(),
    )
}

/// Runs a whole test against Maelstrom nodes: start them and send `init` (and `topology`),
/// drive clients and the nemesis through the simulated network, heal, final reads,
/// teardown, check. A protocol violation ends the run early with an error.
pub(crate) async fn run_maelstrom_test(
    spec: &TestSpec,
    workload: MaelstromWorkload,
    check: &CheckOptions,
    cancel: CancellationToken,
    show_progress: bool,
) -> anyhow::Result<RunOutcome> {
    let m = spec
        .maelstrom
        .clone()
        .context("a maelstrom test needs --bin")?;
    anyhow::ensure!(m.bin.is_file(), "--bin {} is not a file", m.bin.display());
    let (nemesis_spec, spec, run_dir) = crate::run::controller::open_run(spec)?;
    let spec = &spec;
    let net = MaelstromNet::new(
        spec.node_names(),
        spec.nodes,
        NetOptions {
            latency_ms: m.latency_ms,
            latency_dist: m.latency_dist,
            seed: spec.seed,
        },
    );
    let files: Vec<NodeFiles> = net
        .node_ids()
        .iter()
        .map(|name| {
            let dir = run_dir.node_dir(name);
            NodeFiles {
                data_dir: dir.join("data"),
                log_file: dir.join("node.log"),
            }
        })
        .collect();
    let recorder = HistoryRecorder::create(&run_dir.history(), Instant::now(), true)?;
    let started = start_nodes(&m, workload, files, &net).await;
    let nodes = match started {
        Ok(n) => n,
        Err(why) => {
            crate::run::controller::record_start_failure(
                spec,
                &run_dir,
                &recorder,
                why.clone(),
                "the nodes",
            );
            anyhow::bail!("starting the maelstrom nodes: {why}");
        }
    };
    let nemesis = Nemesis::with_network(
        nemesis_spec,
        Some(Arc::new(net.clone()) as Arc<dyn NetworkFaults>),
    )
    .with_node_names(net.node_names());
    let nemesis = crate::run::memory::attach(nemesis, spec);
    let op_timeout = Duration::from_millis(spec.op_timeout_ms);
    let n = spec.nodes;
    let make_client: Arc<dyn Fn(usize) -> Box<dyn Client> + Send + Sync> = {
        let net = net.clone();
        Arc::new(move |home| {
            Box::new(client::MaelstromClient::new(
                net.clone(),
                home % n,
                workload,
                op_timeout,
            ))
        })
    };
    let clients = DriveClients {
        make_replica_client: make_client.clone(),
        make_client,
        replicas: n,
        steps_reached: None,
        stop_early: None,
    };
    // A protocol violation stops the run as Ctrl-C would, and is then reported as an error.
    let run_cancel = cancel.child_token();
    let watch = {
        let (aborted, run_cancel) = (net.aborted(), run_cancel.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = aborted.cancelled() => run_cancel.cancel(),
                _ = run_cancel.cancelled() => {}
            }
        })
    };
    let result = drive(
        spec,
        &workload,
        &nodes,
        &nemesis,
        clients,
        &recorder,
        run_cancel.clone(),
        show_progress,
    )
    .await;
    nodes.teardown();
    run_cancel.cancel();
    let _ = watch.await;
    let result = match net.fatal() {
        Some(why) => {
            eprintln!("splitbrain: error: {why}");
            Err(anyhow::anyhow!("protocol violation: {why}"))
        }
        None => result,
    };
    let stats = net.stats();
    let searched =
        crate::run::controller::fault_search(&nemesis, spec, &run_dir, recorder.counts.as_ref());
    finish_run(
        spec,
        &run_dir,
        &recorder,
        result,
        &cancel,
        &workload,
        check,
        Some(stats),
        None,
        searched,
        None,
    )
    .await
}

/// Starts every node, sends `init` and (broadcast) `topology`.
async fn start_nodes(
    m: &MaelstromSpec,
    workload: MaelstromWorkload,
    files: Vec<NodeFiles>,
    net: &MaelstromNet,
) -> Result<MaelstromNodes, String> {
    let nodes =
        MaelstromNodes::start(m.bin.clone(), m.bin_args.clone(), files, net.clone()).await?;
    if workload.wants_topology() {
        let topo = topology(&m.topology, net.node_ids())
            .ok_or_else(|| format!("unknown topology {:?}", m.topology))?;
        for i in 0..net.node_ids().len() {
            let body = json!({"type": "topology", "topology": topo});
            nodes.ask(i, body, "topology_ok").await?;
        }
    }
    Ok(nodes)
}

/// Where a test's `--bin` value came from, for `test.json`: absolute, so the run repeats
/// from any directory.
pub fn absolute_bin(bin: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Maelstrom run's node ids.
    fn ids(n: usize) -> Vec<String> {
        splitbrain_nemesis::NodeNames::FROM_ZERO.all(n)
    }

    #[test]
    fn topologies_are_symmetric_and_connected() {
        for name in TOPOLOGIES {
            for n in [1, 2, 5, 9, 10] {
                let t = topology(name, &ids(n)).unwrap();
                for (a, ns) in &t {
                    for b in ns {
                        assert!(t[b].contains(a), "{name} n={n}: {a}->{b} not mutual");
                    }
                }
                // Connected: a walk from n0 reaches everyone.
                let mut seen = std::collections::BTreeSet::from(["n0".to_string()]);
                let mut todo = vec!["n0".to_string()];
                while let Some(a) = todo.pop() {
                    for b in &t[&a] {
                        if seen.insert(b.clone()) {
                            todo.push(b.clone());
                        }
                    }
                }
                assert_eq!(seen.len(), n, "{name} n={n} is not connected");
            }
        }
        let grid = topology("grid", &ids(9)).unwrap();
        // Maelstrom's grid of 9: n4 in the middle.
        assert_eq!(grid["n4"], ["n1", "n3", "n5", "n7"]);
        let line = topology("line", &ids(3)).unwrap();
        assert_eq!(line["n1"], ["n0", "n2"]);
        // tree2: n0 is the root, the children of node i are 2i+1 and 2i+2.
        let tree = topology("tree2", &ids(5)).unwrap();
        assert_eq!(tree["n0"], ["n1", "n2"]);
        assert_eq!(tree["n1"], ["n0", "n3", "n4"]);
        assert!(topology("star", &ids(3)).is_none());
    }
}
