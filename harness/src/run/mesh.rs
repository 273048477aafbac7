//! Wiring of the proxy mesh: when a test has faults, every directed peer link i->j goes
//! through a proxy owned by the nemesis, so node i is told to dial the proxy. When a test
//! asks for client-link faults, each node's client port is fronted by a proxy as well,
//! and the test's clients dial that.

use splitbrain_nemesis::proxy::{LossMode, ProxyMesh};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// Starts the mesh in front of the nodes' peer listeners, when `wanted` (faults
/// requested) and there is more than one node.
pub async fn start_mesh(
    peer_targets: &[SocketAddr],
    wanted: bool,
) -> anyhow::Result<Option<Arc<ProxyMesh>>> {
    start_mesh_with_clients(peer_targets, &[], LossMode::Lines, wanted).await
}

/// Like [`start_mesh`], also fronting each node's client port (`client_targets[i]`, or
/// none if empty) with a proxy; then clients must dial [`client_addrs`]. `loss_mode`
/// says what loss does on the peer links.
pub async fn start_mesh_with_clients(
    peer_targets: &[SocketAddr],
    client_targets: &[SocketAddr],
    loss_mode: LossMode,
    wanted: bool,
) -> anyhow::Result<Option<Arc<ProxyMesh>>> {
    if !wanted || (peer_targets.len() < 2 && client_targets.is_empty()) {
        return Ok(None);
    }
    let mesh = ProxyMesh::start_with(
        Ipv4Addr::LOCALHOST.into(),
        peer_targets.to_vec(),
        client_targets.to_vec(),
        0,
        loss_mode,
    )
    .await?;
    Ok(Some(Arc::new(mesh)))
}

/// Where clients dial each node: its client proxy if there is one, else `direct[i]`.
pub fn client_addrs(mesh: Option<&ProxyMesh>, direct: &[SocketAddr]) -> Vec<SocketAddr> {
    direct
        .iter()
        .enumerate()
        .map(|(i, &d)| mesh.and_then(|m| m.client_addr(i)).unwrap_or(d))
        .collect()
}

/// Where node `from` must dial node `to`: the link's proxy, or the peer directly.
pub fn dial_addr(
    mesh: Option<&ProxyMesh>,
    peer_targets: &[SocketAddr],
    from: usize,
    to: usize,
) -> SocketAddr {
    match mesh {
        Some(m) if from != to => m.link_addr(from, to),
        _ => peer_targets[to],
    }
}

/// Closes every proxy.
pub async fn stop_mesh(mesh: Option<&ProxyMesh>) {
    if let Some(m) = mesh {
        m.shutdown().await;
    }
}
