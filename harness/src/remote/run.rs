//! A test on remote hosts: the controller's phases with [`RemoteCluster`] as the cluster
//! and [`RemoteFirewall`] as the network backend.
//!
//! Every check that can fail without the system under test (reaching each host, its
//! login, nft where network faults are asked for, the upload) runs before any node starts
//! or any fault is applied. Teardown (kill every node, heal, collect logs and data, remove
//! the run's files and rules) runs on every path after the first connection.

use super::cluster::{BinarySource, RemoteCluster, RemoteNodeSpec};
use super::firewall::{self, HostFirewall, RemoteFirewall};
use super::hosts::Host;
use super::proxies::RemoteProxies;
use super::session::HostSession;
use super::RemoteError;
use crate::check_options::CheckOptions;
use crate::run::controller::{
    drive, finish_run, open_run, record_start_failure, DriveClients, RunOutcome,
};
use crate::run::programs::find_binary;
use crate::run::recorder::HistoryRecorder;
use crate::run::spec::TestSpec;
use crate::systems::{NodeNetwork, Target, TargetOptions};
use crate::workload::Workload;
use splitbrain_nemesis::{Nemesis, NetworkFaults};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Runs a whole test with node `i` on `hosts[i]`.
pub(crate) async fn run_remote_test(
    spec: &TestSpec,
    hosts: &[Host],
    target: Arc<dyn Target>,
    workload: &dyn Workload,
    check: &CheckOptions,
    cancel: CancellationToken,
    show_progress: bool,
) -> anyhow::Result<RunOutcome> {
    anyhow::ensure!(
        hosts.len() == spec.nodes,
        "{} hosts for {} nodes: node i runs on host i",
        hosts.len(),
        spec.nodes
    );
    // A workspace binary (beside splitbrain) or a given file is uploaded; a bare program
    // name otherwise (python3, etcd, postgres) is the host's own, found on its PATH.
    let name = target.binary_name();
    let binary = match &spec.target_bin {
        Some(p) if !p.is_file() => BinarySource::OnHost(p.display().to_string()),
        None if !name.contains('/') && crate::run::programs::beside_splitbrain(name).is_none() => {
            BinarySource::OnHost(name.to_string())
        }
        explicit => BinarySource::Local(find_binary(explicit.as_ref(), name)?),
    };
    let (nemesis_spec, spec, run_dir) = open_run(spec)?;
    let spec = &spec;
    let recorder = HistoryRecorder::create(&run_dir.history(), Instant::now(), true)?;
    let fail = |e: anyhow::Error| {
        record_start_failure(
            spec,
            &run_dir,
            &recorder,
            format!("{e:#}"),
            "the remote cluster",
        );
        e
    };
    // Faults only a proxy can carry put a proxy on every host (for targets whose nodes
    // can be told where to dial); partitions alone stay nftables rules.
    let wants_proxies = matches!(target.network(), NodeNetwork::Mesh)
        && hosts.len() > 1
        && nemesis_spec
            .faults
            .iter()
            .any(|f| PROXIED_FAULTS.contains(&f.as_str()));
    if let Some(why) = proxies_unavailable(
        &target,
        hosts.len(),
        nemesis_spec
            .faults
            .iter()
            .find(|f| PROXIED_FAULTS.contains(&f.as_str())),
    ) {
        return Err(fail(anyhow::anyhow!(why)));
    }
    let client_links = wants_proxies
        && nemesis_spec
            .faults
            .iter()
            .any(|f| splitbrain_nemesis::CLIENT_LINK_FAULTS.contains(&f.as_str()));
    let needs_firewall = !wants_proxies
        && nemesis_spec
            .faults
            .iter()
            .any(|f| splitbrain_nemesis::NETWORK_FAULTS.contains(&f.as_str()));
    let (sessions, firewalls) = match connect_all(hosts, needs_firewall).await {
        Ok(x) => x,
        Err((sessions, e)) => {
            close_all(sessions).await;
            return Err(fail(e.into()));
        }
    };
    let topts = TargetOptions::from_spec(spec);
    // A target with fixed ports (its members advertise one address) keeps them.
    let ports = |h: &Host| match target.network() {
        NodeNetwork::Namespaces {
            client_port,
            peer_port,
        } => (client_port, peer_port),
        NodeNetwork::Mesh => (h.client_port, h.peer_port),
    };
    let client_addrs: Vec<SocketAddr> = hosts
        .iter()
        .map(|h| SocketAddr::new(h.ip, ports(h).0))
        .collect();
    let peer_addrs: Vec<SocketAddr> = hosts
        .iter()
        .map(|h| SocketAddr::new(h.ip, ports(h).1))
        .collect();
    let tag = format!(
        "{}-{}",
        std::process::id(),
        run_dir
            .path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    );
    let nodes: Vec<RemoteNodeSpec> = (0..hosts.len())
        .map(|i| {
            let name = format!("n{}", i + 1);
            let data = format!(
                "{}/{name}/data",
                super::cluster::host_run_dir(&sessions[i], &tag)
            );
            RemoteNodeSpec {
                args: target.node_args(
                    i,
                    client_addrs[i],
                    peer_addrs[i],
                    &peer_addrs,
                    std::path::Path::new(&data),
                    &topts,
                ),
                client_addr: client_addrs[i],
                name,
            }
        })
        .collect();
    let mut cluster = match RemoteCluster::prepare(
        target.clone(),
        sessions.clone(),
        &firewalls,
        &binary,
        nodes,
        &tag,
        target.clock_source() == crate::systems::ClockSource::Faketime
            && nemesis_spec.faults.iter().any(|f| f == "clock"),
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            close_all(sessions).await;
            return Err(fail(e.into()));
        }
    };
    let local_nodes = run_dir.path.join("nodes");
    let mut client_addrs = client_addrs;
    let proxies = if wants_proxies {
        let bin_dirs: Vec<String> = sessions
            .iter()
            .map(|s| match s.host.keep_binary {
                // Kept across runs beside the node binary, like it.
                true => format!("{}/bin", s.host.data_dir.display()),
                false => format!("{}/bin", super::cluster::host_run_dir(s, &tag)),
            })
            .collect();
        let started = match std::env::current_exe() {
            Ok(exe) => RemoteProxies::start(
                &sessions,
                &exe,
                &bin_dirs,
                &peer_addrs,
                &client_addrs,
                client_links,
                target.peer_streams_are_binary(),
                spec.seed,
            )
            .await
            .map_err(anyhow::Error::new),
            Err(e) => Err(anyhow::Error::new(e).context("finding this program to upload")),
        };
        match started {
            Ok(p) => {
                // Node i dials node j through host i's link to j.
                for i in 0..hosts.len() {
                    let dial: Vec<SocketAddr> = (0..hosts.len())
                        .map(|j| p.dial_addr(i, j, peer_addrs[i]))
                        .collect();
                    let data = format!(
                        "{}/n{}/data",
                        super::cluster::host_run_dir(&sessions[i], &tag),
                        i + 1
                    );
                    cluster.set_args(
                        i,
                        target.node_args(
                            i,
                            client_addrs[i],
                            peer_addrs[i],
                            &dial,
                            std::path::Path::new(&data),
                            &topts,
                        ),
                    );
                    if let Some(a) = p.client_addr(i) {
                        client_addrs[i] = a;
                    }
                }
                Some(p)
            }
            Err(e) => {
                report_errors(cluster.teardown(&local_nodes).await);
                close_all(sessions).await;
                return Err(fail(e.context("starting the link proxies")));
            }
        }
    } else {
        None
    };
    if let Err(e) = cluster.start(Duration::from_secs(30)).await {
        if let Some(p) = &proxies {
            p.finish().await;
        }
        report_errors(cluster.teardown(&local_nodes).await);
        close_all(sessions).await;
        return Err(fail(anyhow::Error::new(e).context("starting the cluster")));
    }
    let fw = needs_firewall.then(|| {
        Arc::new(RemoteFirewall::new(
            sessions.clone(),
            firewalls,
            hosts.iter().map(|h| h.ip).collect(),
        ))
    });
    let proxies = proxies.map(Arc::new);
    let network: Option<Arc<dyn NetworkFaults>> = match (&fw, &proxies) {
        (Some(f), _) => Some(f.clone() as Arc<dyn NetworkFaults>),
        (None, Some(p)) => Some(p.clone() as Arc<dyn NetworkFaults>),
        (None, None) => None,
    };
    let nemesis = Nemesis::with_network(nemesis_spec, network);
    let nemesis = crate::run::memory::attach(nemesis, spec);
    let clients = DriveClients::for_target(&target, &client_addrs, &topts, spec.steps);
    let result = drive(
        spec,
        workload,
        &cluster,
        &nemesis,
        clients,
        &recorder,
        cancel.clone(),
        show_progress,
    )
    .await;
    // drive() healed; the tables go anyway, in case a heal failed half-way.
    if let Some(fw) = &fw {
        report_errors(fw.remove_all().await);
    }
    let links = match &proxies {
        Some(p) => {
            let origins = p.origins(recorder.now_ns() as f64 / 1e9);
            let measured = super::proxies::summarize(hosts.len(), &p.finish().await, &origins);
            super::proxies::record_links(&run_dir.path, &measured);
            Some(measured)
        }
        None => None,
    };
    report_errors(cluster.teardown(&local_nodes).await);
    let searched =
        crate::run::controller::fault_search(&nemesis, spec, &run_dir, recorder.counts.as_ref());
    drop(nemesis);
    drop(fw);
    drop(cluster);
    close_all(sessions).await;
    finish_run(
        spec, &run_dir, &recorder, result, &cancel, workload, check, None, None, searched, links,
    )
    .await
}

/// Faults the hosts' firewalls cannot carry and the proxies can.
const PROXIED_FAULTS: &[&str] = &["slow", "loss", "slow-client", "figure-8"];

/// Why `fault` (one of [`PROXIED_FAULTS`]) cannot be run on these hosts, if it cannot.
fn proxies_unavailable(
    target: &Arc<dyn Target>,
    hosts: usize,
    fault: Option<&String>,
) -> Option<String> {
    let fault = fault?;
    if !matches!(target.network(), NodeNetwork::Mesh) {
        return Some(format!(
            "`{fault}` on --hosts goes through a link proxy on each host, and node i must \
             dial node j at the address of host i's proxy; {}'s members each advertise one \
             fixed address to their peers, so their links cannot be pointed at proxies yet \
             (and the hosts' firewalls carry only partitions)",
            target.name()
        ));
    }
    if hosts < 2 {
        return Some(format!(
            "`{fault}` acts on the links between nodes, and a run on one host has none"
        ));
    }
    None
}

/// A command that does nothing taking longer than this on a host is worth a warning.
const SLOW_EMPTY_COMMAND: Duration = Duration::from_secs(5);

/// Connects to every host and checks it (nft where network faults are asked for). On
/// error, the sessions made so far come back to be closed.
async fn connect_all(
    hosts: &[Host],
    needs_firewall: bool,
) -> Result<(Vec<Arc<HostSession>>, Vec<HostFirewall>), (Vec<Arc<HostSession>>, RemoteError)> {
    let control_dir = std::env::temp_dir();
    let mut sessions = Vec::new();
    let mut firewalls = Vec::new();
    for h in hosts {
        let s = match HostSession::connect(h, &control_dir).await {
            Ok(s) => Arc::new(s),
            Err(e) => return Err((sessions, e)),
        };
        sessions.push(s.clone());
        // Every remote command pays the login shell's start-up (its rc files run before
        // the command): say so when that alone is slow, since the run will crawl.
        let t = Instant::now();
        if s.run_status(":").await.is_ok() && t.elapsed() > SLOW_EMPTY_COMMAND {
            eprintln!(
                "splitbrain: warning: {}: a command that does nothing took {:.1} s there; every \
                 remote command of the run pays that (the login shell's start-up files, e.g. \
                 ~/.bashrc, run before each command)",
                h.label(),
                t.elapsed().as_secs_f64()
            );
        }
        if needs_firewall {
            match firewall::probe(&s).await {
                Ok(f) => firewalls.push(f),
                Err(e) => return Err((sessions, e)),
            }
        }
        eprintln!("splitbrain: connected to {}", h.label());
    }
    Ok((sessions, firewalls))
}

async fn close_all(sessions: Vec<Arc<HostSession>>) {
    for s in sessions {
        match Arc::try_unwrap(s) {
            Ok(s) => s.close().await,
            // Still shared (a task kept it): its drop ends the master.
            Err(s) => drop(s),
        }
    }
}

fn report_errors(errors: Vec<RemoteError>) {
    for e in errors {
        eprintln!("splitbrain: cleanup: {e}");
    }
}
