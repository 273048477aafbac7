#!/usr/bin/env python3
"""kafka workload. Bug: offsets assigned locally per node.

Every node keeps its own copy of every log ({offset: msg} per key) and
answers every request itself. A send takes the next offset after the
highest this node knows of, is acknowledged at once, and is pushed to
every peer (and the whole state again every 200 ms, until the peers have
it). A peer keeps the first message it learns at an offset.

Two nodes that take a send for the same key before hearing of each
other's hand out the same offset to two messages: any concurrency does
it a little, a partition does it for as long as it lasts. Afterwards one
of the two messages is gone from every log but its sender's (lost
write), and polls disagree about what an offset holds (inconsistent
offsets). Committed offsets are local too (max per node, gossiped).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
logs = {}  # key -> {offset: msg}
committed = {}  # key -> highest committed offset this node knows


def learn(key, offset, msg):
    log = logs.setdefault(key, {})
    if offset not in log:
        log[offset] = msg


def state():
    return {"logs": {k: [[o, m] for o, m in log.items()] for k, log in logs.items()},
            "committed": committed}


@node.handler("send")
def send(msg):
    key = msg["body"]["key"]
    log = logs.setdefault(key, {})
    offset = max(log, default=-1) + 1
    log[offset] = msg["body"]["msg"]
    node.reply(msg, {"type": "send_ok", "offset": offset})
    for peer in node.other_nodes():
        node.send(peer, {"type": "replicate", "logs": {key: [[offset, log[offset]]]},
                         "committed": {}})


@node.handler("replicate")
def replicate(msg):
    for key, entries in msg["body"].get("logs", {}).items():
        for offset, m in entries:
            learn(key, int(offset), m)
    for key, o in msg["body"].get("committed", {}).items():
        committed[key] = max(committed.get(key, -1), int(o))


@node.periodic(0.2)
def gossip():
    if logs or committed:
        s = state()
        for peer in node.other_nodes():
            node.send(peer, {"type": "replicate", **s})


@node.handler("poll")
def poll(msg):
    out = {}
    for key, start in msg["body"].get("offsets", {}).items():
        log = logs.get(key, {})
        entries = []
        o = int(start)
        # Contiguous from the first offset at or after start.
        later = sorted(x for x in log if x >= o)
        for x in later:
            if entries and x != entries[-1][0] + 1:
                break
            entries.append([x, log[x]])
        if entries:
            out[key] = entries
    node.reply(msg, {"type": "poll_ok", "msgs": out})


@node.handler("commit_offsets")
def commit(msg):
    for key, o in msg["body"].get("offsets", {}).items():
        committed[key] = max(committed.get(key, -1), int(o))
    node.reply(msg, {"type": "commit_offsets_ok"})


@node.handler("list_committed_offsets")
def list_committed(msg):
    out = {k: committed[k] for k in msg["body"].get("keys", []) if k in committed}
    node.reply(msg, {"type": "list_committed_offsets_ok", "offsets": out})


node.run()
