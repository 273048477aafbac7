//! `splitbrain-kv`: the server binary. See `--help` and the crate README.

use clap::Parser;
use splitbrain_kv::config::{Args, Bug};
use splitbrain_kv::core::Config;
use splitbrain_kv::http::Api;
use splitbrain_kv::node::{spawn_shard, ShardSettings};
use splitbrain_kv::peer::{self, PeerNet};
use splitbrain_kv::shard::ShardMap;
use splitbrain_target_runtime::OffsetClock;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args = Args::parse();
    splitbrain_target_runtime::cli::run_server("splitbrain-kv", run(args));
}

async fn run(args: Args) -> Result<(), String> {
    args.node.validate()?;
    let nodes = args.nodes();
    let map = ShardMap::new(nodes, args.shards);
    let clock = OffsetClock::new();
    let (client_listener, peer_listener) = args.node.bind().await?;
    let net = PeerNet::start(args.node.id, &args.node.peers);

    println!(
        "splitbrain-kv node {} of {nodes}: read mode {}, bugs {:?}",
        args.node.id,
        args.read_mode().name(),
        args.bugs.iter().map(|b| b.name()).collect::<Vec<_>>()
    );
    let mut shards = BTreeMap::new();
    for s in 0..map.shards() {
        let replicas = map.replicas(s);
        println!("shard {s} -> replicas {replicas:?}");
        if !replicas.contains(&args.node.id) {
            continue;
        }
        let mut core = Config::new(
            args.node.id,
            replicas,
            args.seed.unwrap_or(args.node.id) ^ u64::from(s) << 32,
        );
        core.election_timeout_ms = args.election_timeout_ms.max(10);
        core.heartbeat_ms = args.heartbeat_ms.max(1);
        core.lease_ms = args.lease_ms;
        core.max_drift_ms = args.max_drift_ms;
        core.read_index_lease = args.read_mode().any_replica() && !args.read_index_quorum;
        core.bugs = args.core_bugs();
        let settings = ShardSettings {
            shard: s,
            core,
            data_dir: args.node.data_dir.join(format!("shard-{s}")),
            read_mode: args.read_mode(),
            stale_read: args.has_bug(Bug::StaleRead),
            ack_before_commit: args.has_bug(Bug::AckBeforeCommit),
            no_fsync: args.has_bug(Bug::NoFsync),
            request_timeout: Duration::from_millis(args.request_timeout_ms),
            clock: clock.clone(),
            net: net.clone(),
        };
        let handle = spawn_shard(settings).map_err(|e| format!("shard {s}: {e}"))?;
        shards.insert(s, handle);
    }
    let shards = Arc::new(shards);
    tokio::spawn(peer::listen(peer_listener, shards.clone()));
    let api = Arc::new(Api {
        id: args.node.id,
        read_mode: args.read_mode().name(),
        bugs: args.bugs.iter().map(|b| b.name()).collect(),
        clock,
        map,
        shards,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
    });
    println!(
        "listening: client {} peer {}",
        args.node.client_listen, args.node.peer_listen
    );
    splitbrain_target_runtime::http::serve(client_listener, move |req| {
        let api = api.clone();
        async move { api.handle(req).await }
    })
    .await;
    Ok(())
}
