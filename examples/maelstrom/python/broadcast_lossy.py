#!/usr/bin/env python3
"""broadcast workload. BUG "fire-and-forget gossip".

On a client broadcast the node adds the message, acks, and sends it to
every other node exactly once, with no retry, no acknowledgement and no
anti-entropy. Any copy dropped by a partition or by random loss is gone
for good, so after the heal some nodes never read some acknowledged
messages. Without faults it looks correct.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
messages = set()


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
    if m not in messages:
        messages.add(m)
        for peer in node.other_nodes():
            node.send(peer, {"type": "relay", "message": m})
    node.reply(msg, {"type": "broadcast_ok"})


@node.handler("relay")
def relay(msg):
    messages.add(msg["body"]["message"])  # no reply, nothing forwarded


@node.handler("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "messages": as_list(messages)})


node.run()
