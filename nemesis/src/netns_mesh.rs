//! The proxy mesh for nodes in network namespaces: members of a real system that dial each
//! other at the one address each announces (etcd's peer URL, a Redis primary's address)
//! cannot be told a proxy per link, since every member dials a peer at the same address.
//! In a namespace cluster made by [`NetnsCluster::create_reachable`] each member has its
//! own namespace, so the link can be chosen where the connection starts: a `dnat` rule in
//! node i's namespace (nftables, hook `output`) rewrites every connection i opens to
//! `addr(j):port` into one to the proxy of link i→j, which listens on the cluster's host
//! address ([`NetnsCluster::host_addr`]) and forwards to `addr(j):port`. Nothing changes
//! for the system: it dials and announces its real addresses. One [`ProxyMesh`] per port
//! (Redis: the server's and the sentinel's), all given the same faults.
//!
//! Cuts, delay and bandwidth caps are the meshes' (a one-way cut i→j stalls what i says
//! to j on every connection, whichever side opened it). Loss is not: the mesh drops
//! whole newline-terminated messages, which on a binary stream (etcd's HTTP with protobuf
//! bodies, Redis's RESP with bulk payloads) would cut a frame in two. Here loss drops
//! real packets instead, on the legs between the nodes and the proxies, and TCP
//! retransmits them as it would on a lossy network: for flow i→j, packets node i sends to
//! the proxy of link i→j (`daddr host, dport P(i,j)`, in i's namespace) and packets the
//! proxy of link j→i sends node j (`saddr host, sport P(j,i)`, in j's namespace; they
//! carry i's answers to j).
//!
//! Client links (`slow-client`: a node's answers to its clients held back) are proxied
//! the plain way, since the harness's clients are not in the namespaces and can be told
//! any address: [`NetnsMesh::start_with_clients`] puts one proxy on loopback in front of
//! each node's client port, and clients dial [`NetnsMesh::client_addr`].
//!
//! Everything is undone with the namespaces: the rules live inside them, and
//! [`NetnsMesh::shutdown`] closes the proxies.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use crate::netns::{Firewall, NetnsCluster};
use crate::network::{NetFaults, NetworkFaults};
use crate::proxy::ProxyMesh;
use crate::NemesisError;

/// The nftables table (inside each node's namespace) holding the `dnat` rules.
const ROUTE_TABLE: &str = "splitbrain_mesh";
/// The nftables table holding the loss rules.
const LOSS_TABLE: &str = "splitbrain_loss";

/// Namespaced nodes whose links on some ports run through proxy meshes.
pub struct NetnsMesh {
    ns: Arc<NetnsCluster>,
    host: IpAddr,
    ports: Vec<u16>,
    /// One mesh per port, in `ports` order.
    meshes: Vec<ProxyMesh>,
    /// The client links' proxies (no peer links), when asked for.
    clients: Option<ProxyMesh>,
    current: Mutex<NetFaults>,
}

impl NetnsMesh {
    /// Starts one proxy mesh per port in `ports` on the host address of `ns` (made by
    /// [`NetnsCluster::create_reachable`]) and routes every connection node i opens to
    /// node j on one of those ports through the proxy of link i→j. Needs nftables (the
    /// rules are `dnat`). `seed` seeds the meshes' jitter.
    pub async fn start(
        ns: Arc<NetnsCluster>,
        ports: &[u16],
        seed: u64,
    ) -> Result<NetnsMesh, NemesisError> {
        NetnsMesh::start_with_clients(ns, ports, None, seed).await
    }

    /// Like [`NetnsMesh::start`], and with `client_port`, one proxy on loopback in front
    /// of each node's client port (`addr(i):client_port`), for client-link faults.
    pub async fn start_with_clients(
        ns: Arc<NetnsCluster>,
        ports: &[u16],
        client_port: Option<u16>,
        seed: u64,
    ) -> Result<NetnsMesh, NemesisError> {
        let host = ns.host_addr().ok_or_else(|| {
            NemesisError::Unsupported("the namespaces have no host link for proxies".into())
        })?;
        if ns.firewall() != Firewall::Nft {
            return Err(NemesisError::Unsupported(
                "routing links through proxies needs nftables (`nft`)".into(),
            ));
        }
        let n = ns.len();
        let mut meshes = Vec::with_capacity(ports.len());
        for (k, &port) in ports.iter().enumerate() {
            let targets = (0..n)
                .map(|j| SocketAddr::from((ns.addr(j), port)))
                .collect();
            let mesh_seed = seed ^ (k as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
            meshes
                .push(ProxyMesh::start_on(IpAddr::V4(host), targets, Vec::new(), mesh_seed).await?);
        }
        let clients = match client_port {
            Some(port) => {
                let targets = (0..n)
                    .map(|j| SocketAddr::from((ns.addr(j), port)))
                    .collect();
                Some(ProxyMesh::start_with_clients(Vec::new(), targets, seed ^ 0xc1).await?)
            }
            None => None,
        };
        let routed = NetnsMesh {
            ns,
            host: IpAddr::V4(host),
            ports: ports.to_vec(),
            meshes,
            clients,
            current: Mutex::new(NetFaults::new()),
        };
        for i in 0..n {
            if let Err(e) = routed.ns.nft(i, &routed.route_script(i)) {
                routed.shutdown().await;
                return Err(e);
            }
        }
        Ok(routed)
    }

    /// The ports whose links run through the meshes.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The mesh of `port`, if it is one of [`NetnsMesh::ports`].
    pub fn mesh(&self, port: u16) -> Option<&ProxyMesh> {
        self.ports
            .iter()
            .position(|&p| p == port)
            .map(|k| &self.meshes[k])
    }

    /// Where clients dial node `i`: its client proxy, when client links are proxied.
    pub fn client_addr(&self, i: usize) -> Option<SocketAddr> {
        self.clients.as_ref().and_then(|c| c.client_addr(i))
    }

    /// The client links' proxies, when client links are proxied.
    pub fn client_mesh(&self) -> Option<&ProxyMesh> {
        self.clients.as_ref()
    }

    /// Proxied connections open now, over every mesh.
    pub fn open_connections(&self) -> usize {
        self.meshes
            .iter()
            .chain(&self.clients)
            .map(ProxyMesh::open_connections)
            .sum()
    }

    /// Closes every proxy (the rules go with the namespaces).
    pub async fn shutdown(&self) {
        for m in self.meshes.iter().chain(&self.clients) {
            m.shutdown().await;
        }
    }

    /// The proxy of link `from`→`to` on the `k`-th port.
    fn proxy(&self, k: usize, from: usize, to: usize) -> SocketAddr {
        self.meshes[k].link_addr(from, to)
    }

    fn route_script(&self, i: usize) -> String {
        let addrs: Vec<Ipv4Addr> = (0..self.ns.len()).map(|j| self.ns.addr(j)).collect();
        route_script(i, &addrs, &self.ports, |k, f, t| self.proxy(k, f, t))
    }

    fn loss_script(&self, faults: &NetFaults, i: usize) -> String {
        loss_script(faults, i, self.host, self.ports.len(), |k, f, t| {
            self.proxy(k, f, t)
        })
    }
}

/// The `nft -f -` script of node `i`'s `dnat` rules: each peer `j`'s address (`addrs[j]`)
/// and every port in `ports` (the `k`-th) to `proxy(k, i, j)`, the proxy of link i→j.
fn route_script(
    i: usize,
    addrs: &[Ipv4Addr],
    ports: &[u16],
    proxy: impl Fn(usize, usize, usize) -> SocketAddr,
) -> String {
    let mut rules = String::new();
    for (k, &port) in ports.iter().enumerate() {
        for (j, addr) in addrs.iter().enumerate().filter(|(j, _)| *j != i) {
            let _ = writeln!(
                rules,
                "    ip daddr {addr} tcp dport {port} dnat to {}",
                proxy(k, i, j)
            );
        }
    }
    format!(
        "add table ip {ROUTE_TABLE}\ndelete table ip {ROUTE_TABLE}\n\
         table ip {ROUTE_TABLE} {{\n  chain out {{\n    type nat hook output priority -100; policy accept;\n{rules}  }}\n}}\n"
    )
}

/// The `nft -f -` script of node `i`'s loss rules for `faults` (see the module
/// documentation), the proxies on `host` being `proxy(k, from, to)` for each of `ports`
/// ports; a script for no loss deletes the table.
fn loss_script(
    faults: &NetFaults,
    i: usize,
    host: IpAddr,
    ports: usize,
    proxy: impl Fn(usize, usize, usize) -> SocketAddr,
) -> String {
    let (mut out, mut inp) = (String::new(), String::new());
    for ((from, to), f) in faults.faulty_flows() {
        if f.loss <= 0.0 {
            continue;
        }
        let n = (f.loss.clamp(0.0, 1.0) * 10_000.0).round() as u32;
        for k in 0..ports {
            if *from == i {
                let p = proxy(k, *from, *to).port();
                let _ = writeln!(
                    out,
                    "    ip daddr {host} tcp dport {p} numgen random mod 10000 < {n} drop"
                );
            }
            if *to == i {
                let p = proxy(k, *to, *from).port();
                let _ = writeln!(
                    inp,
                    "    ip saddr {host} tcp sport {p} numgen random mod 10000 < {n} drop"
                );
            }
        }
    }
    let mut script = format!("add table inet {LOSS_TABLE}\ndelete table inet {LOSS_TABLE}\n");
    if !out.is_empty() || !inp.is_empty() {
        let _ = write!(
            script,
            "table inet {LOSS_TABLE} {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n{inp}  }}\n  chain output {{\n    type filter hook output priority 0; policy accept;\n{out}  }}\n}}\n"
        );
    }
    script
}

impl NetworkFaults for NetnsMesh {
    fn node_count(&self) -> usize {
        self.ns.len()
    }

    fn apply(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if faults.faulty_clients().next().is_some() && self.clients.is_none() {
            return Err(NemesisError::Unsupported(
                "client links of namespaced nodes are not proxied in this run".into(),
            ));
        }
        if let Some(c) = &self.clients {
            // its only links are the client links: the flows' faults do not reach it
            c.apply(faults)?;
        }
        let mut on_mesh = faults.clone();
        on_mesh.clear_loss();
        on_mesh.clear_clients();
        for m in &self.meshes {
            m.apply(&on_mesh)?;
        }
        let changed = |i: usize| self.loss_script(faults, i) != self.loss_script(&current, i);
        for i in (0..self.ns.len()).filter(|&i| changed(i)) {
            self.ns.nft(i, &self.loss_script(faults, i))?;
        }
        *current = faults.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proxy ports as the test lays them out: 40000 + 100 * port index + 10 * from + to.
    fn proxy(k: usize, from: usize, to: usize) -> SocketAddr {
        SocketAddr::from(([10, 77, 3, 1], (40_000 + 100 * k + 10 * from + to) as u16))
    }

    #[test]
    fn each_peer_address_and_port_leads_to_the_proxy_of_its_link() {
        let addrs: Vec<Ipv4Addr> = (0..3).map(|j| Ipv4Addr::new(10, 77, 3, 10 + j)).collect();
        let script = route_script(1, &addrs, &[6379, 26379], proxy);
        let rules: Vec<&str> = script.lines().filter(|l| l.contains("dnat")).collect();
        assert_eq!(
            rules,
            [
                "    ip daddr 10.77.3.10 tcp dport 6379 dnat to 10.77.3.1:40010",
                "    ip daddr 10.77.3.12 tcp dport 6379 dnat to 10.77.3.1:40012",
                "    ip daddr 10.77.3.10 tcp dport 26379 dnat to 10.77.3.1:40110",
                "    ip daddr 10.77.3.12 tcp dport 26379 dnat to 10.77.3.1:40112",
            ]
        );
        assert!(script.contains("type nat hook output"), "{script}");
    }

    #[test]
    fn loss_of_a_flow_drops_the_senders_requests_and_its_answers() {
        let host = IpAddr::from([10, 77, 3, 1]);
        let mut faults = NetFaults::new();
        faults.flow_mut(0, 2).loss = 0.25;
        // the sender: what it sends into the proxy of its own link 0->2
        let sender = loss_script(&faults, 0, host, 1, proxy);
        assert!(
            sender
                .contains("ip daddr 10.77.3.1 tcp dport 40002 numgen random mod 10000 < 2500 drop"),
            "{sender}"
        );
        assert!(!sender.contains("saddr"), "{sender}");
        // the receiver: what the proxy of its link 2->0 hands it (the sender's answers)
        let receiver = loss_script(&faults, 2, host, 1, proxy);
        assert!(
            receiver
                .contains("ip saddr 10.77.3.1 tcp sport 40020 numgen random mod 10000 < 2500 drop"),
            "{receiver}"
        );
        assert!(!receiver.contains("daddr"), "{receiver}");
        // an uninvolved node, and no loss at all: the table is deleted and not remade
        for script in [
            loss_script(&faults, 1, host, 1, proxy),
            loss_script(&NetFaults::new(), 0, host, 1, proxy),
        ] {
            assert!(!script.contains("chain"), "{script}");
            assert!(script.contains("delete table inet splitbrain_loss"));
        }
    }
}
