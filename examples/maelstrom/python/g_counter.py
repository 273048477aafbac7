#!/usr/bin/env python3
"""g-counter and pn-counter workloads. Correct: a state-based PN-counter.

State is two maps, P and N, from a writer id to that writer's running
total of positive (P) and absolute negative (N) deltas. The node only ever
raises its own entries; merging takes the max per entry, so repeated,
lost and reordered gossip is harmless. read = sum(P) - sum(N). With only
non-negative deltas (g-counter) N stays empty.

The writer id is node id + a per-process boot nonce, so a restarted node
starts fresh entries instead of counting from 0 under its old entry
(where max-merge with the peers' copy of the old entry would swallow new
adds).

Every 100 ms the whole state is sent to every other node (fire-and-forget).
"""
import os
import secrets
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
GOSSIP_INTERVAL = 0.1
BOOT = secrets.token_hex(6)
P = {}
N = {}
me = None


@node.on_init
def init():
    global me
    me = "%s:%s" % (node.node_id, BOOT)


@node.handler("add")
def add(msg):
    delta = msg["body"]["delta"]
    if not isinstance(delta, int) or isinstance(delta, bool):
        node.error(msg, 12, "delta must be an integer")
        return
    if delta >= 0:
        P[me] = P.get(me, 0) + delta
    else:
        N[me] = N.get(me, 0) - delta
    node.reply(msg, {"type": "add_ok"})


@node.handler("read")
def read(msg):
    node.reply(msg, {"type": "read_ok",
                     "value": sum(P.values()) - sum(N.values())})


def merge(mine, theirs):
    for k, v in theirs.items():
        if isinstance(v, int) and v > mine.get(k, 0):
            mine[k] = v


@node.handler("counter_state")
def counter_state(msg):
    merge(P, msg["body"].get("p", {}))
    merge(N, msg["body"].get("n", {}))


@node.periodic(GOSSIP_INTERVAL)
def gossip():
    if not P and not N:
        return
    for peer in node.other_nodes():
        node.send(peer, {"type": "counter_state", "p": P, "n": N})


node.run()
