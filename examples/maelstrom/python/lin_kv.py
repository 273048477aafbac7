#!/usr/bin/env python3
"""lin-kv workload. Correct: single leader.

The leader is the first of node_ids (n0). It holds the whole map and
answers read, write and cas itself, one message at a time, so every op
takes effect at one instant between its request and its reply. Every
other node forwards each client request to the leader and relays the
answer. If the leader does not answer within 1 s (partition, pause,
loss) the client gets error 0 (timeout, indefinite): the forwarded op may
still take effect later, so no definite error is ever given for it.

Limits: the map is in memory, so killing the leader loses it (not safe
under a kill nemesis); isolating the leader makes every op on the other
side time out, which is correct (unavailable, not wrong).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node, key_of  # noqa: E402

node = Node()
FORWARD_TIMEOUT = 1.0
store = {}  # canonical key -> value


def leader():
    return node.node_ids[0]


def apply(msg):
    """Execute a read/write/cas on the leader's map and reply."""
    body = msg["body"]
    t = body["type"]
    k = key_of(body["key"])
    if t == "read":
        if k not in store:
            node.error(msg, 20, "key does not exist")
        else:
            node.reply(msg, {"type": "read_ok", "value": store[k]})
    elif t == "write":
        store[k] = body["value"]
        node.reply(msg, {"type": "write_ok"})
    elif t == "cas":
        if k not in store:
            if body.get("create_if_not_exists"):
                store[k] = body["to"]
                node.reply(msg, {"type": "cas_ok"})
            else:
                node.error(msg, 20, "key does not exist")
        elif store[k] != body["from"]:
            node.error(msg, 22, "expected %r, had %r" % (body["from"], store[k]))
        else:
            store[k] = body["to"]
            node.reply(msg, {"type": "cas_ok"})


def handle(msg):
    if node.node_id == leader():
        apply(msg)
    else:
        node.forward(msg, leader(), FORWARD_TIMEOUT)


for t in ("read", "write", "cas"):
    node.on(t, handle)

node.run()
