//! Network faults on remote hosts: nftables rules in a table of the harness's own
//! (`inet splitbrain`) on each receiving host, dropping packets from the cut-off peers'
//! addresses. Each host's table is replaced whole on every change and deleted on heal,
//! so healing removes exactly what the run added and nothing of the host's own rules.

use super::session::{quote, HostSession};
use super::RemoteError;
use splitbrain_nemesis::netns::nft_script;
use splitbrain_nemesis::{NemesisError, NetFaults, NetworkFaults};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The nftables table the run's rules live in on every host.
pub const TABLE: &str = "splitbrain";

/// What a host offers for network faults, found before the run starts.
#[derive(Debug, Clone)]
pub struct HostFirewall {
    /// The command that runs nft there (`nft`, or `sudo -n nft` for a non-root user).
    pub nft: String,
    /// Whether `tc ... netem` works there.
    pub netem: bool,
}

/// Checks that `host` can carry the run's network faults: nft is installed and may be
/// run, no table of ours is there already (another run's), and whether netem works.
pub async fn probe(host: &HostSession) -> Result<HostFirewall, RemoteError> {
    let missing = |what: &str| RemoteError::Missing {
        host: host.host.label(),
        what: what.to_string(),
    };
    let script = "PATH=$PATH:/usr/sbin:/sbin; command -v nft >/dev/null || { echo no-nft; exit 0; }; \
        if [ \"$(id -u)\" = 0 ]; then n=nft; else n='sudo -n nft'; fi; \
        $n list tables >/dev/null 2>&1 || { echo no-permission; exit 0; }; \
        if $n list table inet splitbrain >/dev/null 2>&1; then echo taken; exit 0; fi; \
        t=$(echo $n | sed 's/nft$/tc/'); \
        if $t qdisc add dev lo root netem delay 1ms 2>/dev/null; then $t qdisc del dev lo root; echo \"ok $n;netem\"; else echo \"ok $n;\"; fi";
    let out = host.run("checking nftables", script).await?;
    let out = out.trim();
    match out {
        "no-nft" => Err(missing(
            "nft is not installed (Debian package nftables); partitions need it",
        )),
        "no-permission" => Err(missing(
            "the login user may not run nft (log in as root, or allow it `sudo -n nft`)",
        )),
        "taken" => Err(missing(
            "an nftables table `inet splitbrain` is there already (another run's?); remove it with `nft delete table inet splitbrain`",
        )),
        _ => {
            let rest = out.strip_prefix("ok ").unwrap_or(out);
            let (nft, netem) = rest.split_once(';').unwrap_or((rest, ""));
            Ok(HostFirewall {
                nft: format!("PATH=$PATH:/usr/sbin:/sbin {nft}"),
                netem: netem == "netem",
            })
        }
    }
}

/// The remote network backend: one nftables table per host.
pub struct RemoteFirewall {
    hosts: Vec<Arc<HostSession>>,
    firewalls: Vec<HostFirewall>,
    addrs: Vec<IpAddr>,
    /// The script last applied on each host (`None`: nothing of ours there).
    applied: Mutex<Vec<Option<String>>>,
    runtime: tokio::runtime::Handle,
}

impl RemoteFirewall {
    /// A backend over `hosts` (probed with [`probe`]); `addrs[i]` is the address host `i`'s
    /// packets come from. Must be made inside a multi-threaded tokio runtime.
    pub fn new(
        hosts: Vec<Arc<HostSession>>,
        firewalls: Vec<HostFirewall>,
        addrs: Vec<IpAddr>,
    ) -> RemoteFirewall {
        let n = hosts.len();
        RemoteFirewall {
            hosts,
            firewalls,
            addrs,
            applied: Mutex::new(vec![None; n]),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    async fn apply_on(&self, i: usize, script: &str) -> Result<(), RemoteError> {
        let cmd = format!(
            "printf '%s' {} | {} -f -",
            quote(script),
            self.firewalls[i].nft
        );
        self.hosts[i]
            .run("applying nftables rules", &cmd)
            .await
            .map(|_| ())
    }

    async fn apply_async(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        for to in 0..self.hosts.len() {
            let script = nft_script(TABLE, faults, to, &self.addrs);
            let clean = faults.faulty_flows().all(|((_, d), _)| *d != to);
            let last = self.lock()[to].clone();
            // A host with nothing of ours and nothing to add is left alone.
            if (clean && last.is_none()) || last.as_deref() == Some(script.as_str()) {
                continue;
            }
            self.apply_on(to, &script)
                .await
                .map_err(|e| NemesisError::Fault(e.to_string()))?;
            self.lock()[to] = (!clean).then_some(script);
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<String>>> {
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deletes the run's table on every host it may be on (also those whose last apply
    /// failed half-way). Returns the errors.
    pub async fn remove_all(&self) -> Vec<RemoteError> {
        let mut errors = Vec::new();
        for i in 0..self.hosts.len() {
            let cmd = format!(
                "if {n} list table inet {TABLE} >/dev/null 2>&1; then {n} delete table inet {TABLE}; fi",
                n = self.firewalls[i].nft
            );
            match self.hosts[i].run("removing the nftables table", &cmd).await {
                Ok(_) => self.lock()[i] = None,
                Err(e) => errors.push(e),
            }
        }
        errors
    }
}

impl NetworkFaults for RemoteFirewall {
    fn node_count(&self) -> usize {
        self.hosts.len()
    }

    fn apply(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        if faults.faulty_flows().any(|(_, f)| !f.delay.is_zero()) {
            let lacking: Vec<String> = self
                .hosts
                .iter()
                .zip(&self.firewalls)
                .filter(|(_, f)| !f.netem)
                .map(|(h, _)| h.host.label())
                .collect();
            return Err(NemesisError::Unsupported(if lacking.is_empty() {
                "slow links on remote hosts are not offered yet (the hosts have tc netem)".into()
            } else {
                format!(
                    "slow links need tc netem, which these hosts' kernels lack: {}",
                    lacking.join(", ")
                )
            }));
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
        // The nemesis calls this synchronously from its async task: run the SSH commands
        // on this runtime without blocking its other tasks.
        if self.runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err(NemesisError::Fault(
                "the remote firewall needs a multi-threaded tokio runtime".into(),
            ));
        }
        tokio::task::block_in_place(|| self.runtime.block_on(self.apply_async(faults)))
    }

    fn supports_delay(&self) -> bool {
        false
    }
}
