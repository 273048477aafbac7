//! The workload client: GET / SET / a compare-and-set script for `register`, RPUSH /
//! LRANGE for `append`, sent (through the `redis` crate) to whichever node Sentinel says
//! is the primary, or reads to a replica.
//!
//! Outcomes as the KV client maps them: an op refused before it reached a server
//! (connection refused, `READONLY` from a demoted primary, `LOADING`) is definite and
//! retried on the primary Sentinel names next, within the op's time; a timeout or a
//! connection broken after the command went out is `info`; `WAIT N` answered by fewer
//! than N replicas is `info` too (the primary has applied the write; whether it survives
//! is unknown).

use super::config::{MASTER_NAME, SENTINEL_PORT};
use crate::systems::{BoxFuture, Client, Completion, Invocation, TargetOptions};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ErrorKind, RedisError, ServerErrorKind, Value as RValue};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How long a client trusts the primary Sentinel last named before asking again, as a
/// Sentinel-aware client that follows `+switch-master` moves after a failover. Clients
/// asking different sentinels then part ways when a partition splits the sentinels.
const PRIMARY_TTL: Duration = Duration::from_millis(1000);
/// Longest wait for a TCP connection (the host link is never cut, so only a paused or
/// overloaded node takes this long).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest wait for one sentinel's answer.
const SENTINEL_TIMEOUT: Duration = Duration::from_millis(300);
/// Pause between attempts after a definite failure (a failover takes a second or more).
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Compare-and-set in one atomic step on the server: `1` if the value was `ARGV[1]` and
/// is now `ARGV[2]`, `0` if it was something else (then nothing was written).
const CAS_SCRIPT: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
    redis.call('SET', KEYS[1], ARGV[2]) return 1 else return 0 end";

/// Where reads go (`--read-mode`): the primary Sentinel names, or another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Reads go where writes go.
    Primary,
    /// Reads go to the process's home node, or the next one if that is the primary the
    /// client believes in: asynchronous replicas may answer with what they have so far.
    Replica,
}

impl ReadFrom {
    /// The mode of `--read-from`, else of `--read-mode` (`primary` when neither is
    /// given): both flags say the same here, `--read-from` being the generic one.
    pub fn from_options(opts: &TargetOptions) -> ReadFrom {
        ReadFrom::parse(opts.read_from.as_deref().or(opts.read_mode.as_deref()))
    }

    /// The read mode of `--read-mode` (`primary` when absent).
    pub fn parse(mode: Option<&str>) -> ReadFrom {
        match mode {
            Some("replica") => ReadFrom::Replica,
            _ => ReadFrom::Primary,
        }
    }
}

/// One process's client.
pub struct RedisClient {
    nodes: Vec<SocketAddr>,
    home: usize,
    timeout: Duration,
    read_from: ReadFrom,
    wait: Option<u32>,
    /// Keys hold lists (`append`: a read is LRANGE) rather than strings (`register`).
    lists: bool,
    /// The primary last named by a sentinel, and when.
    primary: Option<(usize, Instant)>,
    conns: Vec<Option<MultiplexedConnection>>,
    sentinel_conns: Vec<Option<MultiplexedConnection>>,
}

/// One attempt at one node.
enum Attempt {
    /// The op's outcome.
    Done(Completion),
    /// Certainly not applied here (never sent, or refused by the server): the reason.
    Refused(String),
}

impl RedisClient {
    /// A client for the servers at `nodes` (a sentinel beside each), preferring the
    /// sentinel and (for replica reads) the server of node `home`.
    pub fn new(nodes: &[SocketAddr], home: usize, opts: &TargetOptions) -> RedisClient {
        RedisClient {
            nodes: nodes.to_vec(),
            home: home % nodes.len().max(1),
            timeout: opts.op_timeout,
            read_from: ReadFrom::from_options(opts),
            wait: opts.wait,
            lists: opts.workload == "append",
            primary: None,
            conns: vec![None; nodes.len()],
            sentinel_conns: vec![None; nodes.len()],
        }
    }

    async fn run(&mut self, op: &Invocation) -> Completion {
        let deadline = Instant::now() + self.timeout;
        let mut refused = String::from("timeout before any node could be asked");
        loop {
            if Instant::now() >= deadline {
                // every attempt was refused: the op certainly did not happen
                return Completion {
                    op_type: OpType::Fail,
                    value: op.value.clone(),
                    node: None,
                    error: Some(Value::String(refused)),
                };
            }
            let target = if op.f == "read" && self.read_from == ReadFrom::Replica {
                Some(self.replica())
            } else {
                self.primary(deadline).await
            };
            let Some(node) = target else {
                refused = "no sentinel named a primary".into();
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            };
            match self.attempt(node, op, deadline).await {
                Attempt::Done(c) => return c,
                Attempt::Refused(why) => {
                    // the primary may have moved: ask a sentinel again next time
                    self.primary = None;
                    refused = format!("n{}: {why}", node + 1);
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
    }

    /// The node replica reads go to: home, or the next node if home is the primary.
    fn replica(&self) -> usize {
        match self.primary {
            Some((p, _)) if p == self.home && self.nodes.len() > 1 => {
                (self.home + 1) % self.nodes.len()
            }
            _ => self.home,
        }
    }

    /// The primary: the cached answer while fresh, else what the first sentinel that
    /// answers says (home's first), else the stale answer if there is one.
    async fn primary(&mut self, deadline: Instant) -> Option<usize> {
        if let Some((p, at)) = self.primary {
            if at.elapsed() < PRIMARY_TTL {
                return Some(p);
            }
        }
        for k in 0..self.nodes.len() {
            let s = (self.home + k) % self.nodes.len();
            let bound = deadline
                .saturating_duration_since(Instant::now())
                .min(SENTINEL_TIMEOUT);
            if bound.is_zero() {
                break;
            }
            let mut cmd = redis::cmd("SENTINEL");
            cmd.arg("get-master-addr-by-name").arg(MASTER_NAME);
            let addr = sentinel_addr(self.nodes[s]);
            let answer = send(&mut self.sentinel_conns[s], addr, &cmd, bound).await;
            if let Sent::Answer(v) = answer {
                if let Some(p) = self.node_of(&v) {
                    self.primary = Some((p, Instant::now()));
                    return Some(p);
                }
            }
        }
        self.primary.map(|(p, _)| p)
    }

    /// The node a sentinel's `[ip, port]` answer names.
    fn node_of(&self, v: &RValue) -> Option<usize> {
        let RValue::Array(parts) = v else {
            return None;
        };
        let ip: IpAddr = text(parts.first()?)?.parse().ok()?;
        let port: u16 = text(parts.get(1)?)?.parse().ok()?;
        self.nodes
            .iter()
            .position(|a| *a == SocketAddr::new(ip, port))
    }

    async fn attempt(&mut self, node: usize, op: &Invocation, deadline: Instant) -> Attempt {
        let name = Some(format!("n{}", node + 1));
        let key = op.key.as_ref().map(arg_text).unwrap_or_default();
        let cmd = match op.f.as_str() {
            "read" if self.lists => {
                let mut c = redis::cmd("LRANGE");
                c.arg(&key).arg(0).arg(-1);
                c
            }
            "read" => {
                let mut c = redis::cmd("GET");
                c.arg(&key);
                c
            }
            "write" => {
                let mut c = redis::cmd("SET");
                c.arg(&key).arg(arg_text(&op.value));
                c
            }
            "cas" => {
                let (Some(old), Some(new)) = (op.value.get(0), op.value.get(1)) else {
                    return Attempt::Done(fail(op, "cas needs [expected, new]", name));
                };
                let mut c = redis::cmd("EVAL");
                c.arg(CAS_SCRIPT)
                    .arg(1)
                    .arg(&key)
                    .arg(arg_text(old))
                    .arg(arg_text(new));
                c
            }
            "append" => {
                let mut c = redis::cmd("RPUSH");
                c.arg(&key).arg(arg_text(&op.value));
                c
            }
            other => {
                return Attempt::Done(fail(op, &format!("unknown op {other}"), name));
            }
        };
        let addr = self.nodes[node];
        let remaining = deadline.saturating_duration_since(Instant::now());
        let answer = match send(&mut self.conns[node], addr, &cmd, remaining).await {
            Sent::Answer(v) => v,
            Sent::Refused(why) => return Attempt::Refused(why),
            Sent::Failed(why) => return Attempt::Done(fail(op, &why, name)),
            Sent::Unknown(why) => {
                return Attempt::Done(Completion::info(op.value.clone(), why, name))
            }
        };
        let value = match op.f.as_str() {
            "read" => read_value(&answer),
            "cas" if !matches!(answer, RValue::Int(1)) => {
                return Attempt::Done(fail(op, "cas: the value differs", name));
            }
            _ => op.value.clone(),
        };
        if op.f != "read" {
            if let Some(n) = self.wait {
                if let Err(why) = self.wait_replicas(node, n, deadline).await {
                    return Attempt::Done(Completion::info(op.value.clone(), why, name));
                }
            }
        }
        Attempt::Done(Completion {
            op_type: OpType::Ok,
            value,
            node: name,
            error: None,
        })
    }

    /// `WAIT n` on node `node` with what is left of the op's time; `Err` says why the
    /// write's fate is unknown.
    async fn wait_replicas(
        &mut self,
        node: usize,
        n: u32,
        deadline: Instant,
    ) -> Result<(), String> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        // leave the server time to answer before the client gives up; never 0 (forever)
        let wait_ms = remaining
            .saturating_sub(Duration::from_millis(100))
            .max(remaining / 2)
            .as_millis()
            .max(1);
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(n).arg(wait_ms as u64);
        match send(&mut self.conns[node], self.nodes[node], &cmd, remaining).await {
            Sent::Answer(RValue::Int(k)) if k >= i64::from(n) => Ok(()),
            Sent::Answer(RValue::Int(k)) => Err(format!(
                "wait: {k} of {n} replicas acknowledged within {wait_ms} ms"
            )),
            Sent::Answer(other) => Err(format!("wait: unexpected answer {other:?}")),
            Sent::Refused(why) | Sent::Failed(why) | Sent::Unknown(why) => {
                Err(format!("wait: {why}"))
            }
        }
    }
}

impl Client for RedisClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(self.run(op))
    }
}

/// What became of one command sent to one server.
pub(crate) enum Sent {
    /// The server's answer.
    Answer(RValue),
    /// Certainly not applied: no connection could be made, or the server refused it for
    /// its role or state (`READONLY`, `LOADING`, `MASTERDOWN`, `TRYAGAIN`).
    Refused(String),
    /// The server answered with an error: not applied.
    Failed(String),
    /// Sent, but no answer (timeout, broken connection): it may have been applied.
    Unknown(String),
}

/// Sends `cmd` to `addr` within `bound` over the cached connection `conn` (made if
/// missing, dropped after any failure but a server's error answer).
pub(crate) async fn send(
    conn: &mut Option<MultiplexedConnection>,
    addr: SocketAddr,
    cmd: &redis::Cmd,
    bound: Duration,
) -> Sent {
    if bound.is_zero() {
        return Sent::Refused("no time left".into());
    }
    let started = Instant::now();
    if conn.is_none() {
        match connect(addr, bound.min(CONNECT_TIMEOUT)).await {
            Ok(c) => *conn = Some(c),
            Err(why) => return Sent::Refused(why),
        }
    }
    let Some(c) = conn.as_mut() else {
        return Sent::Refused("no connection".into());
    };
    let left = bound.saturating_sub(started.elapsed());
    match tokio::time::timeout(left, cmd.query_async::<RValue>(c)).await {
        Err(_) => {
            *conn = None;
            Sent::Unknown("timeout".into())
        }
        Ok(Ok(v)) => Sent::Answer(v),
        Ok(Err(e)) => classify(conn, &e),
    }
}

/// Sorts an error answer into [`Sent`] (dropping the connection unless the server
/// itself answered).
fn classify(conn: &mut Option<MultiplexedConnection>, e: &RedisError) -> Sent {
    match e.kind() {
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::TryAgain,
        ) => Sent::Refused(e.to_string()),
        ErrorKind::Server(_) | ErrorKind::Extension => Sent::Failed(e.to_string()),
        _ => {
            *conn = None;
            Sent::Unknown(e.to_string())
        }
    }
}

/// A multiplexed connection to `addr`, within `bound`; the error says why not (nothing
/// was sent either way).
pub(crate) async fn connect(
    addr: SocketAddr,
    bound: Duration,
) -> Result<MultiplexedConnection, String> {
    let client = redis::Client::open(format!("redis://{addr}/")).map_err(|e| e.to_string())?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(bound))
        // each command is bounded by the op's own deadline instead
        .set_response_timeout(None);
    match tokio::time::timeout(
        bound + Duration::from_millis(50),
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) if e.is_connection_refusal() => Err("connection refused".into()),
        Ok(Err(e)) => Err(format!("connect: {e}")),
        Err(_) => Err("connect: timeout".into()),
    }
}

/// The sentinel beside the server at `addr`.
pub(crate) fn sentinel_addr(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip(), SENTINEL_PORT)
}

fn fail(op: &Invocation, why: &str, node: Option<String>) -> Completion {
    Completion {
        op_type: OpType::Fail,
        value: op.value.clone(),
        node,
        error: Some(Value::String(why.to_string())),
    }
}

/// A JSON argument as the text Redis stores: strings as they are, numbers as digits.
fn arg_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A bulk or simple string answer as text.
pub(crate) fn text(v: &RValue) -> Option<String> {
    match v {
        RValue::BulkString(b) => String::from_utf8(b.clone()).ok(),
        RValue::SimpleString(s) => Some(s.clone()),
        RValue::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A stored value as JSON: integers as numbers (what the workloads write), anything else
/// as a string, lists element by element, nil as null.
fn read_value(v: &RValue) -> Value {
    match v {
        RValue::Nil => Value::Null,
        RValue::Array(items) => Value::Array(items.iter().map(read_value).collect()),
        other => match text(other) {
            Some(t) => t
                .parse::<i64>()
                .map(|n| json!(n))
                .unwrap_or(Value::String(t)),
            None => Value::String(format!("{other:?}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_read_back_as_the_workloads_wrote_them() {
        assert_eq!(read_value(&RValue::Nil), Value::Null);
        assert_eq!(read_value(&RValue::BulkString(b"3".to_vec())), json!(3));
        assert_eq!(
            read_value(&RValue::Array(vec![
                RValue::BulkString(b"1".to_vec()),
                RValue::BulkString(b"2".to_vec())
            ])),
            json!([1, 2])
        );
        assert_eq!(read_value(&RValue::Array(vec![])), json!([]));
        assert_eq!(arg_text(&json!("k7")), "k7");
        assert_eq!(arg_text(&json!(4)), "4");
    }
}
