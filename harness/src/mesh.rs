//! Wiring of the proxy mesh: when a test has faults, every directed peer link i->j goes
//! through a proxy owned by the nemesis, so node i is told to dial the proxy.

use splitbrain_nemesis::proxy::ProxyMesh;
use std::net::SocketAddr;
use std::sync::Arc;

/// Starts the mesh in front of the nodes' peer listeners, when `wanted` (faults
/// requested) and there is more than one node.
pub async fn start_mesh(
    peer_targets: &[SocketAddr],
    wanted: bool,
) -> anyhow::Result<Option<Arc<ProxyMesh>>> {
    if !wanted || peer_targets.len() < 2 {
        return Ok(None);
    }
    let mesh = ProxyMesh::start(peer_targets.to_vec()).await?;
    Ok(Some(Arc::new(mesh)))
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
