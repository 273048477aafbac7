//! `splitbrain-bayou`: the server binary. See `--help` and the crate README.

use clap::Parser;
use splitbrain_bayou::config::Args;
use splitbrain_bayou::core::Core;
use splitbrain_bayou::http::Api;
use splitbrain_bayou::node;
use splitbrain_bayou::peer;
use splitbrain_bayou::storage::Store;
use splitbrain_target_runtime::OffsetClock;
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args = Args::parse();
    splitbrain_target_runtime::cli::run_server("splitbrain-bayou", run(args));
}

async fn run(args: Args) -> Result<(), String> {
    args.validate()?;
    let nodes = args.nodes();
    let clock = OffsetClock::new();
    // Recover before listening: /health answers only once recovery is done.
    let (store, checkpoint, records) =
        Store::open(&args.node.data_dir).map_err(|e| format!("opening the data dir: {e}"))?;
    let replayed = records.len();
    let core = Core::new(args.core_config(), checkpoint, &records, clock.now_ms());
    let status = core.status();
    let (client_listener, peer_listener) = args.node.bind().await?;
    let net = peer::start(args.node.id, &args.node.peers);
    let handle = node::spawn(core, store, clock.clone(), net)
        .map_err(|e| format!("starting the node thread: {e}"))?;
    tokio::spawn(peer::listen(peer_listener, handle.tx.clone()));
    println!(
        "splitbrain-bayou replica {} of {nodes}: primary {}, bugs {:?}, {replayed} log records replayed (checkpoint csn {}, csn {}, {} tentative), client {} peer {}",
        args.node.id,
        args.primary,
        args.bug_names(),
        status.checkpoint_csn,
        status.csn,
        status.tentative,
        args.node.client_listen,
        args.node.peer_listen
    );
    let api = Arc::new(Api {
        id: args.node.id,
        nodes,
        primary: args.primary,
        bugs: args.bug_names(),
        clock,
        node: handle,
        wait: Duration::from_millis(args.session_wait_ms.max(0) as u64 + 5000),
    });
    splitbrain_target_runtime::http::serve(client_listener, move |req| {
        let api = api.clone();
        async move { api.handle(req).await }
    })
    .await;
    Ok(())
}
