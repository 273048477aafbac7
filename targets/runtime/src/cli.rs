//! Command-line conventions shared by bundled targets.
//!
//! Every bundled server takes `--id N`, `--client-listen ADDR`, `--peer-listen ADDR`, one
//! `--peer J=ADDR` per other node (where THIS node dials node J: the harness may put a
//! proxy there, so the address differs per sender), `--data-dir DIR` ([`NodeArgs`]) and
//! `--bug NAME`.

use std::path::PathBuf;
use tokio::net::TcpListener;

/// The flags every bundled server with a fixed membership takes, flattened into its
/// `Args` (`#[command(flatten)] pub node: NodeArgs`).
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// This node's id, 1..=N.
    #[arg(long)]
    pub id: u64,
    /// Address for the client HTTP API.
    #[arg(long)]
    pub client_listen: String,
    /// Address other nodes connect to.
    #[arg(long)]
    pub peer_listen: String,
    /// Where THIS node dials node ID, as ID=HOST:PORT; once per other node (N = 1 + count).
    #[arg(long = "peer", value_parser = parse_peer)]
    pub peers: Vec<(u64, String)>,
    /// Directory for the node's durable state (created if missing).
    #[arg(long)]
    pub data_dir: PathBuf,
}

impl NodeArgs {
    /// Number of nodes: this one and one per `--peer`.
    pub fn nodes(&self) -> u64 {
        1 + self.peers.len() as u64
    }

    /// Checks the ids: `--id` and every `--peer` id in `1..=N`, distinct.
    pub fn validate(&self) -> Result<(), String> {
        check_ids(self.id, self.nodes(), &self.peers)
    }

    /// Binds `--client-listen` and `--peer-listen`, in that order.
    pub async fn bind(&self) -> Result<(TcpListener, TcpListener), String> {
        let client = TcpListener::bind(&self.client_listen)
            .await
            .map_err(|e| format!("bind --client-listen {}: {e}", self.client_listen))?;
        let peer = TcpListener::bind(&self.peer_listen)
            .await
            .map_err(|e| format!("bind --peer-listen {}: {e}", self.peer_listen))?;
        Ok((client, peer))
    }
}

/// Checks `--id` and every `--peer` id: in `1..=nodes`, distinct, none equal to `--id`.
pub fn check_ids(id: u64, nodes: u64, peers: &[(u64, String)]) -> Result<(), String> {
    if id == 0 || id > nodes {
        return Err(format!(
            "--id must be in 1..={nodes} (1 + number of --peer flags)"
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (peer, _) in peers {
        if *peer == id || *peer == 0 || *peer > nodes || !seen.insert(*peer) {
            return Err(format!(
                "bad --peer id {peer}: ids are 1..={nodes}, distinct, other than --id"
            ));
        }
    }
    Ok(())
}

/// Runs a server's async `main` on a multi-threaded tokio runtime. If the runtime cannot
/// start or `run` fails, prints `program: error` to stderr and exits with status 1.
pub fn run_server<F>(program: &str, run: F)
where
    F: std::future::Future<Output = Result<(), String>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{program}: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run) {
        eprintln!("{program}: {e}");
        std::process::exit(1);
    }
}

/// Parses a `--peer` value of the form `ID=HOST:PORT` into `(id, "HOST:PORT")`.
/// Usable as a clap `value_parser`.
pub fn parse_peer(s: &str) -> Result<(u64, String), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("expected ID=HOST:PORT, got {s:?}"))?;
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|e| format!("bad peer id in {s:?}: {e}"))?;
    let addr = addr.trim();
    if addr.is_empty() || !addr.contains(':') {
        return Err(format!("bad peer address in {s:?}: expected HOST:PORT"));
    }
    Ok((id, addr.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_peers() {
        assert_eq!(
            parse_peer("2=127.0.0.1:9012"),
            Ok((2, "127.0.0.1:9012".to_string()))
        );
        assert!(parse_peer("x=1:2").is_err());
        assert!(parse_peer("2").is_err());
        assert!(parse_peer("2=").is_err());
    }

    #[test]
    fn ids_are_checked() {
        let peers = |ids: &[u64]| -> Vec<(u64, String)> {
            ids.iter().map(|i| (*i, format!("h:{i}"))).collect()
        };
        assert!(check_ids(2, 3, &peers(&[1, 3])).is_ok());
        assert!(check_ids(0, 3, &peers(&[1, 3])).is_err());
        assert!(check_ids(4, 3, &peers(&[1, 3])).is_err());
        assert!(check_ids(2, 3, &peers(&[2, 3])).is_err());
        assert!(check_ids(2, 3, &peers(&[3, 3])).is_err());
        assert!(check_ids(1, 3, &peers(&[2, 4])).is_err());
    }
}
