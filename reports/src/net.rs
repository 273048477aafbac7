//! Message statistics of a network the harness simulates (the `maelstrom` target): what
//! Maelstrom users tune against — messages per client op, by type and by node, and client
//! latency per node and per request type.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::Latency;

/// Counts of the messages one run's simulated network carried.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetStats {
    /// Every message sent, by anyone (clients, nodes, services).
    pub messages: u64,
    /// Messages between two nodes.
    pub server_messages: u64,
    /// Messages between clients and nodes (requests and replies).
    pub client_messages: u64,
    /// Messages between nodes and the harness's services (`lin-kv`, `seq-kv`, ...).
    pub service_messages: u64,
    /// Messages dropped because their link was cut (a partition) or their receiver was
    /// dead or restarting, not yet initialized (a paused receiver's messages wait for it).
    pub dropped_partition: u64,
    /// Messages dropped by random loss.
    pub dropped_loss: u64,
    /// Client operations that completed (ok, fail or info).
    pub client_ops: u64,
    /// `messages / client_ops`.
    pub msgs_per_op: f64,
    /// `server_messages / client_ops`: the cost of the protocol itself.
    pub server_msgs_per_op: f64,
    /// Messages by body `type`.
    pub by_type: BTreeMap<String, u64>,
    /// Per node: messages it sent and received, and the latency of the client ops it served.
    pub by_node: BTreeMap<String, NodeNetStats>,
    /// Per client request type (`send`, `poll`, `read`, ...): ops and their latency.
    #[serde(default)]
    pub by_op_type: BTreeMap<String, OpTypeNetStats>,
}

/// The client operations of one request type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpTypeNetStats {
    /// Client operations of this type that completed (any outcome).
    pub client_ops: u64,
    /// Their latency, in ms.
    pub latency_ms: Latency,
}

/// One node's share of the traffic.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeNetStats {
    /// Messages the node wrote to stdout.
    pub sent: u64,
    /// Messages delivered to the node's stdin.
    pub received: u64,
    /// Client operations answered by this node (any outcome).
    pub client_ops: u64,
    /// Latency of the client operations it answered, in ms.
    pub latency_ms: Latency,
}
