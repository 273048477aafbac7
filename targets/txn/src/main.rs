//! `splitbrain-txn`: the server binary. See `--help` and the crate README.

use clap::Parser;
use splitbrain_target_runtime::OffsetClock;
use splitbrain_txn::config::{Args, Bug};
use splitbrain_txn::core::Core;
use splitbrain_txn::http::Api;
use splitbrain_txn::node;
use splitbrain_txn::peer;
use splitbrain_txn::storage::Wal;
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args = Args::parse();
    splitbrain_target_runtime::cli::run_server("splitbrain-txn", run(args));
}

async fn run(args: Args) -> Result<(), String> {
    args.validate()?;
    let nodes = args.nodes();
    let clock = OffsetClock::new();
    // Replay the WAL before listening: /health answers only once recovery is done.
    let (wal, records) = Wal::open(&args.node.data_dir, args.has_bug(Bug::NoPrepareFsync))
        .map_err(|e| format!("opening the WAL: {e}"))?;
    let core = Core::new(args.core_config(), &records, clock.now_ms());
    let replayed = records.len();
    let (client_listener, peer_listener) = args.node.bind().await?;
    let net = peer::start(args.node.id, &args.node.peers);
    let boot = core.boot();
    let handle = node::spawn(core, wal, clock.clone(), net)
        .map_err(|e| format!("starting the node thread: {e}"))?;
    tokio::spawn(peer::listen(peer_listener, handle.tx.clone()));
    println!(
        "splitbrain-txn node {} of {nodes}: isolation {}, bugs {:?}, boot {boot}, {replayed} WAL records replayed, client {} peer {}",
        args.node.id,
        args.isolation().name(),
        args.bug_names(),
        args.node.client_listen,
        args.node.peer_listen
    );
    let api = Arc::new(Api {
        id: args.node.id,
        nodes,
        isolation: args.isolation().name(),
        bugs: args.bug_names(),
        clock,
        node: handle,
        wait: Duration::from_millis(args.request_timeout_ms.max(1) as u64 + 2000),
    });
    splitbrain_target_runtime::http::serve(client_listener, move |req| {
        let api = api.clone();
        async move { api.handle(req).await }
    })
    .await;
    Ok(())
}
