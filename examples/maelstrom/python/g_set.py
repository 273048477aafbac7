#!/usr/bin/env python3
"""g-set workload. Correct: a state-based grow-only set.

add puts the element in the local set and acks at once. Every 200 ms the
node sends its whole set to every other node (fire-and-forget); a
receiver merges by union. Union is idempotent, commutative and
associative, so dropped, duplicated and reordered gossip is harmless and
all nodes converge one round after a heal. A restarted node is refilled
by its peers' next rounds.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node, key_of  # noqa: E402

node = Node()
GOSSIP_INTERVAL = 0.2
elements = {}  # canonical JSON -> element (elements may be any JSON value)


@node.handler("add")
def add(msg):
    e = msg["body"]["element"]
    elements[key_of(e)] = e
    node.reply(msg, {"type": "add_ok"})


@node.handler("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "value": list(elements.values())})


@node.handler("replicate")
def replicate(msg):
    for e in msg["body"].get("value", []):
        elements[key_of(e)] = e


@node.periodic(GOSSIP_INTERVAL)
def gossip():
    if not elements:
        return
    value = list(elements.values())
    for peer in node.other_nodes():
        node.send(peer, {"type": "replicate", "value": value})


node.run()
