//! `splitbrain bench converge`: how long a Bayou replica group takes to converge after a
//! partition heals, as a function of the anti-entropy interval and the number of replicas.
//!
//! Real `splitbrain-bayou` processes on loopback behind the proxy mesh: every peer link is
//! cut, `writes` set additions are spread over the replicas (each accepts its own, as Bayou
//! does while partitioned), then the links heal and every replica's `/status` is polled
//! every 5 ms until all hold the same version vector and every write is committed
//! everywhere. The time from the heal to that moment is the figure.

use crate::run::cluster::{Cluster, NodeLayout, PortReservation};
use crate::systems::{Target, TargetOptions};
use anyhow::Context;
use serde_json::{json, Value};
use splitbrain_checkers::table::Table;
use splitbrain_nemesis::{CutMode, NetFaults, NetworkFaults};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Concurrent writers per replica while the writes pile up.
const WRITERS_PER_REPLICA: usize = 8;
/// Give up waiting for convergence after this long.
const CONVERGE_LIMIT: Duration = Duration::from_secs(120);

/// One measured configuration.
#[derive(Debug, Clone)]
pub struct ConvergeRow {
    /// Replicas in the group.
    pub replicas: usize,
    /// The replicas' anti-entropy interval.
    pub anti_entropy_ms: u64,
    /// Writes pending when the partition healed (acknowledged while every link was cut).
    pub pending_writes: usize,
    /// Seconds the writes took (not part of the figure).
    pub write_s: f64,
    /// Milliseconds from the heal until every replica held every write, all committed;
    /// `None` if that did not happen within the limit.
    pub converge_ms: Option<f64>,
}

/// Measures one configuration with the replica binary `binary`, in `dir`.
pub async fn converge_after_heal(
    binary: &Path,
    replicas: usize,
    anti_entropy_ms: u64,
    writes: usize,
    dir: &Path,
) -> anyhow::Result<ConvergeRow> {
    let target: Arc<dyn Target> = Arc::new(crate::systems::bayou::BayouTarget);
    let reservation = PortReservation::new(replicas * 2)?;
    let ports = reservation.ports().to_vec();
    let layouts: Vec<NodeLayout> = (0..replicas)
        .map(|i| {
            let name = format!("n{}", i + 1);
            NodeLayout {
                client_addr: SocketAddr::from(([127, 0, 0, 1], ports[2 * i])),
                peer_addr: SocketAddr::from(([127, 0, 0, 1], ports[2 * i + 1])),
                data_dir: dir.join(&name).join("data"),
                log_file: dir.join(&name).join("node.log"),
                name,
                netns: None,
            }
        })
        .collect();
    let peers: Vec<SocketAddr> = layouts.iter().map(|l| l.peer_addr).collect();
    let mesh = crate::run::mesh::start_mesh(&peers, true)
        .await?
        .context("the bench needs at least two replicas")?;
    reservation.release();
    let opts = TargetOptions {
        shards: 1,
        read_mode: None,
        bugs: Vec::new(),
        op_timeout: Duration::from_secs(5),
        hedge_delay: Duration::ZERO,
        workload: "set".into(),
        wait: None,
        read_from: None,
        replication: None,
        transport: None,
    };
    let args: Vec<Vec<String>> = layouts
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let dial: Vec<SocketAddr> = (0..replicas)
                .map(|j| crate::run::mesh::dial_addr(Some(&mesh), &peers, i, j))
                .collect();
            let mut a = target.node_args(i, l.client_addr, l.peer_addr, &dial, &l.data_dir, &opts);
            set_flag(&mut a, "--anti-entropy-ms", &anti_entropy_ms.to_string());
            a
        })
        .collect();
    let cluster = Cluster::start(
        target,
        binary.to_path_buf(),
        layouts.clone(),
        args,
        Duration::from_secs(30),
    )
    .await
    .context("starting the replicas")?;
    let addrs: Vec<SocketAddr> = layouts.iter().map(|l| l.client_addr).collect();
    let result = measure(&mesh, &addrs, anti_entropy_ms, writes).await;
    cluster.teardown();
    mesh.shutdown().await;
    result
}

async fn measure(
    mesh: &splitbrain_nemesis::proxy::ProxyMesh,
    addrs: &[SocketAddr],
    anti_entropy_ms: u64,
    writes: usize,
) -> anyhow::Result<ConvergeRow> {
    let n = addrs.len();
    let mut cut = NetFaults::new();
    for i in 0..n {
        for j in 0..n {
            if i != j {
                cut.cut(i, j, CutMode::Refuse);
            }
        }
    }
    mesh.apply(&cut)?;
    let http = reqwest::Client::new();
    let write_start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let per_writer = writes.div_ceil(n * WRITERS_PER_REPLICA);
    let mut next = 0usize;
    for (r, addr) in addrs.iter().enumerate() {
        for _ in 0..WRITERS_PER_REPLICA {
            let (first, last) = (next, (next + per_writer).min(writes));
            next = last;
            let (http, url) = (http.clone(), format!("http://{addr}/write"));
            tasks.spawn(async move {
                for e in first..last {
                    let body = json!({"key": format!("b{}", e % 100),
                        "op": {"type": "add", "element": e}});
                    let v: Value = http.post(&url).json(&body).send().await?.json().await?;
                    anyhow::ensure!(v["type"] == "ok", "replica {r} refused a write: {v}");
                }
                Ok::<usize, anyhow::Error>(last - first)
            });
        }
    }
    let mut acked = 0;
    while let Some(done) = tasks.join_next().await {
        acked += done??;
    }
    let write_s = write_start.elapsed().as_secs_f64();
    mesh.heal_all()?;
    let healed = Instant::now();
    let mut converge_ms = None;
    while healed.elapsed() < CONVERGE_LIMIT {
        if converged(&http, addrs, acked).await {
            converge_ms = Some(healed.elapsed().as_secs_f64() * 1000.0);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(ConvergeRow {
        replicas: n,
        anti_entropy_ms,
        pending_writes: acked,
        write_s,
        converge_ms,
    })
}

/// True when every replica reports the same version vector and `writes` committed writes.
async fn converged(http: &reqwest::Client, addrs: &[SocketAddr], writes: usize) -> bool {
    let mut first: Option<Value> = None;
    for addr in addrs {
        let status: Value = match http.get(format!("http://{addr}/status")).send().await {
            Ok(r) => match r.json().await {
                Ok(v) => v,
                Err(_) => return false,
            },
            Err(_) => return false,
        };
        if status["csn"].as_u64() != Some(writes as u64) {
            return false;
        }
        match &first {
            None => first = Some(status["vv"].clone()),
            Some(vv) if *vv != status["vv"] => return false,
            Some(_) => {}
        }
    }
    true
}

/// Sets `flag VALUE` in an argument list, replacing the value if the flag is there.
fn set_flag(args: &mut Vec<String>, flag: &str, value: &str) {
    match args.iter().position(|a| a == flag) {
        Some(i) if i + 1 < args.len() => args[i + 1] = value.to_string(),
        _ => args.extend([flag.to_string(), value.to_string()]),
    }
}

/// Runs every configuration (3 and 5 replicas x the given intervals) and renders a table.
pub async fn run_table(
    binary: PathBuf,
    intervals_ms: &[u64],
    writes: usize,
    dir: &Path,
) -> anyhow::Result<String> {
    let mut out = format!(
        "convergence after heal: {writes} writes acknowledged while every peer link was cut, then healed; real splitbrain-bayou processes on loopback\n"
    );
    let mut t = Table::new([
        "replicas",
        "anti-entropy ms",
        "pending writes",
        "converge ms after heal",
    ]);
    for replicas in [3usize, 5] {
        for &ae in intervals_ms {
            let run_dir = dir.join(format!("r{replicas}-ae{ae}"));
            let row = converge_after_heal(&binary, replicas, ae, writes, &run_dir).await?;
            let figure = row
                .converge_ms
                .map(|ms| format!("{ms:.0}"))
                .unwrap_or_else(|| format!("not within {} s", CONVERGE_LIMIT.as_secs()));
            t.row([
                row.replicas.to_string(),
                row.anti_entropy_ms.to_string(),
                row.pending_writes.to_string(),
                figure,
            ]);
        }
    }
    out.push_str(&t.markdown());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::set_flag;

    #[test]
    fn set_flag_replaces_or_appends() {
        let mut a = vec![
            "--id".to_string(),
            "1".into(),
            "--anti-entropy-ms".into(),
            "100".into(),
        ];
        set_flag(&mut a, "--anti-entropy-ms", "50");
        assert_eq!(a[3], "50");
        set_flag(&mut a, "--session-wait-ms", "9");
        assert_eq!(a[4..], ["--session-wait-ms".to_string(), "9".into()]);
    }
}
