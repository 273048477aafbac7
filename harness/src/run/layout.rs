//! How a run's nodes are laid out on the network: loopback ports behind the nemesis's
//! proxy mesh (every bundled target), or one network namespace per node reached over a
//! host link (targets whose members dial each other at one advertised address), their
//! peer links routed through the proxy mesh when the run has faults
//! ([`Target::mesh_ports`]).

use crate::run::cluster::{NodeLayout, PortReservation};
use crate::run::spec::TestSpec;
use crate::run::store::RunDir;
use crate::systems::{NodeNetwork, Target};
use anyhow::Context;
use splitbrain_nemesis::netns::{self, NetnsCluster};
use splitbrain_nemesis::netns_mesh::NetnsMesh;
use splitbrain_nemesis::NemesisSpec;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where a run's nodes listen and how they reach each other: loopback ports behind the
/// proxy mesh, or one network namespace per node (see [`NodeNetwork`]).
pub(crate) struct NetworkLayout {
    pub(crate) layouts: Vec<NodeLayout>,
    /// Where clients dial each node.
    pub(crate) client_addrs: Vec<SocketAddr>,
    pub(crate) mesh: Option<Arc<splitbrain_nemesis::proxy::ProxyMesh>>,
    pub(crate) namespaces: Option<Arc<NetnsCluster>>,
    /// For namespaced nodes with faults and [`Target::mesh_ports`]: their peer links
    /// routed through proxies, which then carry the run's network faults.
    pub(crate) routed: Option<Arc<NetnsMesh>>,
    /// `dial[i][j]`: where node `i` dials node `j`.
    pub(crate) dial: Vec<Vec<SocketAddr>>,
}

impl NetworkLayout {
    pub(crate) async fn build(
        spec: &TestSpec,
        target: &dyn Target,
        run_dir: &RunDir,
        nemesis_spec: &NemesisSpec,
    ) -> anyhow::Result<NetworkLayout> {
        let names = spec.node_names();
        let layout = |i: usize, client_addr, peer_addr, netns| {
            let name = names.name(i);
            let dir = run_dir.node_dir(&name);
            NodeLayout {
                client_addr,
                peer_addr,
                data_dir: dir.join("data"),
                log_file: dir.join("node.log"),
                name,
                netns,
            }
        };
        if let NodeNetwork::Namespaces {
            client_port,
            peer_port,
        } = target.network()
        {
            if let Some(why) = netns::unavailable_reason() {
                anyhow::bail!(
                    "target {} runs each node in a network namespace, which cannot be made here: {why}",
                    target.name()
                );
            }
            let ns = Arc::new(
                NetnsCluster::create_reachable(spec.nodes)
                    .context("creating the nodes' network namespaces")?,
            );
            let layouts: Vec<NodeLayout> = (0..spec.nodes)
                .map(|i| {
                    let ip = ns.addr(i);
                    layout(
                        i,
                        SocketAddr::from((ip, client_port)),
                        SocketAddr::from((ip, peer_port)),
                        Some(ns.namespace(i).to_string()),
                    )
                })
                .collect();
            let peers: Vec<SocketAddr> = layouts.iter().map(|l| peer_target(target, l)).collect();
            // Members keep dialing each other's real addresses; with faults, rules in
            // their namespaces send those connections through the link's proxy.
            let mesh_ports = target.mesh_ports();
            // Client-link faults: the harness's clients dial a proxy on loopback instead.
            let client_fault = nemesis_spec
                .faults
                .iter()
                .find(|f| splitbrain_nemesis::CLIENT_LINK_FAULTS.contains(&f.as_str()));
            if let (Some(f), Some(why)) = (client_fault, target.client_links_unproxyable()) {
                anyhow::bail!(
                    "`{f}` on {} holds each node's answers in a proxy in front of its client \
                     port, and {why}",
                    target.name()
                );
            }
            let client_proxies = client_fault.map(|_| client_port);
            let routed = match nemesis_spec.faults.is_empty() || mesh_ports.is_empty() {
                true => None,
                false => Some(Arc::new(
                    NetnsMesh::start_with_clients(
                        ns.clone(),
                        &mesh_ports,
                        client_proxies,
                        nemesis_spec.seed,
                    )
                    .await
                    .context("routing the nodes' peer links through the proxy mesh")?,
                )),
            };
            let client_addrs = layouts
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    routed
                        .as_ref()
                        .and_then(|r| r.client_addr(i))
                        .unwrap_or(l.client_addr)
                })
                .collect();
            return Ok(NetworkLayout {
                client_addrs,
                dial: vec![peers; spec.nodes],
                layouts,
                mesh: None,
                namespaces: Some(ns),
                routed,
            });
        }
        let reservation = PortReservation::new(spec.nodes * 2)?;
        let ports = reservation.ports().to_vec();
        let layouts: Vec<NodeLayout> = (0..spec.nodes)
            .map(|i| {
                layout(
                    i,
                    SocketAddr::from(([127, 0, 0, 1], ports[2 * i])),
                    SocketAddr::from(([127, 0, 0, 1], ports[2 * i + 1])),
                    None,
                )
            })
            .collect();
        let peer_targets: Vec<SocketAddr> =
            layouts.iter().map(|l| peer_target(target, l)).collect();
        let faults_wanted = !nemesis_spec.faults.is_empty();
        // Client ports get proxies only when a client-link fault may need them.
        let direct_clients: Vec<SocketAddr> = layouts.iter().map(|l| l.client_addr).collect();
        let proxied_clients: &[SocketAddr] = if nemesis_spec
            .faults
            .iter()
            .any(|f| splitbrain_nemesis::CLIENT_LINK_FAULTS.contains(&f.as_str()))
        {
            &direct_clients
        } else {
            &[]
        };
        let loss_mode = match target.peer_streams_are_binary() {
            true => splitbrain_nemesis::proxy::LossMode::Retransmit,
            false => splitbrain_nemesis::proxy::LossMode::Lines,
        };
        let mesh = crate::run::mesh::start_mesh_with_clients(
            &peer_targets,
            proxied_clients,
            loss_mode,
            faults_wanted,
        )
        .await?;
        let client_addrs = crate::run::mesh::client_addrs(mesh.as_deref(), &direct_clients);
        reservation.release();
        let dial = (0..spec.nodes)
            .map(|i| {
                (0..spec.nodes)
                    .map(|j| crate::run::mesh::dial_addr(mesh.as_deref(), &peer_targets, i, j))
                    .collect()
            })
            .collect();
        Ok(NetworkLayout {
            layouts,
            client_addrs,
            mesh,
            namespaces: None,
            routed: None,
            dial,
        })
    }
}

/// Where node `l`'s peers reach it: its peer port, or its client port for systems whose
/// nodes dial each other there ([`Target::peers_dial_the_client_port`]).
fn peer_target(target: &dyn Target, l: &NodeLayout) -> SocketAddr {
    match target.peers_dial_the_client_port() {
        true => l.client_addr,
        false => l.peer_addr,
    }
}
