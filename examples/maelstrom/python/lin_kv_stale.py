#!/usr/bin/env python3
"""lin-kv workload. BUG "reads locally".

Writes and cas go to the leader (n0, the first of node_ids) exactly as in
lin_kv.py. The leader pushes every change to the followers
fire-and-forget (plus a full copy every 500 ms); each follower keeps a
local copy (newest version per key wins). READS ARE ANSWERED FROM THE
LOCAL COPY of whichever node gets them, so a follower that has not yet
seen a change (replication delay, dropped push, or a partition between it
and the leader) returns a value that was already overwritten, or error 20
for a key that already exists. Not linearizable; it converges once
replication catches up, so only reads racing writes or a partition show
the bug.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node, key_of  # noqa: E402

node = Node()
FORWARD_TIMEOUT = 1.0
FULL_PUSH_INTERVAL = 0.5
store = {}    # canonical key -> [version, key, value]
version = 0   # leader's change counter


def leader():
    return node.node_ids[0]


def push(entries):
    for peer in node.other_nodes():
        node.send(peer, {"type": "replicate", "entries": entries})


def set_value(key, value):
    global version
    version += 1
    entry = [version, key, value]
    store[key_of(key)] = entry
    push([entry])


@node.handler("read")
def read(msg):
    k = key_of(msg["body"]["key"])
    if k not in store:  # BUG: a follower's local copy may be stale
        node.error(msg, 20, "key does not exist")
    else:
        node.reply(msg, {"type": "read_ok", "value": store[k][2]})


def update(msg):
    if node.node_id != leader():
        node.forward(msg, leader(), FORWARD_TIMEOUT)
        return
    body = msg["body"]
    key = body["key"]
    k = key_of(key)
    if body["type"] == "write":
        set_value(key, body["value"])
        node.reply(msg, {"type": "write_ok"})
        return
    if k not in store:
        if body.get("create_if_not_exists"):
            set_value(key, body["to"])
            node.reply(msg, {"type": "cas_ok"})
        else:
            node.error(msg, 20, "key does not exist")
    elif store[k][2] != body["from"]:
        node.error(msg, 22, "expected %r, had %r" % (body["from"], store[k][2]))
    else:
        set_value(key, body["to"])
        node.reply(msg, {"type": "cas_ok"})


node.on("write", update)
node.on("cas", update)


@node.handler("replicate")
def replicate(msg):
    if node.node_id == leader():
        return
    for entry in msg["body"].get("entries", []):
        ver, key, _ = entry
        k = key_of(key)
        if k not in store or store[k][0] < ver:
            store[k] = list(entry)


@node.periodic(FULL_PUSH_INTERVAL)
def full_push():
    if node.node_id == leader() and store:
        push(list(store.values()))


node.run()
