//! `splitbrain proxy-host`: the link proxy a remote run starts on each of its hosts (see
//! `remote::proxies`); driven over stdin and stdout, it ends when its stdin does.

use clap::Args;
use std::net::{IpAddr, SocketAddr};

/// Arguments of `splitbrain proxy-host`.
#[derive(Args, Debug)]
pub struct ProxyHostArgs {
    /// The address every link listens on (this host's).
    #[arg(long)]
    bind: IpAddr,
    /// Seed of the links' loss and jitter.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Loss holds a binary stream up by retransmission timeouts instead of dropping
    /// newline-terminated messages (`LossMode::Retransmit`).
    #[arg(long)]
    binary_streams: bool,
    /// Where each link forwards to, in order (one listener per target).
    #[arg(long = "target")]
    targets: Vec<SocketAddr>,
}

pub(crate) fn cmd_proxy_host(a: ProxyHostArgs) -> anyhow::Result<u8> {
    let rt = super::runtime()?;
    rt.block_on(async {
        let input = tokio::io::BufReader::new(tokio::io::stdin());
        splitbrain_nemesis::proxy::host::serve_host(
            a.bind,
            &a.targets,
            a.seed,
            match a.binary_streams {
                true => splitbrain_nemesis::proxy::LossMode::Retransmit,
                false => splitbrain_nemesis::proxy::LossMode::Lines,
            },
            input,
            tokio::io::stdout(),
        )
        .await
    })?;
    // stdin's reader thread may still be blocked in read(2): do not wait for it.
    rt.shutdown_background();
    Ok(0)
}
