//! The network-namespace backend (Linux, needs root or an `unshare -Urn` user namespace).
//!
//! [`NetnsCluster::create`] makes one hub namespace holding a bridge, and one namespace per
//! node with a veth `eth0` on that bridge and a private address `10.77.0.(10+i)/24`. Nothing
//! is added to the caller's own namespace except the namespace names themselves
//! (`/run/netns/sb-<pid>-<k>-*`). Start node processes with [`NetnsCluster::command`].
//!
//! Faults are packet-filter rules in each receiving node's namespace: a blocked flow i→j is
//! `ip saddr <i> drop` (black-hole) or `reject` (refuse) in j's input chain; loss is
//! `numgen random mod 10000 < N drop`. nftables is used when `nft` exists, iptables
//! otherwise. Delay needs netem, which some kernels lack (detected at create time, see
//! [`NetnsCluster::supports_delay`]); bandwidth caps are not offered by this backend.
//!
//! [`NetnsCluster::create_reachable`] also links the caller's namespace into the bridge
//! (one veth, address `10.77.X.1/24` with `X` unused on this host, claimed under the
//! lock `ip netns` itself takes on `/run/netns`), so a harness outside the namespaces can
//! reach the nodes directly: a real system whose members dial each other at one advertised
//! address (etcd, Redis, sshd) cannot be told a proxy per link. Faults filter by the nodes' source addresses, so the host link is
//! never cut. [`crate::netns_mesh`] puts such a cluster's peer links on the proxy mesh all
//! the same, by `dnat` rules in each dialing node's namespace.
//!
//! Cleanup: [`NetnsCluster::teardown`] (also run on drop) deletes every namespace it made,
//! which removes its veths, bridge and rules with it; [`sweep_stale`] removes namespaces
//! left by runs whose process is gone.

use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::network::{CutMode, NetFaults, NetworkFaults};
use crate::NemesisError;

/// Every namespace this backend creates starts with this prefix.
pub const PREFIX: &str = "sb-";
/// Subnet of the node addresses of a cluster without a host link (inside the namespaces
/// only, so every such cluster can use the same one).
const SUBNET: [u8; 3] = [10, 77, 0];
/// Serialises the choice of a free host-link subnet between processes: a lock on the
/// directory `ip netns` keeps its namespaces in, so no file of our own is left behind.
const HOST_LINK_LOCK: &str = "/run/netns";
/// The nftables table the rules live in (inside each node namespace).
const TABLE: &str = "splitbrain";
/// The iptables chain the rules live in, when nft is missing.
const CHAIN: &str = "SPLITBRAIN";

static CLUSTERS: AtomicUsize = AtomicUsize::new(0);

/// Which packet filter tool drives the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firewall {
    /// `nft` (nftables).
    Nft,
    /// `iptables` (iptables-nft or legacy).
    Iptables,
}

/// PATH with the usual sbin and bin directories appended: where [`tool_exists`] looks,
/// and the PATH the tools it found are run with (`ip`, and `nft`, `tc`, `iptables` under
/// `ip netns exec`), so a caller's PATH without /usr/sbin finds them too.
pub fn tool_search_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    let extra = "/usr/sbin:/sbin:/usr/bin:/bin";
    if path.is_empty() {
        extra.to_string()
    } else {
        format!("{path}:{extra}")
    }
}

/// Whether `name` is an executable in PATH or the usual sbin directories.
fn tool_exists(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = tool_search_path();
    let found = path
        .split(':')
        .map(|dir| std::path::Path::new(dir).join(name))
        .any(|p| {
            std::fs::metadata(&p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        });
    found
}

/// Why this backend cannot run here, or None if it can (root or a user namespace with
/// CAP_NET_ADMIN, `ip` present, `nft` or `iptables` present).
pub fn unavailable_reason() -> Option<String> {
    if !tool_exists("ip") {
        return Some("the `ip` tool (Debian package iproute2) is missing".into());
    }
    if !tool_exists("nft") && !tool_exists("iptables") {
        return Some("neither `nft` (nftables) nor `iptables` is installed".into());
    }
    let k = CLUSTERS.fetch_add(1, Ordering::SeqCst);
    let probe = format!("{PREFIX}{}-{k}-probe", std::process::id());
    let ok = run("ip", &["netns", "add", &probe]).is_ok();
    let _ = run("ip", &["netns", "del", &probe]);
    if !ok {
        return Some("cannot create network namespaces (need root or `unshare -Urn`)".into());
    }
    None
}

fn run(program: &str, args: &[&str]) -> Result<String, NemesisError> {
    let out = Command::new(program)
        .env("PATH", tool_search_path())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| NemesisError::Fault(format!("{program}: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NemesisError::Fault(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn run_stdin(program: &str, args: &[&str], input: &str) -> Result<(), NemesisError> {
    use std::io::Write;
    let mut child = Command::new(program)
        .env("PATH", tool_search_path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| NemesisError::Fault(format!("{program}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NemesisError::Fault(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// An exclusive `flock` on [`HOST_LINK_LOCK`], released on drop (and by the kernel if the
/// process dies).
struct HostLinkLock {
    // held only for its lock, which closing the file releases
    _file: std::fs::File,
}

impl HostLinkLock {
    fn acquire() -> Result<HostLinkLock, NemesisError> {
        use std::os::fd::AsRawFd;
        std::fs::create_dir_all(HOST_LINK_LOCK)?;
        let file = std::fs::File::open(HOST_LINK_LOCK)
            .map_err(|e| NemesisError::Fault(format!("open {HOST_LINK_LOCK}: {e}")))?;
        // SAFETY: flock on a descriptor this function owns; no memory is touched.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(NemesisError::Fault(format!(
                "lock {HOST_LINK_LOCK}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(HostLinkLock { _file: file })
    }
}

/// A `10.77.X.0/24` with `X` in 1..=254 that no address of the caller's namespace is in.
fn free_host_subnet() -> Result<[u8; 3], NemesisError> {
    let used = run("ip", &["-4", "-o", "addr", "show"])?;
    let taken: std::collections::HashSet<u8> = used
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("10.77."))
        .filter_map(|rest| rest.split('.').next()?.parse().ok())
        .collect();
    (1..=254u8)
        .find(|x| !taken.contains(x))
        .map(|x| [10, 77, x])
        .ok_or_else(|| NemesisError::Fault("no free 10.77.X.0/24 subnet for a host link".into()))
}

/// Namespaces named `sb-*` that exist now.
pub fn list_namespaces() -> Vec<String> {
    run("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with(PREFIX))
        .map(str::to_string)
        .collect()
}

/// Host-link ends (`sbh<pid>x<k>`) in the caller's namespace.
pub fn host_links() -> Vec<String> {
    run("ip", &["-o", "link", "show"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|name| name.trim().split('@').next().unwrap_or("").to_string())
        .filter(|name| name.starts_with("sbh"))
        .collect()
}

/// Removes `sb-<pid>-*` namespaces, and `sbh<pid>x*` host links, whose creating process
/// no longer runs (left by a run that was killed). Returns the names removed.
pub fn sweep_stale() -> Vec<String> {
    let mut removed = Vec::new();
    for link in host_links() {
        let pid = link
            .strip_prefix("sbh")
            .and_then(|rest| rest.split(['x', 'p']).next())
            .and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if pid.is_some() && !alive && run("ip", &["link", "del", &link]).is_ok() {
            removed.push(link);
        }
    }
    for name in list_namespaces() {
        let pid = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if pid.is_some() && !alive && run("ip", &["netns", "del", &name]).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// A set of node namespaces on a private bridge, with packet-filter faults.
pub struct NetnsCluster {
    hub: String,
    /// The /24 the node addresses are in.
    subnet: [u8; 3],
    /// The caller-side end of the host link, if the cluster has one.
    host_link: Option<String>,
    nodes: Vec<String>,
    firewall: Firewall,
    netem: bool,
    current: Mutex<NetFaults>,
    torn_down: AtomicBool,
}

impl NetnsCluster {
    /// Creates `n` node namespaces (after sweeping stale ones). On any failure, whatever
    /// was created is removed before the error returns.
    pub fn create(n: usize) -> Result<NetnsCluster, NemesisError> {
        Self::create_inner(n, false)
    }

    /// [`NetnsCluster::create`], plus a link from the caller's namespace into the bridge
    /// with address [`NetnsCluster::host_addr`], so the caller reaches every node at
    /// [`NetnsCluster::addr`]. The link goes away with the hub namespace at teardown.
    pub fn create_reachable(n: usize) -> Result<NetnsCluster, NemesisError> {
        Self::create_inner(n, true)
    }

    fn create_inner(n: usize, reachable: bool) -> Result<NetnsCluster, NemesisError> {
        if n == 0 || n > 200 {
            return Err(NemesisError::Fault(format!(
                "node count {n} is not within 1..=200"
            )));
        }
        sweep_stale();
        let firewall = if tool_exists("nft") {
            Firewall::Nft
        } else if tool_exists("iptables") {
            Firewall::Iptables
        } else {
            return Err(NemesisError::Unsupported(
                "neither nft nor iptables is installed".into(),
            ));
        };
        let k = CLUSTERS.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{PREFIX}{}-{k}", std::process::id());
        let mut cluster = NetnsCluster {
            hub: format!("{tag}-hub"),
            subnet: SUBNET,
            host_link: None,
            nodes: (0..n).map(|i| format!("{tag}-n{}", i + 1)).collect(),
            firewall,
            netem: false,
            current: Mutex::new(NetFaults::new()),
            torn_down: AtomicBool::new(false),
        };
        // on error, dropping `cluster` tears down the part already built
        if reachable {
            cluster.host_link = Some(format!("sbh{}x{k}", std::process::id()));
            cluster.subnet = cluster.claim_host_subnet()?;
        }
        cluster.build()?;
        cluster.build_host_link()?;
        cluster.netem = cluster.probe_netem();
        Ok(cluster)
    }

    /// Picks a `10.77.X.0/24` no other cluster uses and claims it: the host end of the
    /// link is made in the caller's namespace and given `X.1` while the lock is held, so
    /// the next caller sees the subnet taken. `ip netns add` takes the same lock, so no
    /// namespace is made while it is held.
    fn claim_host_subnet(&self) -> Result<[u8; 3], NemesisError> {
        let Some(link) = self.host_link.as_deref() else {
            return Ok(SUBNET);
        };
        let _lock = HostLinkLock::acquire()?;
        let subnet = free_host_subnet()?;
        let peer = format!("{link}p");
        run(
            "ip",
            &["link", "add", link, "type", "veth", "peer", "name", &peer],
        )?;
        let cidr = format!("{}.{}.{}.1/24", subnet[0], subnet[1], subnet[2]);
        run("ip", &["addr", "add", &cidr, "dev", link])?;
        Ok(subnet)
    }

    /// Moves the far end of the claimed host link into the hub and onto its bridge.
    fn build_host_link(&self) -> Result<(), NemesisError> {
        let Some(link) = self.host_link.as_deref() else {
            return Ok(());
        };
        let hub = self.hub.as_str();
        let peer = format!("{link}p");
        run("ip", &["link", "set", &peer, "netns", hub])?;
        run("ip", &["-n", hub, "link", "set", &peer, "name", "host"])?;
        run("ip", &["-n", hub, "link", "set", "host", "master", "br0"])?;
        run("ip", &["-n", hub, "link", "set", "host", "up"])?;
        run("ip", &["link", "set", link, "up"])?;
        Ok(())
    }

    /// The caller's address on the bridge, for a cluster made by
    /// [`NetnsCluster::create_reachable`].
    pub fn host_addr(&self) -> Option<Ipv4Addr> {
        self.host_link
            .as_ref()
            .map(|_| Ipv4Addr::new(self.subnet[0], self.subnet[1], self.subnet[2], 1))
    }

    fn build(&self) -> Result<(), NemesisError> {
        let hub = self.hub.as_str();
        run("ip", &["netns", "add", hub])?;
        run("ip", &["-n", hub, "link", "set", "lo", "up"])?;
        run("ip", &["-n", hub, "link", "add", "br0", "type", "bridge"])?;
        run("ip", &["-n", hub, "link", "set", "br0", "up"])?;
        for (i, ns) in self.nodes.iter().enumerate() {
            let veth = format!("v{}", i + 1);
            run("ip", &["netns", "add", ns])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            run(
                "ip",
                &[
                    "-n", hub, "link", "add", &veth, "type", "veth", "peer", "name", "eth0",
                    "netns", ns,
                ],
            )?;
            run("ip", &["-n", hub, "link", "set", &veth, "master", "br0"])?;
            run("ip", &["-n", hub, "link", "set", &veth, "up"])?;
            let cidr = format!("{}/24", self.addr(i));
            run("ip", &["-n", ns, "addr", "add", &cidr, "dev", "eth0"])?;
            run("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
        }
        Ok(())
    }

    /// Whether `tc ... netem` works in these namespaces (it does not on kernels built
    /// without sch_netem, where it fails with "Specified qdisc kind is unknown").
    fn probe_netem(&self) -> bool {
        let ns = self.hub.as_str();
        let ok = run(
            "ip",
            &[
                "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                "1ms",
            ],
        )
        .is_ok();
        if ok {
            let _ = run(
                "ip",
                &[
                    "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root",
                ],
            );
        }
        ok
    }

    /// Every namespace this cluster made: the nodes' and the hub's.
    pub fn namespaces(&self) -> Vec<String> {
        self.nodes
            .iter()
            .chain(std::iter::once(&self.hub))
            .cloned()
            .collect()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the cluster has no nodes (never, after `create`).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The namespace name of node `i`.
    pub fn namespace(&self, i: usize) -> &str {
        &self.nodes[i.min(self.nodes.len() - 1)]
    }

    /// Node `i`'s address (inside the node namespaces; from the caller too when the cluster
    /// was made by [`NetnsCluster::create_reachable`]).
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(self.subnet[0], self.subnet[1], self.subnet[2], 10 + i as u8)
    }

    fn addrs(&self) -> Vec<IpAddr> {
        (0..self.len()).map(|i| IpAddr::V4(self.addr(i))).collect()
    }

    /// A command that runs `program` inside node `i`'s namespace
    /// (`ip netns exec <ns> program`); add arguments and spawn it as usual.
    pub fn command(&self, i: usize, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.env("PATH", tool_search_path());
        c.args(["netns", "exec", self.namespace(i), program]);
        c
    }

    /// The faults currently applied.
    pub fn faults(&self) -> NetFaults {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs an `nft -f -` script inside node `i`'s namespace.
    pub(crate) fn nft(&self, i: usize, script: &str) -> Result<(), NemesisError> {
        run_stdin(
            "ip",
            &["netns", "exec", self.namespace(i), "nft", "-f", "-"],
            script,
        )
    }

    /// The packet filter in use.
    pub fn firewall(&self) -> Firewall {
        self.firewall
    }

    fn apply_iptables(&self, faults: &NetFaults, to: usize) -> Result<(), NemesisError> {
        let ns = self.namespace(to);
        let ipt = |args: &[&str]| {
            let mut full = vec!["netns", "exec", ns, "iptables", "-w"];
            full.extend_from_slice(args);
            run("ip", &full)
        };
        if ipt(&["-L", CHAIN, "-n"]).is_err() {
            ipt(&["-N", CHAIN])?;
            ipt(&["-I", "INPUT", "-j", CHAIN])?;
        }
        ipt(&["-F", CHAIN])?;
        for ((from, dst), f) in faults.faulty_flows() {
            if *dst != to {
                continue;
            }
            let src = self.addr(*from).to_string();
            match f.cut {
                Some(CutMode::Blackhole) => {
                    ipt(&["-A", CHAIN, "-s", &src, "-j", "DROP"])?;
                }
                Some(CutMode::Refuse) => {
                    ipt(&[
                        "-A",
                        CHAIN,
                        "-s",
                        &src,
                        "-p",
                        "tcp",
                        "-j",
                        "REJECT",
                        "--reject-with",
                        "tcp-reset",
                    ])?;
                    ipt(&["-A", CHAIN, "-s", &src, "-j", "REJECT"])?;
                }
                None => {}
            }
            if f.loss > 0.0 {
                let p = format!("{:.4}", f.loss.clamp(0.0, 1.0));
                ipt(&[
                    "-A",
                    CHAIN,
                    "-s",
                    &src,
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    &p,
                    "-j",
                    "DROP",
                ])?;
            }
        }
        Ok(())
    }

    /// netem delay on each sender's eth0: the largest delay of its outgoing flows (netem
    /// here is per interface, so it slows every flow the sender has).
    fn apply_delay(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        for from in 0..self.len() {
            let (mut delay, mut jitter) = (0u128, 0u128);
            for ((f, _), ff) in faults.faulty_flows() {
                if *f == from {
                    delay = delay.max(ff.delay.as_millis());
                    jitter = jitter.max(ff.jitter.as_millis());
                }
            }
            let ns = self.namespace(from);
            let _ = run(
                "ip",
                &[
                    "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root",
                ],
            );
            if delay > 0 {
                let (d, j) = (format!("{delay}ms"), format!("{jitter}ms"));
                run(
                    "ip",
                    &[
                        "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "netem",
                        "delay", &d, &j,
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// Deletes every namespace this cluster made (with their links and rules). Processes
    /// still running inside them keep their namespace alive until they exit: stop them
    /// first. Safe to call twice.
    pub fn teardown(&self) -> Result<(), NemesisError> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut errors = Vec::new();
        let existing = list_namespaces();
        for ns in self.nodes.iter().chain(std::iter::once(&self.hub)) {
            if existing.contains(ns) {
                if let Err(e) = run("ip", &["netns", "del", ns]) {
                    errors.push(e.to_string());
                }
            }
        }
        // Gone with the hub already, unless the run failed before the link was moved there.
        if let Some(link) = &self.host_link {
            if host_links().contains(link) {
                if let Err(e) = run("ip", &["link", "del", link]) {
                    errors.push(e.to_string());
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(NemesisError::Fault(errors.join("; ")))
        }
    }
}

/// An `nft -f -` script that makes table `inet <table>` hold exactly the rules node `to`
/// needs for `faults` (what it drops from each sender, by the sender's address in
/// `addrs`): the table is replaced whole, and a script for no faults deletes it. Shared by
/// this backend and the harness's remote hosts.
pub fn nft_script(table: &str, faults: &NetFaults, to: usize, addrs: &[IpAddr]) -> String {
    let mut rules = String::new();
    for ((from, dst), f) in faults.faulty_flows() {
        let Some(src) = addrs.get(*from) else {
            continue;
        };
        if *dst != to {
            continue;
        }
        let family = if src.is_ipv4() { "ip" } else { "ip6" };
        match f.cut {
            Some(CutMode::Blackhole) => rules.push_str(&format!("    {family} saddr {src} drop\n")),
            Some(CutMode::Refuse) => {
                rules.push_str(&format!(
                    "    {family} saddr {src} meta l4proto tcp reject with tcp reset\n"
                ));
                rules.push_str(&format!("    {family} saddr {src} reject\n"));
            }
            None => {}
        }
        if f.loss > 0.0 {
            let n = (f.loss.clamp(0.0, 1.0) * 10_000.0).round() as u32;
            rules.push_str(&format!(
                "    {family} saddr {src} numgen random mod 10000 < {n} drop\n"
            ));
        }
    }
    // "add table" then "delete table" makes the script work whether or not it exists
    let mut script = format!("add table inet {table}\ndelete table inet {table}\n");
    if !rules.is_empty() {
        script.push_str(&format!(
            "table inet {table} {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n{rules}  }}\n}}\n"
        ));
    }
    script
}

impl NetworkFaults for NetnsCluster {
    fn node_count(&self) -> usize {
        self.len()
    }

    fn apply(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let wants_delay = faults.faulty_flows().any(|(_, f)| !f.delay.is_zero());
        if wants_delay && !self.netem {
            return Err(NemesisError::Unsupported(
                "delay needs tc netem, which this kernel lacks".into(),
            ));
        }
        if faults.faulty_clients().next().is_some() {
            return Err(NemesisError::Unsupported(
                "client-link faults are only offered by the proxy mesh".into(),
            ));
        }
        if faults.faulty_flows().any(|(_, f)| f.bandwidth.is_some()) {
            return Err(NemesisError::Unsupported(
                "bandwidth caps are only offered by the proxy mesh".into(),
            ));
        }
        for to in 0..self.len() {
            match self.firewall {
                Firewall::Nft => {
                    let ns = self.namespace(to);
                    run_stdin(
                        "ip",
                        &["netns", "exec", ns, "nft", "-f", "-"],
                        &nft_script(TABLE, faults, to, &self.addrs()),
                    )?
                }
                Firewall::Iptables => self.apply_iptables(faults, to)?,
            }
        }
        if self.netem {
            self.apply_delay(faults)?;
        }
        *current = faults.clone();
        Ok(())
    }

    fn supports_delay(&self) -> bool {
        self.netem
    }
}

impl Drop for NetnsCluster {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}
