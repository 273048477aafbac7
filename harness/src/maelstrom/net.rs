//! The network inside the controller: every message a node writes is routed here, to
//! another node (through the nemesis's faults: cut links drop, lossy links drop at random,
//! slow links and the base latency delay), to a client waiting for its reply, or to a
//! service. No privileges are needed, and one seeded generator draws every latency and loss
//! decision, so a run's delivery schedule repeats as far as the nodes are deterministic.
//!
//! Protocol violations (an unreadable line, a message claiming another sender, a reply to
//! a request nobody made, a message to nobody) are fatal: the run stops with an error
//! naming the node and the line.

use super::protocol::{parse_line, Message};
use super::services::{Services, SERVICE_NAMES};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};
use splitbrain_nemesis::{FlowFaults, NemesisError, NetFaults, NetworkFaults, NodeNames};
use splitbrain_reports::{Latency, NetStats, NodeNetStats, OpTypeNetStats};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

pub use crate::run::spec::LatencyDist;

/// The network's settings.
#[derive(Debug, Clone, Copy)]
pub struct NetOptions {
    /// Mean one-way latency of every message, in ms.
    pub latency_ms: f64,
    /// Its distribution.
    pub latency_dist: LatencyDist,
    /// Seed of every latency and loss draw.
    pub seed: u64,
}

/// The simulated network (cheap to clone: one shared state).
#[derive(Clone)]
pub struct MaelstromNet {
    inner: Arc<Inner>,
}

struct Inner {
    node_ids: Vec<String>,
    /// How `node_ids` were made, for the nemesis that names the same nodes.
    names: NodeNames,
    inboxes: Vec<Mutex<Inbox>>,
    faults: Mutex<NetFaults>,
    rng: Mutex<ChaCha8Rng>,
    opts: NetOptions,
    /// Replies clients wait for, by (client, msg_id).
    pending: Mutex<HashMap<(String, u64), ReplyWaiter>>,
    /// The highest msg_id each client has sent (a reply to one above it is a protocol error).
    issued: Mutex<HashMap<String, u64>>,
    services: Mutex<Services>,
    stats: Mutex<StatsAcc>,
    fatal: Mutex<Option<String>>,
    abort: CancellationToken,
    rt: tokio::runtime::Handle,
    next_client: AtomicU64,
}

/// One node's stdin, as the network sees it.
#[derive(Default)]
struct Inbox {
    /// The node process's stdin writer (`None`: dead).
    tx: Option<mpsc::Sender<String>>,
    /// `init` went to the current process: later messages follow it in its stdin.
    init_sent: bool,
    /// It answered `init`.
    init_ok: bool,
    /// Requests that arrived between the two, delivered at `init_ok`. A node handling
    /// messages concurrently (Maelstrom's Ruby and Go libraries) could otherwise answer
    /// one before it has read its own id from `init`, with `"src": null`. Replies (to
    /// what the node asked a service or a peer during `init`) are not held.
    held: Vec<String>,
}

/// How [`MaelstromNet::deliver`] treats a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// The node's `init`.
    Init,
    /// An answer (`in_reply_to`): delivered as soon as `init` was.
    Reply,
    /// Anything else: held until the node answered `init`.
    Request,
}

/// Where a client's reply body goes.
type ReplyWaiter = oneshot::Sender<Map<String, Value>>;

#[derive(Default)]
struct StatsAcc {
    stats: NetStats,
    latencies: BTreeMap<String, Vec<f64>>,
    /// Client-op latencies (ms) by request type.
    type_latencies: BTreeMap<String, Vec<f64>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MaelstromNet {
    /// A network for `nodes` nodes named by `names` (Maelstrom's `n0`.. in a run). Must be
    /// made inside a tokio runtime.
    pub fn new(names: NodeNames, nodes: usize, opts: NetOptions) -> MaelstromNet {
        let node_ids = names.all(nodes);
        let mut stats = StatsAcc::default();
        for id in &node_ids {
            stats
                .stats
                .by_node
                .insert(id.clone(), NodeNetStats::default());
        }
        MaelstromNet {
            inner: Arc::new(Inner {
                inboxes: (0..nodes).map(|_| Mutex::new(Inbox::default())).collect(),
                node_ids,
                names,
                faults: Mutex::new(NetFaults::new()),
                rng: Mutex::new(ChaCha8Rng::seed_from_u64(opts.seed ^ 0x4E45_5457)),
                opts,
                pending: Mutex::new(HashMap::new()),
                issued: Mutex::new(HashMap::new()),
                services: Mutex::new(Services::new(nodes)),
                stats: Mutex::new(stats),
                fatal: Mutex::new(None),
                abort: CancellationToken::new(),
                rt: tokio::runtime::Handle::current(),
                next_client: AtomicU64::new(1),
            }),
        }
    }

    /// How the nodes are named (Maelstrom's `n0`..`n(N-1)` in a run).
    pub fn node_names(&self) -> NodeNames {
        self.inner.names
    }

    /// Every node's id, by index.
    pub fn node_ids(&self) -> &[String] {
        &self.inner.node_ids
    }

    /// A fresh client id (`c1`, `c2`, ...).
    pub fn new_client_id(&self) -> String {
        format!(
            "c{}",
            self.inner.next_client.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Connects (or, with `None`, disconnects: the node died) node `i`'s stdin.
    pub fn set_inbox(&self, i: usize, inbox: Option<mpsc::Sender<String>>) {
        *lock(&self.inner.inboxes[i]) = Inbox {
            tx: inbox,
            ..Inbox::default()
        };
    }

    /// Node `i` answered `init`: from now on every message reaches it, first those held.
    pub fn mark_initialized(&self, i: usize) {
        let mut inbox = lock(&self.inner.inboxes[i]);
        inbox.init_sent = true;
        inbox.init_ok = true;
        let held = std::mem::take(&mut inbox.held);
        if let Some(tx) = &inbox.tx {
            for line in held {
                let _ = tx.send(line);
            }
        }
    }

    /// Cancelled when a protocol violation ends the run.
    pub fn aborted(&self) -> CancellationToken {
        self.inner.abort.clone()
    }

    /// The protocol violation that ended the run, if any.
    pub fn fatal(&self) -> Option<String> {
        lock(&self.inner.fatal).clone()
    }

    /// Ends the run with this error (the first one wins).
    pub fn set_fatal(&self, why: String) {
        let mut f = lock(&self.inner.fatal);
        if f.is_none() {
            *f = Some(why);
        }
        self.inner.abort.cancel();
    }

    /// Handles one line node `i` wrote to stdout (`line_no` from 1).
    ///
    /// As in Maelstrom's `validate-msg`, `src` may name any node, client or service, not
    /// only the writer: a node may forward a client's request keeping the client's `src`,
    /// so that the receiver answers the client directly. Faults apply to the message's
    /// `src`, as Maelstrom's `recv!` applies partitions: a message claiming a client's
    /// `src` crosses partitions, since clients are never partitioned.
    pub fn on_node_line(&self, i: usize, line_no: u64, line: &str) {
        let name = &self.inner.node_ids[i];
        let fail = |what: String| {
            let shown: String = line.chars().take(200).collect();
            self.set_fatal(format!(
                "node {name} stdout line {line_no}: {what}: {shown}"
            ));
        };
        let msg = match parse_line(line) {
            Ok(m) => m,
            Err(e) => return fail(e),
        };
        if !self.is_known(&msg.src) {
            return fail(format!(
                "src is {:?}, which is no node, client or service (this node is {name:?})",
                msg.src
            ));
        }
        self.count(|s| {
            s.messages += 1;
            *s.by_type.entry(msg.kind().to_string()).or_default() += 1;
            if let Some(n) = s.by_node.get_mut(name) {
                n.sent += 1;
            }
        });
        if let Err(what) = self.route(msg, Some(line), i) {
            fail(what)
        }
    }

    /// Whether `id` names a node, a client this network handed out, or a service.
    fn is_known(&self, id: &str) -> bool {
        self.node_index(id).is_some()
            || SERVICE_NAMES.contains(&id)
            || id
                .strip_prefix('c')
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n >= 1 && n < self.inner.next_client.load(Ordering::Relaxed))
    }

    /// Routes one message that node `writer` wrote (`line`: its own text, passed on
    /// unchanged to another node) or a service answered. Faults follow the message's
    /// `src`: a node's links; a client or service crosses no partition.
    fn route(&self, msg: Message, line: Option<&str>, writer: usize) -> Result<(), String> {
        let from = self.node_index(&msg.src);
        if let Some(j) = self.node_index(&msg.dest) {
            self.count(|s| match from {
                Some(_) => s.server_messages += 1,
                None if is_client(&msg.src) => s.client_messages += 1,
                None => s.service_messages += 1,
            });
            let flow = from.map(|k| lock(&self.inner.faults).flow(k, j));
            if flow.as_ref().is_some_and(|f| f.cut.is_some()) {
                self.count(|s| s.dropped_partition += 1);
                return Ok(());
            }
            let delay = match &flow {
                Some(f) => self.transit(f),
                None => Some(self.latency()),
            };
            if let Some(delay) = delay {
                // A node's own line goes on unchanged, not a re-serialization.
                let line = line.map_or_else(|| msg.to_line(), str::to_string);
                let class = match msg.in_reply_to() {
                    Some(_) => Delivery::Reply,
                    None => Delivery::Request,
                };
                self.after(delay, move |net| net.deliver(j, line, class));
            }
            Ok(())
        } else if is_client(&msg.dest) {
            self.count(|s| s.client_messages += 1);
            let Some(irt) = msg.in_reply_to() else {
                return Err(format!(
                    "a message to client {} must answer one of its requests (in_reply_to)",
                    msg.dest
                ));
            };
            let waiter = lock(&self.inner.pending).remove(&(msg.dest.clone(), irt));
            match waiter {
                Some(tx) => {
                    let link = lock(&self.inner.faults).client(from.unwrap_or(writer));
                    if let Some(delay) = self.transit(&link) {
                        self.after(delay, move |_| {
                            let _ = tx.send(msg.body);
                        });
                    }
                    Ok(())
                }
                None => {
                    let sent = lock(&self.inner.issued).get(&msg.dest).copied();
                    // Otherwise a late reply: the client already gave up on it.
                    match sent.is_none_or(|max| irt > max) {
                        true => Err(format!(
                            "a reply to msg_id {irt}, which client {} never sent",
                            msg.dest
                        )),
                        false => Ok(()),
                    }
                }
            }
        } else if SERVICE_NAMES.contains(&msg.dest.as_str()) {
            self.count(|s| s.service_messages += 1);
            let delay = self.latency();
            let caller = from.unwrap_or(writer);
            self.after(delay, move |net| {
                let reply = {
                    let mut rng = lock(&net.inner.rng);
                    lock(&net.inner.services).handle(&msg.dest, caller, &msg.body, &mut rng)
                };
                // Answered to the request's `src`, as Maelstrom's services do.
                let back = Message::new(msg.dest.clone(), msg.src.clone(), reply);
                net.count(|s| {
                    s.messages += 1;
                    *s.by_type.entry(back.kind().to_string()).or_default() += 1;
                });
                if let Err(why) = net.route(back, None, writer) {
                    net.set_fatal(format!("{} answering {}: {why}", msg.dest, msg.src));
                }
            });
            Ok(())
        } else {
            Err(format!(
                "message to {:?}, which is no node, client or service ({})",
                msg.dest,
                SERVICE_NAMES.join(", ")
            ))
        }
    }

    /// Sends a client request to node `node`; the receiver gets the reply body. The body
    /// must carry `msg_id`.
    pub fn request(
        &self,
        client: &str,
        node: usize,
        body: Map<String, Value>,
    ) -> oneshot::Receiver<Map<String, Value>> {
        let (tx, rx) = oneshot::channel();
        let id = body.get("msg_id").and_then(Value::as_u64).unwrap_or(0);
        {
            let mut issued = lock(&self.inner.issued);
            let max = issued.entry(client.to_string()).or_default();
            *max = (*max).max(id);
        }
        lock(&self.inner.pending).insert((client.to_string(), id), tx);
        let msg = Message::new(client, self.inner.node_ids[node].clone(), body);
        let is_init = msg.kind() == "init";
        self.count(|s| {
            s.messages += 1;
            s.client_messages += 1;
            *s.by_type.entry(msg.kind().to_string()).or_default() += 1;
        });
        let delay = self.latency();
        let class = if is_init {
            Delivery::Init
        } else {
            Delivery::Request
        };
        self.after(delay, move |net| net.deliver(node, msg.to_line(), class));
        rx
    }

    /// Drops a request's waiter (its client gave up).
    pub fn forget(&self, client: &str, msg_id: u64) {
        lock(&self.inner.pending).remove(&(client.to_string(), msg_id));
    }

    /// Records one client op of request type `kind` answered (or not) by node `node`
    /// after `elapsed`.
    pub fn record_client_op(&self, node: usize, kind: &str, elapsed: Duration) {
        let name = self.inner.node_ids[node].clone();
        let ms = elapsed.as_secs_f64() * 1000.0;
        let mut acc = lock(&self.inner.stats);
        acc.stats.client_ops += 1;
        if let Some(n) = acc.stats.by_node.get_mut(&name) {
            n.client_ops += 1;
        }
        acc.latencies.entry(name).or_default().push(ms);
        acc.type_latencies
            .entry(kind.to_string())
            .or_default()
            .push(ms);
    }

    /// The statistics so far, with per-op ratios and latency quantiles per node and per
    /// request type.
    pub fn stats(&self) -> NetStats {
        let acc = lock(&self.inner.stats);
        let mut s = acc.stats.clone();
        let ops = s.client_ops.max(1) as f64;
        s.msgs_per_op = s.messages as f64 / ops;
        s.server_msgs_per_op = s.server_messages as f64 / ops;
        for (node, lat) in &acc.latencies {
            if let Some(n) = s.by_node.get_mut(node) {
                n.latency_ms = quantiles(lat);
            }
        }
        s.by_op_type = acc
            .type_latencies
            .iter()
            .map(|(kind, lat)| {
                let t = OpTypeNetStats {
                    client_ops: lat.len() as u64,
                    latency_ms: quantiles(lat),
                };
                (kind.clone(), t)
            })
            .collect();
        s
    }

    fn node_index(&self, id: &str) -> Option<usize> {
        self.inner.node_ids.iter().position(|n| n == id)
    }

    fn count(&self, f: impl FnOnce(&mut NetStats)) {
        f(&mut lock(&self.inner.stats).stats);
    }

    /// The base latency of one message.
    fn latency(&self) -> Duration {
        let mean = self.inner.opts.latency_ms;
        if mean <= 0.0 {
            return Duration::ZERO;
        }
        let ms = match self.inner.opts.latency_dist {
            LatencyDist::Constant => mean,
            LatencyDist::Uniform => lock(&self.inner.rng).gen_range(0.0..2.0 * mean),
            LatencyDist::Exponential => {
                let u: f64 = 1.0 - lock(&self.inner.rng).gen::<f64>();
                -u.ln() * mean
            }
        };
        Duration::from_secs_f64(ms / 1000.0)
    }

    /// How long a message on a link with these faults takes, or `None` if it is lost.
    fn transit(&self, flow: &FlowFaults) -> Option<Duration> {
        if flow.loss > 0.0 && lock(&self.inner.rng).gen_bool(flow.loss.clamp(0.0, 1.0)) {
            self.count(|s| s.dropped_loss += 1);
            return None;
        }
        let mut delay = self.latency() + flow.delay;
        if !flow.jitter.is_zero() {
            let j = flow.jitter.as_secs_f64();
            let d = lock(&self.inner.rng).gen_range(-j..=j);
            delay = Duration::from_secs_f64((delay.as_secs_f64() + d).max(0.0));
        }
        Some(delay)
    }

    /// Runs `f` after `delay` (at once when there is none, which keeps a link's order).
    fn after(&self, delay: Duration, f: impl FnOnce(&MaelstromNet) + Send + 'static) {
        if delay.is_zero() {
            f(self);
            return;
        }
        let net = self.clone();
        self.inner.rt.spawn(async move {
            tokio::time::sleep(delay).await;
            f(&net);
        });
    }

    /// Writes a message (one JSON line) to node `j`'s stdin; drops it if the node is dead
    /// or has not been sent its `init`; holds a request until the node answered `init`.
    fn deliver(&self, j: usize, line: String, class: Delivery) {
        let sent = {
            let mut inbox = lock(&self.inner.inboxes[j]);
            match class {
                Delivery::Init => inbox.init_sent = true,
                _ if !inbox.init_sent => {}
                Delivery::Request if !inbox.init_ok => {
                    inbox.held.push(line);
                    return;
                }
                _ => {}
            }
            inbox.init_sent && inbox.tx.as_ref().is_some_and(|tx| tx.send(line).is_ok())
        };
        let name = &self.inner.node_ids[j];
        self.count(|s| {
            if sent {
                if let Some(n) = s.by_node.get_mut(name) {
                    n.received += 1;
                }
            } else {
                s.dropped_partition += 1;
            }
        });
    }
}

fn is_client(id: &str) -> bool {
    id.strip_prefix('c')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Latency quantiles ([`splitbrain_checkers::quantile`]'s nearest rank); all 0 for none.
fn quantiles(v: &[f64]) -> Latency {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let q = |p: f64| splitbrain_checkers::quantile::quantile_of_sorted(&s, p).unwrap_or(0.0);
    Latency {
        p50: q(0.5),
        p95: q(0.95),
        p99: q(0.99),
        max: q(1.0),
    }
}

impl NetworkFaults for MaelstromNet {
    fn node_count(&self) -> usize {
        self.inner.node_ids.len()
    }

    fn apply(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        *lock(&self.inner.faults) = faults.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_nemesis::CutMode;

    fn net(nodes: usize) -> (MaelstromNet, Vec<mpsc::Receiver<String>>) {
        let net = MaelstromNet::new(
            NodeNames::FROM_ZERO,
            nodes,
            NetOptions {
                latency_ms: 0.0,
                latency_dist: LatencyDist::Constant,
                seed: 1,
            },
        );
        let rxs = (0..nodes)
            .map(|i| {
                let (tx, rx) = mpsc::channel();
                net.set_inbox(i, Some(tx));
                net.mark_initialized(i);
                rx
            })
            .collect();
        (net, rxs)
    }

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn routes_between_nodes_and_drops_across_a_cut() {
        let (net, rx) = net(2);
        net.on_node_line(0, 1, r#"{"src":"n0","dest":"n1","body":{"type":"gossip"}}"#);
        assert!(rx[1].try_recv().unwrap().contains("gossip"));
        let mut f = NetFaults::new();
        f.cut(0, 1, CutMode::Blackhole);
        net.apply(&f).unwrap();
        net.on_node_line(0, 2, r#"{"src":"n0","dest":"n1","body":{"type":"gossip"}}"#);
        assert!(rx[1].try_recv().is_err());
        let s = net.stats();
        assert_eq!((s.server_messages, s.dropped_partition), (2, 1));
        assert!(net.fatal().is_none());
    }

    #[tokio::test]
    async fn a_reply_reaches_its_client_and_a_stranger_reply_is_fatal() {
        let (net, rx) = net(1);
        let c = net.new_client_id();
        let reply = net.request(&c, 0, body(json!({"type":"echo","msg_id":1,"echo":"x"})));
        assert!(rx[0].try_recv().unwrap().contains("\"echo\""));
        net.on_node_line(0, 1, &format!(r#"{{"src":"n0","dest":"{c}","body":{{"type":"echo_ok","in_reply_to":1,"echo":"x"}}}}"#));
        assert_eq!(reply.await.unwrap()["echo"], "x");
        // A second (late, duplicate) reply to a request that was sent is tolerated.
        net.on_node_line(
            0,
            2,
            &format!(r#"{{"src":"n0","dest":"{c}","body":{{"type":"echo_ok","in_reply_to":1}}}}"#),
        );
        assert!(net.fatal().is_none());
        net.on_node_line(
            0,
            3,
            &format!(r#"{{"src":"n0","dest":"{c}","body":{{"type":"echo_ok","in_reply_to":9}}}}"#),
        );
        let why = net.fatal().unwrap();
        assert!(
            why.contains("node n0 stdout line 3") && why.contains("msg_id 9"),
            "{why}"
        );
        assert!(net.aborted().is_cancelled());
    }

    #[tokio::test]
    async fn unreadable_lines_and_unknown_senders_are_fatal_with_the_line() {
        let (net, _rx) = net(2);
        net.on_node_line(1, 7, "not json");
        let why = net.fatal().unwrap();
        assert!(
            why.starts_with("node n1 stdout line 7: expected a JSON message"),
            "{why}"
        );
        let (net, _rx) = super::tests::net(2);
        net.on_node_line(1, 1, r#"{"src":"x9","dest":"n0","body":{"type":"x"}}"#);
        assert!(net
            .fatal()
            .unwrap()
            .contains("src is \"x9\", which is no node"));
    }

    #[tokio::test]
    async fn any_known_src_is_routed_and_faults_follow_the_src() {
        // n1 forwards client c1's request to n0 keeping c1 as src (Maelstrom's raft.py):
        // accepted, and it crosses a cut between n1 and n0, as clients are never cut off.
        let (net, rx) = net(2);
        let c = net.new_client_id();
        let reply = net.request(&c, 1, body(json!({"type":"read","msg_id":1})));
        assert!(rx[1].try_recv().is_ok());
        let mut f = NetFaults::new();
        f.cut(1, 0, CutMode::Blackhole);
        net.apply(&f).unwrap();
        let fwd = format!(r#"{{"src":"{c}","dest":"n0","body":{{"type":"read","msg_id":1}}}}"#);
        net.on_node_line(1, 1, &fwd);
        assert!(rx[0].try_recv().unwrap().contains(&c));
        // n0 answers the client directly.
        let ans =
            format!(r#"{{"src":"n0","dest":"{c}","body":{{"type":"read_ok","in_reply_to":1}}}}"#);
        net.on_node_line(0, 1, &ans);
        assert_eq!(reply.await.unwrap()["type"], "read_ok");
        // A message n1 writes claiming to be n0 is cut as n0's would be (n0 -> n1 is open,
        // n1 -> n0 is cut): routed by its src.
        net.on_node_line(1, 2, r#"{"src":"n0","dest":"n1","body":{"type":"g"}}"#);
        assert!(rx[1].try_recv().is_ok());
        net.on_node_line(1, 3, r#"{"src":"n1","dest":"n0","body":{"type":"g"}}"#);
        assert!(rx[0].try_recv().is_err());
        assert!(net.fatal().is_none());
    }

    #[tokio::test]
    async fn requests_wait_for_init_ok_and_replies_do_not() {
        let net = MaelstromNet::new(
            NodeNames::FROM_ZERO,
            1,
            NetOptions {
                latency_ms: 0.0,
                latency_dist: LatencyDist::Constant,
                seed: 1,
            },
        );
        let (tx, rx) = mpsc::channel();
        net.set_inbox(0, Some(tx));
        // Before init: dropped.
        net.on_node_line(0, 1, r#"{"src":"n0","dest":"n0","body":{"type":"early"}}"#);
        assert!(rx.try_recv().is_err());
        let c = net.new_client_id();
        drop(net.request(&c, 0, body(json!({"type":"init","msg_id":1}))));
        assert!(rx.try_recv().unwrap().contains("init"));
        // While the node handles init: a service answers at once, a request waits.
        net.on_node_line(
            0,
            2,
            r#"{"src":"n0","dest":"lin-tso","body":{"type":"ts","msg_id":7}}"#,
        );
        assert!(rx.try_recv().unwrap().contains("ts_ok"));
        net.on_node_line(0, 3, r#"{"src":"n0","dest":"n0","body":{"type":"gossip"}}"#);
        assert!(rx.try_recv().is_err());
        net.mark_initialized(0);
        assert!(rx.try_recv().unwrap().contains("gossip"));
    }

    #[tokio::test]
    async fn services_answer_the_node_that_asked() {
        let (net, rx) = net(1);
        net.on_node_line(
            0,
            1,
            r#"{"src":"n0","dest":"lin-tso","body":{"type":"ts","msg_id":4}}"#,
        );
        let line = rx[0].try_recv().unwrap();
        let m = parse_line(&line).unwrap();
        assert_eq!(
            (m.src.as_str(), m.kind(), m.in_reply_to()),
            ("lin-tso", "ts_ok", Some(4))
        );
    }

    #[tokio::test]
    async fn lossy_links_lose_about_their_fraction() {
        let (net, rx) = net(2);
        let mut f = NetFaults::new();
        f.flow_mut(0, 1).loss = 0.5;
        net.apply(&f).unwrap();
        for n in 0..1000 {
            net.on_node_line(0, n, r#"{"src":"n0","dest":"n1","body":{"type":"g"}}"#);
        }
        let got = rx[1].try_iter().count();
        assert!((350..650).contains(&got), "{got} of 1000 arrived");
        assert_eq!(net.stats().dropped_loss as usize, 1000 - got);
    }
}
