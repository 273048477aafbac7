//! `splitbrain-ddp`: one rank of the training cluster, or the reference replay. See
//! `--help` and the crate README.

use clap::Parser;
use splitbrain_ddp::config::{parse_members, Args, Bug, Transport};
use splitbrain_ddp::core::{CkptId, Core};
use splitbrain_ddp::data::Dataset;
use splitbrain_ddp::http::Api;
use splitbrain_ddp::net::{self, PeerNet};
use splitbrain_ddp::node::{DataBugs, Driver, Published, Shared};
use splitbrain_ddp::replay::replay;
use splitbrain_ddp::shm;
use splitbrain_ddp::store::Store;
use splitbrain_target_runtime::OffsetClock;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn main() {
    let args = Args::parse();
    if args.bench {
        splitbrain_ddp::bench::run(&args.bench_ranks, &args.bench_mib, &args.bench_transports);
        return;
    }
    if args.replay {
        if let Err(e) = args.validate() {
            eprintln!("splitbrain-ddp: {e}");
            std::process::exit(2);
        }
        let train = args.train();
        let members = match &args.members {
            Some(m) => parse_members(m, train.world).unwrap_or_default(),
            None => Vec::new(),
        };
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        replay(&train, &members, args.steps.unwrap_or(100), |s| {
            if let Ok(line) = serde_json::to_string(&s) {
                let _ = writeln!(out, "{line}");
            }
        });
        let _ = out.flush();
        return;
    }
    splitbrain_target_runtime::cli::run_server("splitbrain-ddp", run(args));
}

async fn run(args: Args) -> Result<(), String> {
    args.validate()?;
    let train = args.train();
    let cfg = args.core_config();
    let rank = cfg.rank;
    let clock = OffsetClock::new();
    let store = Store::open(&args.data_dir).map_err(|e| e.to_string())?;
    let log = store.read_log().map_err(|e| e.to_string())?;
    let committed = log.last().map(|r| r.step).unwrap_or(0);
    // The checkpoints this rank committed: each checkpoint step's record names its gen.
    let lineage: Vec<CkptId> = log
        .iter()
        .filter(|r| r.step.is_multiple_of(train.ckpt_every))
        .map(|r| CkptId {
            step: r.step,
            gen: r.gen,
        })
        .collect();
    let durable: Vec<CkptId> = store.list().map_err(|e| e.to_string())?;
    let client_listener = tokio::net::TcpListener::bind(&args.client_listen)
        .await
        .map_err(|e| format!("bind --client-listen {}: {e}", args.client_listen))?;
    let world = train.world;
    let (tx, rx) = std::sync::mpsc::channel();
    let net = match (args.transport, &args.shm_dir) {
        (Transport::Shm, Some(dir)) => {
            shm::frames::listen(dir, rank, world, tx).map_err(|e| e.to_string())?;
            let others: Vec<usize> = (0..world).filter(|&r| r != rank).collect();
            shm::frames::start(rank, world, dir, &others)
        }
        _ => {
            let peer_listener = std::net::TcpListener::bind(&args.peer_listen)
                .map_err(|e| format!("bind --peer-listen {}: {e}", args.peer_listen))?;
            let peers: Vec<(usize, String)> = args
                .peers
                .iter()
                .map(|(id, a)| ((*id as usize).saturating_sub(1), a.clone()))
                .collect();
            std::thread::Builder::new()
                .name("ddp-listen".into())
                .spawn(move || net::listen(peer_listener, world, tx))
                .map_err(|e| e.to_string())?;
            PeerNet::start(rank, world, &peers)
        }
    };
    let (commits, _) = tokio::sync::watch::channel(committed);
    let shared = Shared {
        state: Arc::new(Mutex::new(Published {
            steps: log,
            status: (0, "rendezvous".into(), 0, committed),
            timing: (0.0, 0.0, 0),
        })),
        commits: Arc::new(commits),
    };
    // A restarted rank must be told apart from its earlier incarnation.
    let boot = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id());
    let core = Core::new(
        cfg,
        train.init(rank),
        durable,
        committed,
        lineage,
        boot,
        clock.now_ms(),
    );
    let data = Dataset::new(
        train.seed,
        train.dataset_size,
        train.mlp.input_width(),
        train.mlp.classes(),
    );
    println!(
        "splitbrain-ddp rank {rank} of {world}: {} parameters in {} buckets, bugs {:?}, {committed} steps committed, client {} peers {}",
        train.mlp.num_params(),
        train.buckets.len(),
        args.bug_names(),
        args.client_listen,
        match (&args.transport, &args.shm_dir) {
            (Transport::Shm, Some(dir)) => format!("by shared memory in {}", dir.display()),
            _ => format!("by TCP, listening on {}", args.peer_listen),
        }
    );
    // With shared memory the buckets are all-reduced through one mapping per generation;
    // a wait is bounded by the step timeout, after which the core re-forms the group.
    let direct = match (args.transport, &args.shm_dir) {
        (Transport::Shm, Some(dir)) => {
            let largest = train.buckets.iter().map(|b| b.len()).max().unwrap_or(0);
            let bound =
                Duration::from_millis((args.step_timeout_ms.max(10) as u64 / 2).clamp(5, 2000));
            Some(shm::generations::GenerationGroups::new(
                dir, rank, largest, bound,
            ))
        }
        _ => None,
    };
    let driver = Driver {
        core,
        data,
        store,
        net,
        rx,
        clock: clock.clone(),
        shared: shared.clone(),
        bugs: DataBugs {
            sampler_overlap: args.has_bug(Bug::SamplerOverlap),
            resume_without_sampler_state: args.has_bug(Bug::ResumeWithoutSamplerState),
        },
        step_delay: Duration::from_millis(args.step_delay_ms),
        data_pos: 0,
        pending: Default::default(),
        history: Default::default(),
        current: None,
        logged: committed,
        overlap: !args.no_overlap,
        timing: Default::default(),
        direct,
        train,
    };
    std::thread::Builder::new()
        .name("ddp-driver".into())
        .spawn(move || driver.run())
        .map_err(|e| e.to_string())?;
    let api = Arc::new(Api {
        rank: rank as u64,
        world: world as u64,
        bugs: args.bug_names(),
        clock,
        shared,
    });
    splitbrain_target_runtime::http::serve(client_listener, move |req| {
        let api = api.clone();
        async move { api.handle(req).await }
    })
    .await;
    Ok(())
}
