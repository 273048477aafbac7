#!/usr/bin/env python3
"""broadcast workload. Correct.

Every node keeps the set of messages it has seen and, for each neighbour,
the subset that neighbour is known to have (it acknowledged them, or it
sent them to us). Every 100 ms it sends each neighbour one batch with
everything that neighbour is not known to have; the neighbour merges the
batch and answers with the list it got, which the sender marks as known.
A dropped batch or ack is simply resent on the next tick, so loss and
partitions are survived.

Neighbours follow the topology: on ``topology`` the node keeps its own
entry ``topology[node_id]`` (made symmetric: a node that lists us is our
neighbour too). Messages learned from one neighbour are not known to the
others, so the next tick relays them onward: every message spreads hop by
hop along the graph, one tick per hop, until all nodes have it. Before a
topology arrives, if it has no entry for this node, or if the graph it
describes does not connect all of node_ids, the node gossips to all other
nodes instead.

Restarts: every message between nodes carries the sender's per-process
boot nonce. When a peer's nonce changes, that peer restarted and lost its
set, so everything is marked unknown for it again and it is refilled. A
neighbour that has answered one of our gossips knows our nonce; to any
other neighbour the node sends a ``hello`` 1 s after init (retried until
answered), so a restarted node is refilled even when nothing else is
happening. Gossip that reaches a new process before its ``init`` is
dropped (the sender retries). A restarted node gets no new ``topology``: until it has one it
gossips to all other nodes and asks for the map in its gossips and
hellos; the first answer that carries one restores it.
"""
import os
import secrets
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
BOOT = secrets.token_hex(8)
GOSSIP_INTERVAL = 0.1
HELLO_AFTER = 1.0  # seconds after init: hello to neighbours not yet gossiped with
MAX_BATCH = 5000

messages = set()
known = {}        # peer -> set of messages that peer is known to have
peer_boot = {}    # peer -> last boot nonce seen from it
topo = None       # the whole topology map, once received
neighbours = []   # whom we gossip with (all other nodes until a topology)
hello_done = set()     # peers that answered a hello or gossip (know our nonce)
hello_pending = set()  # peers with a hello in flight
init_time = [0.0]


def note_boot(peer, boot):
    if boot is None:
        return
    if peer_boot.get(peer) != boot:
        if peer in peer_boot:
            # The peer restarted since we last heard from it: it lost its set.
            known[peer] = set()
        peer_boot[peer] = boot


def known_by(peer):
    return known.setdefault(peer, set())


def neighbours_from(t):
    """This node's neighbours in topology map t (symmetric closure), or
    all other nodes if t has no usable entry or does not connect every
    node."""
    others = node.other_nodes()
    if not isinstance(t, dict):
        return others
    ids = set(node.node_ids)
    adj = {n: set() for n in ids}
    for a, bs in t.items():
        if a not in ids or not isinstance(bs, list):
            continue
        for b in bs:
            if b in ids and b != a:
                adj[a].add(b)
                adj[b].add(a)
    seen, todo = {node.node_id}, [node.node_id]
    while todo:
        for b in adj[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    if seen != ids or not adj[node.node_id]:
        return others
    return [n for n in node.node_ids if n in adj[node.node_id]]


def set_topology(t):
    global topo, neighbours
    topo = t
    neighbours = neighbours_from(t)


@node.on_init
def init():
    global neighbours
    neighbours = node.other_nodes()
    init_time[0] = time.monotonic()


def as_list(s):
    try:
        return sorted(s)
    except TypeError:
        return list(s)


@node.handler("topology")
def topology(msg):
    set_topology(msg["body"].get("topology"))
    node.reply(msg, {"type": "topology_ok"})


@node.handler("broadcast")
def broadcast(msg):
    m = msg["body"]["message"]
    messages.add(m)
    node.reply(msg, {"type": "broadcast_ok"})


@node.handler("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "messages": as_list(messages)})


def before_init(msg):
    """A restarted process can get gossip before its init; it has no node
    id to answer from yet, so it drops it (the sender retries)."""
    return node.node_id is None


@node.handler("hello")
def hello(msg):
    if before_init(msg):
        return
    note_boot(msg["src"], msg["body"].get("boot"))
    node.reply(msg, {"type": "hello_ok", "boot": BOOT,
                     "topology": topo if msg["body"].get("want_topology") else None})


@node.handler("gossip")
def gossip(msg):
    if before_init(msg):
        return
    body = msg["body"]
    peer = msg["src"]
    note_boot(peer, body.get("boot"))
    got = body.get("messages", [])
    messages.update(got)
    # What the peer sent, it obviously has; our other neighbours do not
    # know it yet, so the next tick relays it to them.
    known_by(peer).update(got)
    out = {"type": "gossip_ok", "messages": got, "boot": BOOT}
    if body.get("want_topology") and topo is not None:
        out["topology"] = topo
    node.reply(msg, out)


def learn_topology(reply):
    if topo is None and isinstance(reply.get("topology"), dict):
        set_topology(reply["topology"])  # we restarted: learn it back


def on_hello_ok(peer):
    def cb(reply):
        hello_pending.discard(peer)
        if reply.get("type") != "hello_ok":
            return  # timed out: retried on a later tick
        hello_done.add(peer)
        note_boot(peer, reply.get("boot"))
        learn_topology(reply)
    return cb


def on_gossip_ok(peer, sent):
    def cb(reply):
        if reply.get("type") != "gossip_ok":
            return  # timed out: resent on a later tick
        hello_done.add(peer)
        note_boot(peer, reply.get("boot"))
        if peer_boot.get(peer) == reply.get("boot"):
            known_by(peer).update(reply.get("messages", sent))
        learn_topology(reply)
    return cb


@node.periodic(GOSSIP_INTERVAL)
def tick():
    say_hello = time.monotonic() - init_time[0] >= HELLO_AFTER
    for peer in list(neighbours):
        missing = messages - known_by(peer)
        if missing:
            batch = list(missing)[:MAX_BATCH]
            body = {"type": "gossip", "messages": batch, "boot": BOOT}
            if topo is None:
                body["want_topology"] = True
            node.rpc(peer, body, on_gossip_ok(peer, batch), timeout=1.0)
        elif say_hello and peer not in hello_done and peer not in hello_pending:
            hello_pending.add(peer)
            body = {"type": "hello", "boot": BOOT}
            if topo is None:
                body["want_topology"] = True
            node.rpc(peer, body, on_hello_ok(peer), timeout=1.0)


node.run()
