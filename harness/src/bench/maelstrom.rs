//! `splitbrain bench maelstrom`: the simulated network's own cost. Two figures:
//! routing alone (node-to-node lines parsed, faults looked up, re-serialized and handed
//! to the receiver's stdin queue, no process involved), and round trips through a real
//! echo node (client → network → node stdin → node → stdout → network → client).

use crate::maelstrom::client::MaelstromClient;
use crate::maelstrom::net::{LatencyDist, MaelstromNet, NetOptions};
use crate::maelstrom::nodes::{MaelstromNodes, NodeFiles};
use crate::maelstrom::workloads::MaelstromWorkload;
use crate::systems::{Client, Invocation};
use serde_json::json;
use splitbrain_nemesis::NodeNames;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What one bench measured.
#[derive(Debug, Clone)]
pub struct RoutingFigures {
    /// Messages routed.
    pub messages: u64,
    /// Seconds it took.
    pub seconds: f64,
}

impl RoutingFigures {
    /// Messages per second.
    pub fn per_sec(&self) -> f64 {
        self.messages as f64 / self.seconds.max(1e-9)
    }
    /// Nanoseconds per message.
    pub fn ns_per_msg(&self) -> f64 {
        self.seconds * 1e9 / (self.messages.max(1) as f64)
    }
}

fn options() -> NetOptions {
    NetOptions {
        latency_ms: 0.0,
        latency_dist: LatencyDist::Constant,
        seed: 1,
    }
}

/// Routes `messages` node-to-node messages of a typical gossip size between two nodes.
pub fn routing_only(messages: u64) -> RoutingFigures {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let _guard = rt.enter();
    let net = MaelstromNet::new(NodeNames::FROM_ZERO, 2, options());
    let (tx, rx) = mpsc::channel::<String>();
    net.set_inbox(1, Some(tx));
    net.mark_initialized(1);
    let drain = std::thread::spawn(move || rx.into_iter().count() as u64);
    let ids = net.node_ids();
    let line = json!({"src": ids[0], "dest": ids[1], "body": {"type": "gossip", "msg_id": 7,
        "messages": (0..16).collect::<Vec<u32>>()}})
    .to_string();
    let start = Instant::now();
    for n in 0..messages {
        net.on_node_line(0, n + 1, &line);
    }
    net.set_inbox(1, None);
    let received = drain.join().unwrap_or(0);
    let seconds = start.elapsed().as_secs_f64();
    RoutingFigures {
        messages: received,
        seconds,
    }
}

/// Round trips through one real echo node `bin` by `clients` concurrent clients for
/// `secs`; returns the messages routed (two per round trip) and the median round trip.
pub async fn echo_round_trips(
    bin: &Path,
    clients: usize,
    secs: f64,
    dir: &Path,
) -> Result<(RoutingFigures, f64), String> {
    let net = MaelstromNet::new(NodeNames::FROM_ZERO, 1, options());
    let node_dir = dir.join(&net.node_ids()[0]);
    let files = vec![NodeFiles {
        data_dir: node_dir.join("data"),
        log_file: node_dir.join("node.log"),
    }];
    let nodes = MaelstromNodes::start(PathBuf::from(bin), Vec::new(), files, net.clone()).await?;
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    let start = Instant::now();
    for c in 0..clients {
        let net = net.clone();
        tasks.push(tokio::spawn(async move {
            let mut client =
                MaelstromClient::new(net, 0, MaelstromWorkload::Echo, Duration::from_secs(5));
            let mut lat = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let inv = Invocation {
                    f: "echo".into(),
                    key: None,
                    value: json!(format!("c{c} {n}")),
                };
                let t = Instant::now();
                client.invoke(&inv).await;
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap_or_default());
    }
    let seconds = start.elapsed().as_secs_f64();
    nodes.teardown();
    if let Some(why) = net.fatal() {
        return Err(why);
    }
    lat.sort_by(f64::total_cmp);
    let median = splitbrain_checkers::quantile::quantile_of_sorted(&lat, 0.5).unwrap_or(0.0);
    Ok((
        RoutingFigures {
            messages: 2 * lat.len() as u64,
            seconds,
        },
        median,
    ))
}
