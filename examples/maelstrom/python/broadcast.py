#!/usr/bin/env python3
"""broadcast workload. Correct.

Every node keeps the set of messages it has seen and, for every other
node, the subset that peer has acknowledged. Every 100 ms it sends each
peer one batch with everything that peer has not acknowledged yet; the
peer merges the batch and answers with the list it got, which the sender
marks acknowledged. A dropped batch or ack is simply resent on the next
tick, so loss and partitions are survived: after a heal every node has
every message within a tick or two.

Messages go straight to every other node (all of node_ids), not along the
topology: the topology is accepted and ignored, which is allowed because
every node can reach every other one.

Restarts: every gossip carries the sender's per-process boot nonce. When a
peer's nonce changes, that peer restarted and lost its set, so everything
is marked unacknowledged for it again and it is refilled.
"""
import os
import secrets
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
BOOT = secrets.token_hex(8)
GOSSIP_INTERVAL = 0.1
MAX_BATCH = 5000

messages = set()
acked = {}      # peer -> set of messages that peer confirmed
peer_boot = {}  # peer -> last boot nonce seen from it


def note_boot(peer, boot):
    if boot is None:
        return
    if peer_boot.get(peer) != boot:
        if peer in peer_boot:
            # The peer restarted since we last heard from it: it lost its set.
            acked[peer] = set()
        peer_boot[peer] = boot


@node.on_init
def init():
    for p in node.other_nodes():
        acked.setdefault(p, set())


def as_list(s):
    try:
        return sorted(s)
    except TypeError:
        return list(s)


@node.handler("topology")
def topology(msg):
    node.reply(msg, {"type": "topology_ok"})


@node.handler("broadcast")
def broadcast(msg):
    m = msg["body"]["message"]
    messages.add(m)
    node.reply(msg, {"type": "broadcast_ok"})


@node.handler("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "messages": as_list(messages)})


@node.handler("gossip")
def gossip(msg):
    body = msg["body"]
    peer = msg["src"]
    note_boot(peer, body.get("boot"))
    got = body.get("messages", [])
    messages.update(got)
    # What the peer sent, it obviously has.
    acked.setdefault(peer, set()).update(got)
    node.reply(msg, {"type": "gossip_ok", "messages": got, "boot": BOOT})


def on_gossip_ok(peer, sent):
    def cb(reply):
        if reply.get("type") != "gossip_ok":
            return  # timed out: resent on a later tick
        note_boot(peer, reply.get("boot"))
        if peer_boot.get(peer) == reply.get("boot"):
            acked.setdefault(peer, set()).update(reply.get("messages", sent))
    return cb


@node.periodic(GOSSIP_INTERVAL)
def tick():
    for peer in node.other_nodes():
        missing = messages - acked.setdefault(peer, set())
        if not missing:
            continue
        batch = list(missing)[:MAX_BATCH]
        node.rpc(peer, {"type": "gossip", "messages": batch, "boot": BOOT},
                 on_gossip_ok(peer, batch), timeout=1.0)


node.run()
