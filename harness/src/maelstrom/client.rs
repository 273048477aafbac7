//! The workload client of a Maelstrom node: each logical process is one Maelstrom client
//! (`c1`, `c2`, ...) bound to one node, as Maelstrom binds them; requests go through the
//! simulated network and a reply is matched by `in_reply_to`.

use super::net::MaelstromNet;
use super::workloads::{MaelstromWorkload, Reply};
use crate::target::{BoxFuture, Client, Completion, Invocation};
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
        }
    }
}

impl Client for MaelstromClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            self.next_msg_id += 1;
            let msg_id = self.next_msg_id;
            let mut body = self.workload.request(op);
            body.insert("msg_id".into(), msg_id.into());
            let node_name = Some(self.net.node_ids()[self.node].clone());
            let start = Instant::now();
            let reply =
                tokio::time::timeout(self.timeout, self.net.request(&self.id, self.node, body))
                    .await;
            self.net.record_client_op(self.node, start.elapsed());
            let body = match reply {
                Ok(Ok(b)) => b,
                _ => {
                    self.net.forget(&self.id, msg_id);
                    return Completion::info(op.value.clone(), "timeout", node_name);
                }
            };
            match self.workload.reply(op, &body) {
                Reply::Ok(value) => Completion {
                    op_type: OpType::Ok,
                    value,
                    node: node_name,
                    error: None,
                },
                Reply::Error {
                    definite, error, ..
                } => Completion {
                    op_type: if definite { OpType::Fail } else { OpType::Info },
                    value: op.value.clone(),
                    node: node_name,
                    error: Some(error),
                },
                Reply::Malformed(why) => {
                    let name = node_name.clone().unwrap_or_default();
                    self.net.set_fatal(format!(
                        "node {name} answered client {} msg_id {msg_id}: {why}: {}",
                        self.id,
                        serde_json::Value::Object(body)
                    ));
                    Completion::info(op.value.clone(), "malformed reply", node_name)
                }
            }
        })
    }
}
