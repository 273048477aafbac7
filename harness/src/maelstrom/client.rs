//! The workload client of a Maelstrom node: each logical process is one Maelstrom client
//! (`c1`, `c2`, ...) bound to one node, as Maelstrom binds them; requests go through the
//! simulated network and a reply is matched by `in_reply_to`. A kafka client is also a
//! consumer, remembering where it is in each log ([`super::kafka`]).

use super::kafka::{is_final_read, Consumer, FinalRead};
use super::net::MaelstromNet;
use super::workloads::{MaelstromWorkload, Reply};
use crate::systems::{BoxFuture, Client, Completion, Invocation};
use serde_json::{Map, Value};
use splitbrain_checkers::OpType;
use std::time::{Duration, Instant};

/// A client bound to one node.
pub struct MaelstromClient {
    net: MaelstromNet,
    id: String,
    node: usize,
    next_msg_id: u64,
    workload: MaelstromWorkload,
    timeout: Duration,
    consumer: Consumer,
}

impl MaelstromClient {
    /// A fresh client (a new client id) that talks to `node`.
    pub fn new(
        net: MaelstromNet,
        node: usize,
        workload: MaelstromWorkload,
        timeout: Duration,
    ) -> MaelstromClient {
        MaelstromClient {
            id: net.new_client_id(),
            net,
            node,
            next_msg_id: 0,
            workload,
            timeout,
            consumer: Consumer::default(),
        }
    }

    fn node_name(&self) -> Option<String> {
        Some(self.net.node_ids()[self.node].clone())
    }

    /// Sends one request and waits for its reply until `deadline` (`None`: no reply).
    async fn call(
        &mut self,
        mut body: Map<String, Value>,
        deadline: Instant,
    ) -> Option<Map<String, Value>> {
        self.next_msg_id += 1;
        let msg_id = self.next_msg_id;
        body.insert("msg_id".into(), msg_id.into());
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.net.request(&self.id, self.node, body)).await {
            Ok(Ok(b)) => Some(b),
            _ => {
                self.net.forget(&self.id, msg_id);
                None
            }
        }
    }

    /// A reply that broke the workload's schema ends the run: it is a protocol violation.
    fn malformed(&self, why: &str, body: &Map<String, Value>) {
        let name = self.node_name().unwrap_or_default();
        self.net.set_fatal(format!(
            "node {name} answered client {} msg_id {}: {why}: {}",
            self.id,
            self.next_msg_id,
            Value::Object(body.clone())
        ));
    }

    /// One op as one request: the reply (or error) becomes the completion.
    async fn one_request(&mut self, op: &Invocation, deadline: Instant) -> Completion {
        let node = self.node_name();
        let request = match self.workload {
            MaelstromWorkload::Kafka => self.consumer.request(op),
            w => w.request(op),
        };
        let body = match self.call(request.clone(), deadline).await {
            Some(b) => b,
            None => return Completion::info(op.value.clone(), "timeout", node),
        };
        let reply = match (self.workload, self.workload.reply(op, &body)) {
            (MaelstromWorkload::Kafka, Reply::Ok(_)) => self.consumer.complete(op, &request, &body),
            (_, r) => r,
        };
        self.completion(op, reply, &body)
    }

    /// The completion a reply makes of an op (a malformed one also ends the run).
    fn completion(&self, op: &Invocation, reply: Reply, body: &Map<String, Value>) -> Completion {
        let node = self.node_name();
        match reply {
            Reply::Ok(value) => Completion {
                op_type: OpType::Ok,
                value,
                node,
                error: None,
            },
            Reply::Error {
                definite, error, ..
            } => Completion {
                op_type: if definite { OpType::Fail } else { OpType::Info },
                value: op.value.clone(),
                node,
                error: Some(error),
            },
            Reply::Malformed(why) => {
                self.malformed(&why, body);
                Completion::info(op.value.clone(), "malformed reply", node)
            }
        }
    }

    /// A kafka final read: polls until every key returns nothing new, one completion.
    async fn final_read(&mut self, op: &Invocation, deadline: Instant) -> Completion {
        let node = self.node_name();
        let mut read = FinalRead::new(op);
        let mut sent = 0;
        while let Some(request) = read.next_request(sent) {
            sent += 1;
            let body = match self.call(request, deadline).await {
                Some(b) => b,
                None => return Completion::info(op.value.clone(), "timeout", node),
            };
            let reply = match self.workload.reply(op, &body) {
                Reply::Ok(_) => read.absorb(&body).err().map(Reply::Malformed),
                other => Some(other),
            };
            if let Some(r) = reply {
                return self.completion(op, r, &body);
            }
        }
        Completion {
            op_type: OpType::Ok,
            value: read.value(),
            node,
            error: None,
        }
    }
}

impl Client for MaelstromClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let start = Instant::now();
            let deadline = start + self.timeout;
            let c = if self.workload == MaelstromWorkload::Kafka && is_final_read(op) {
                self.final_read(op, deadline).await
            } else {
                self.one_request(op, deadline).await
            };
            let kind = self.workload.request(op);
            let kind = kind.get("type").and_then(Value::as_str).unwrap_or("?");
            self.net.record_client_op(self.node, kind, start.elapsed());
            c
        })
    }
}
